"""The grade phase: the grade that came in the draft's reply taken (or asked for apart), and the
draft delivered or kept for a later stop."""
from __future__ import annotations

from ..core import GradedAnswer
from ..steps import folded_grade
from ._generate import deliver
from ._patch import Patch
from ._run import Run, present
from ._state import AgentState
from ._verify import after_grade, grade_evidence


def grade(state: AgentState, run: Run, patch: Patch) -> str:
    """Take the grade that came in the draft's reply (folded_grade); a reply without one is graded
    apart (verify_sufficiency), and so is the rest of the run, as is a run that may not fold (a
    grader of its own). Next: "route" when the grade sends the run on, keeping the
    draft for a stop to answer with; else what delivering the draft gives."""
    shown, draft = state["evidence"][:run.config.evidence_k], GradedAnswer(**present(state["draft_reply"]))
    patch.set(draft_reply=None)
    folded = folded_grade(draft, run.config.min_context_score) if run.folds else None
    if folded is not None:
        patch.note("verify", f"verify:{folded.score:.2f}", folded.model_dump())
    else:
        if run.folds:  # the model gave no grade: ask for it apart, now and for the rest of the run
            run.fold_grades = False
            patch.set(fold_grades=False)
        folded = grade_evidence(state, run, patch, shown)  # not deferred: a grade
    if after_grade(state, run, patch, present(folded)) == "route":
        patch.set(draft_for=[e["id"] for e in shown])  # the draft stands for this evidence
        return "route"
    if run.on_token:
        run.on_token(draft.answer)  # drafted unstreamed while its grade was to come: handed over whole once it stands
    return deliver(state, patch, shown, draft)
