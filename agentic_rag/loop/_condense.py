"""The condense phase: a follow-up written to stand alone, and the passages it carries forward."""
from __future__ import annotations

from typing import cast

from ..core import Evidence
from ..steps import condense_query, merge_into_pool
from ._history import carried_evidence, history_lines
from ._patch import Patch
from ._run import Run, traced
from ._state import AgentState


def condense(state: AgentState, run: Run, patch: Patch) -> str:
    """A follow-up's first phase: condense_query writes the question to stand alone from the history
    (standalone, what the run routes, searches and grades), and the passages the previous answer
    cited that the knowledge base still holds (none when the question moved on to another version
    or name: carried_evidence) start the evidence pool, marked carried and ranked against it (cited
    again only where they support the new answer). Next: "route"."""
    with traced(state, run, patch, "condense") as event:
        condensed = condense_query(state["question"], history_lines(state["history"]), run.meter, run.kb,
                                   run.config.search_k)
        carried = carried_evidence(state["history"], condensed.standalone)
        if carried:  # only what the knowledge base, as this run may see it, still holds
            documents = set(run.kb.held_documents([e["doc_id"] for e in carried]))
            carried = [e for e in carried if e["doc_id"] in documents]
        held = run.kb.bm25_scores(condensed.standalone, [e["id"] for e in carried]) if carried else {}
        kept = [cast(Evidence, {**e, "kind": "passage", "ranks": e.get("ranks", {}), "rank": run.config.search_k,
                                "carried": True}) for e in carried if e["id"] in held]
        patch.set(standalone=condensed.standalone)
        patch.set(evidence=merge_into_pool([], run.kb, condensed.standalone, kept, []).pool)
        changed = condensed.standalone != state["question"]
        event.update(summary="condense" if changed else "condense:as-asked",
                     detail={**condensed.model_dump(), "carried": [e["id"] for e in kept]})
    return "route"
