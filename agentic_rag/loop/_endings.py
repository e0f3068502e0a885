"""How a run ends: settle (retrieval stopped: answer from what there is, or abstain), abstain (a clear
refusal), finish (the answer as the user reads it) and the notes it adds (answer_notes)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..steps import hedge_note, number_citations, refusal_reason, refusal_text, unmentioned_note
from ._patch import Patch
from ._run import Run
from ._state import AgentState


def settle(state: AgentState, run: Run, patch: Patch, stop_reason: str) -> str:
    """Retrieval stopped (stop_condition said why) without a sufficient grade: answer from what there
    is ("generate"), or abstain ("done") for the reason refusal_reason gives."""
    patch.set(stop_reason=stop_reason)
    why = refusal_reason(stop_reason, state["grade"], bool(state["evidence"]), run.config.run)
    return abstain(state, patch, stop_reason, why) if why else "generate"


def abstain(state: AgentState, patch: Patch, stop_reason: str, why: str, names: Sequence[str] = ()) -> str:
    """End the run with a clear refusal (refusal_text) that says what was searched, how well it scored
    and what the closest passages are about (or the `names` the documents never mention), keeping a
    stop reason already set; "done". Reads the state as `patch` leaves it."""
    grade = patch.get(state, "grade")
    score = grade["score"] if grade else 0.0
    stop_reason = patch.get(state, "stop_reason") or stop_reason
    closest = list(dict.fromkeys(e.get("title") or e["doc_id"] for e in patch.get(state, "evidence")[:3]))
    patch.set(answer=refusal_text(patch.get(state, "standalone"), why, patch.get(state, "queries_tried"), score,
                                  stop_reason, names, closest), citations=[], abstained=True, abstain_reason=why,
              stop_reason=stop_reason)
    patch.note("abstain", "abstain", {"why": why})
    return "done"


def finish(state: AgentState) -> Patch:
    """The answer as the user gets it, once the run's answer is final (after the faithfulness check
    and repair, which read markers as positions in the evidence shown): its sources numbered 1..k in
    the order it first cites them (number_citations; the trace keeps what the model wrote), and the
    lines answer_notes adds."""
    answer, citations = number_citations(state["answer"], state["citations"])
    return Patch({"answer": "\n".join([answer, *answer_notes(state)]) if answer else answer, "citations": citations})


def answer_notes(state: Mapping[str, Any]) -> list[str]:
    """The lines an answer adds below what it says. On an answer (not a refusal): the grade of
    evidence that was never graded sufficient (the run answered from the closest passages it found),
    and the names the question gives as an aside that the documents never mention (the mentions
    event). Then one for each tool the router wanted that the run had not got (tool:NAME:off)."""
    notes = []
    if not state["abstained"] and state["stop_reason"] != "direct":
        grade = state["grade"]
        if grade and not grade["sufficient"] and state["stop_reason"] != "sufficient":
            notes.append(hedge_note(state["standalone"], grade, state["config"]["min_context_score"]))
        aside = [t for e in state["trace"] if e["step"] == "mentions" for t in e["detail"]["aside"]]
        if aside:
            notes.append(unmentioned_note(state["standalone"], aside))
    return notes + [e["detail"]["note"] for e in state["trace"]
                    if e["step"] == "tool" and e["summary"].endswith(":off")]
