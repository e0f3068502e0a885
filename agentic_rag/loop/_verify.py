"""The verify phase: the evidence graded (verify_sufficiency), and the grade taken into the state,
which decides between an answer and another round."""
from __future__ import annotations

from collections.abc import Sequence

from ..core import Evidence, Grade
from ..steps import count_low_rounds, question_weights, unseen_terms, verify_sufficiency, wants_tool_first
from ._patch import Patch
from ._route import tool_failures
from ._run import Run, present, traced
from ._state import AgentState


def verify(state: AgentState, run: Run, patch: Patch) -> str:
    """Grade the evidence with verify_sufficiency, which costs no model call when its deterministic
    check is confident; a stalled round keeps the grade before, with no call. Next: "generate" when
    sufficient, or unsure (the answer's reply then grades too, and can still send the run on);
    "route" for another round (stop_condition decides whether there is one), or first for a tool
    that the evidence now gives its arguments."""
    if state["rounds"][-1].get("stalled"):  # grading the same evidence again could only say the same
        patch.note("verify", "verify:stalled",
                   dict(present(state["grade"]), why="no new passage holds what the evidence lacked"))
        return after_grade(state, run, patch, Grade(**present(state["grade"])))
    grade = grade_evidence(state, run, patch, state["evidence"][:run.config.evidence_k], defer=run.folds)
    if grade is None:
        patch.set(grade_pending=True)  # generate asks for it in the same reply
        return "generate"
    return after_grade(state, run, patch, grade)


def after_grade(state: AgentState, run: Run, patch: Patch, grade: Grade) -> str:
    """Take a grade into the state: "generate" when sufficient (and no tool is wanted first), else "route"."""
    c = run.config
    patch.set(grade=grade.model_dump(), missing=grade.missing, grade_pending=False)
    patch.update_round(state, grade=grade.score)
    patch.set(low_rounds=count_low_rounds(grade.score, state["low_rounds"], c.low_confidence_floor))
    wants_tool = wants_tool_first(grade.sufficient, state["round"], c.max_rounds, lambda: run.tools.select(
        state["standalone"], state["evidence"][:c.evidence_k], tuple(patch.get(state, "used_tools"))))
    tool_failures(state, run, patch)
    if grade.sufficient and not wants_tool:
        patch.set(stop_reason="sufficient")
        return "generate"
    return "route"


def grade_evidence(state: AgentState, run: Run, patch: Patch, shown: Sequence[Evidence],
                   defer: bool = False) -> Grade | None:
    """verify_sufficiency with the knowledge base's word weights, traced; with `defer`, None when its
    deterministic check is unsure (the grade then comes with the answer)."""
    kb_weights = run.kb.term_weights(state["standalone"])
    with traced(state, run, patch, "verify") as event:
        grade = verify_sufficiency(state["standalone"], shown, run.meter, run.config.min_context_score,
                                   question_weights(state["standalone"], kb_weights),
                                   unseen_terms(state["standalone"], kb_weights), defer=defer)
        event.update(summary=f"verify:{grade.score:.2f}" if grade else "verify:?",
                     detail=grade.model_dump() if grade else {"unsure": "graded with the answer"})
    return grade
