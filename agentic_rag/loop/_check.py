"""The check phase: the answer tested against the evidence (check_faithfulness), repaired once when
unsupported, and what follows (after_faithfulness): done, abstain, or one more round."""
from __future__ import annotations

from collections.abc import Sequence

from ..core import Evidence, Faithfulness
from ..steps import after_faithfulness, check_faithfulness, repair_answer, verify_citations
from ._endings import abstain
from ._patch import Patch
from ._run import Run, traced
from ._state import AgentState


def check(state: AgentState, run: Run, patch: Patch) -> str:
    """Check the answer against the evidence (check_faithfulness); repair an unsupported one once
    (repair_answer). Next: "done" (answered, or abstained when still unsupported), or "route" for
    one more round aimed at a part the answer left out."""
    shown = state["evidence"][:run.config.evidence_k]
    verdict = _faithfulness(state, run, patch, state["answer"], shown)
    decision = after_faithfulness(verdict, bool(state["answer"]), state["repairs"], state["reflections"],
                                  state["round"], run.config.run)
    if decision == "repair":
        verdict, decision = _repair(state, run, patch, verdict, shown)
    patch.set(faithfulness=verdict.model_dump())
    if decision == "abstain":
        return abstain(state, patch, state["stop_reason"] or "exhausted",
                       f"the answer was not supported by the evidence (faithfulness {verdict.score:.2f})")
    if decision == "reflect":
        patch.set(reflections=state["reflections"] + 1)  # one more round aimed at what the answer left out
        patch.update_round(state, incomplete_answer=True)  # this round's convergence no longer stops the run
        patch.set(missing=verdict.missing, stop_reason=None)
        return "route"
    return "done"


def _repair(state: AgentState, run: Run, patch: Patch, verdict: Faithfulness,
            shown: Sequence[Evidence]) -> tuple[Faithfulness, str]:
    """The answer repaired once (repair_answer), its citations checked again, and the repaired
    answer's verdict with what follows it."""
    repairs = state["repairs"] + 1
    patch.set(repairs=repairs)
    with traced(state, run, patch, "repair") as event:
        fixed = repair_answer(state["standalone"], state["answer"], verdict.unsupported, shown, run.meter)
        event["detail"] = fixed.model_dump()
    answer, citations, _ = verify_citations(fixed.answer, shown)
    patch.set(answer=answer, citations=citations)
    verdict = _faithfulness(state, run, patch, answer, shown)
    return verdict, after_faithfulness(verdict, bool(answer), repairs, state["reflections"], state["round"],
                                       run.config.run, repaired=True)


def _faithfulness(state: AgentState, run: Run, patch: Patch, answer: str,
                  shown: Sequence[Evidence]) -> Faithfulness:
    with traced(state, run, patch, "faithfulness") as event:
        verdict = check_faithfulness(state["standalone"], answer, shown, run.meter, state["parts"])
        event.update(summary=f"faithfulness:{verdict.score:.2f}", detail=verdict.model_dump())
    return verdict
