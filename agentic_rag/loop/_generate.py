"""The generate phase: the answer drafted from the best evidence (or the draft kept for it), and
delivered once its citations are checked."""
from __future__ import annotations

from collections.abc import Sequence

from ..core import Answer, Evidence, GradedAnswer
from ..steps import generate_answer, question_weights, verify_citations
from ._endings import abstain
from ._patch import Patch
from ._run import Run, traced
from ._state import AgentState


def generate(state: AgentState, run: Run, patch: Patch) -> str:
    """Draft the answer from the best evidence (generate_answer), or take the draft kept for this same
    evidence (draft_for) instead of generating again. Next: "grade" when verify was unsure (the reply
    grades the evidence too); else what delivering it gives ("check", or "done" for a direct reply or
    an abstention); "verify" when a pending grade may not come in the reply (e.g. a resumed run)."""
    shown = [] if state["stop_reason"] == "direct" else state["evidence"][:run.config.evidence_k]
    pending = bool(shown) and state["grade_pending"]
    if pending and not run.folds:
        return "verify"
    reused = bool(shown) and state["draft_for"] == [e["id"] for e in shown] and bool(state["draft_answer"])
    if reused:
        patch.set(draft_for=[])  # used up: a later stop drafts anew
        draft: Answer = GradedAnswer(answer=state["draft_answer"], reason="drafted for this evidence before its grade")
        patch.note("generate", "generate:kept", {"answer": draft.answer})
    else:
        draft = _draft(state, run, patch, shown, pending)
    patch.set(draft_answer=draft.answer)
    if pending:
        patch.set(draft_reply=draft.model_dump())
        return "grade"
    if reused and run.on_token:
        run.on_token(draft.answer)  # a kept draft was not streamed: handed over whole once it stands
    return deliver(state, patch, shown, draft)


def _draft(state: AgentState, run: Run, patch: Patch, shown: list[Evidence], graded: bool) -> Answer:
    """generate_answer over the evidence shown, traced; with `graded`, the reply grades the evidence
    too and is not streamed (its grade may yet send the run on)."""
    with traced(state, run, patch, "generate") as event:
        draft = generate_answer(state["standalone"], shown, run.meter, state["parts"],
                                question_weights(state["standalone"], run.kb.term_weights(state["standalone"])),
                                None if graded else run.on_token, grade=graded, embedder=run.kb.embedder,
                                instructions=state["instructions"])
        event["detail"] = draft.model_dump()
    return draft


def deliver(state: AgentState, patch: Patch, shown: Sequence[Evidence], draft: Answer) -> str:
    """Write the draft as the answer once verify_citations dropped markers that point nowhere.
    "check"; "done" for a direct reply, or an abstention when no answer could be drawn."""
    answer, citations, removed = verify_citations(draft.answer, shown)
    patch.set(answer=answer, citations=citations, removed_citations=removed)
    if removed:
        patch.note("citations", f"citations:-{len(removed)}", {"removed": removed})
    direct = patch.get(state, "stop_reason") == "direct"
    if not answer:
        return abstain(state, patch, "exhausted", "the direct reply was empty" if direct else
                       f"no answer could be drawn from the evidence ({draft.reason})")
    return "done" if direct else "check"
