"""The answer's phases: generate drafts it, grade takes the grade folded into the draft's reply,
check tests it against the evidence (and repairs it once)."""
from __future__ import annotations

from collections.abc import Sequence

from ..core._schemas import Answer, Faithfulness, GradedAnswer
from ..steps import check_faithfulness, generate_answer, repair_answer, verify_citations
from ..steps._decisions import after_faithfulness
from ..steps._verify import folded_grade, question_weights
from ._phases import Run, abstain, after_grade, grade_evidence, present, record, traced
from ._state import AgentState, Evidence


def _shown(state: AgentState, run: Run) -> list[Evidence]:
    """The evidence an answer is drawn from: the best of the pool; none for a direct reply."""
    return [] if state["stop_reason"] == "direct" else state["evidence"][:run.config.evidence_k]


def generate(state: AgentState, run: Run) -> str:
    """Draft the answer from the best evidence (generate_answer), or take the draft kept for this same
    evidence (draft_for) instead of generating again. Next: "grade" when verify was unsure (the reply
    grades the evidence too); else what delivering it gives ("check", or "done" for a direct reply or
    an abstention); "verify" when a pending grade may not come in the reply (e.g. a resumed run)."""
    shown = _shown(state, run)
    pending = bool(shown) and state["grade_pending"]
    if pending and not run.folds:
        return "verify"
    reused = bool(shown) and state["draft_for"] == [e["id"] for e in shown] and bool(state["draft_answer"])
    if reused:
        state["draft_for"] = []  # used up: a later stop drafts anew
        draft: Answer = GradedAnswer(answer=state["draft_answer"], reason="drafted for this evidence before its grade")
        record(state, "generate", "generate:kept", {"answer": draft.answer}, 0.0, 0)
    else:
        with traced(state, run, "generate") as event:
            draft = generate_answer(state["standalone"], shown, run.meter, state["parts"],
                                    question_weights(state["standalone"], run.kb.term_weights(state["standalone"])),
                                    None if pending else run.on_token, grade=pending, embedder=run.kb.embedder,
                                    instructions=state["instructions"])
            event["detail"] = draft.model_dump()
    state["draft_answer"] = draft.answer
    if pending:
        state["draft_reply"] = draft.model_dump()
        return "grade"
    if reused and run.on_token:
        run.on_token(draft.answer)  # a kept draft was not streamed: handed over whole once it stands
    return _deliver(state, shown, draft)


def grade(state: AgentState, run: Run) -> str:
    """Take the grade that came in the draft's reply (folded_grade); a reply without one is graded
    apart (verify_sufficiency), and so is the rest of the run, as is a run that may not fold (a
    grader of its own). Next: "route" when the grade sends the run on, keeping the
    draft for a stop to answer with; else what delivering the draft gives."""
    shown, draft = state["evidence"][:run.config.evidence_k], GradedAnswer(**present(state["draft_reply"]))
    state["draft_reply"] = None
    folded = folded_grade(draft, run.config.min_context_score) if run.folds else None
    if folded is not None:
        record(state, "verify", f"verify:{folded.score:.2f}", folded.model_dump(), 0.0, 0)
    else:
        if run.folds:  # the model gave no grade: ask for it apart, now and for the rest of the run
            run.fold_grades = state["fold_grades"] = False
        folded = grade_evidence(state, run, shown)  # not deferred: a grade
    if after_grade(state, run, present(folded)) == "route":
        state["draft_for"] = [e["id"] for e in shown]  # the draft stands for this evidence
        return "route"
    if run.on_token:
        run.on_token(draft.answer)  # drafted unstreamed while its grade was to come: handed over whole once it stands
    return _deliver(state, shown, draft)


def _deliver(state: AgentState, shown: Sequence[Evidence], draft: Answer) -> str:
    """Write the draft as the answer once verify_citations dropped markers that point nowhere.
    "check"; "done" for a direct reply, or an abstention when no answer could be drawn."""
    answer, citations, removed = verify_citations(draft.answer, shown)
    state.update({"answer": answer, "citations": citations, "removed_citations": removed})
    if removed:
        record(state, "citations", f"citations:-{len(removed)}", {"removed": removed}, 0.0, 0)
    direct = state["stop_reason"] == "direct"
    if not answer:
        return abstain(state, "exhausted", "the direct reply was empty" if direct else
                       f"no answer could be drawn from the evidence ({draft.reason})")
    return "done" if direct else "check"


def _faithfulness(state: AgentState, run: Run, answer: str, shown: Sequence[Evidence]) -> Faithfulness:
    with traced(state, run, "faithfulness") as event:
        verdict = check_faithfulness(state["standalone"], answer, shown, run.meter, state["parts"])
        event.update(summary=f"faithfulness:{verdict.score:.2f}", detail=verdict.model_dump())
    return verdict


def check(state: AgentState, run: Run) -> str:
    """Check the answer against the evidence (check_faithfulness); repair an unsupported one once
    (repair_answer). Next: "done" (answered, or abstained when still unsupported), or "route" for
    one more round aimed at a part the answer left out."""
    settings, shown = run.config.run, state["evidence"][:run.config.evidence_k]
    verdict = _faithfulness(state, run, state["answer"], shown)
    decision = after_faithfulness(verdict, bool(state["answer"]), state["repairs"], state["reflections"],
                                  state["round"], settings)
    if decision == "repair":
        state["repairs"] += 1
        with traced(state, run, "repair") as event:
            fixed = repair_answer(state["standalone"], state["answer"], verdict.unsupported, shown, run.meter)
            event["detail"] = fixed.model_dump()
        answer, citations, _ = verify_citations(fixed.answer, shown)
        state.update({"answer": answer, "citations": citations})
        verdict = _faithfulness(state, run, answer, shown)
        decision = after_faithfulness(verdict, bool(answer), state["repairs"], state["reflections"], state["round"],
                                      settings, repaired=True)
    state["faithfulness"] = verdict.model_dump()
    if decision == "abstain":
        return abstain(state, state["stop_reason"] or "exhausted",
                       f"the answer was not supported by the evidence (faithfulness {verdict.score:.2f})")
    if decision == "reflect":
        state["reflections"] += 1  # one more round aimed at what the answer left out
        state["rounds"][-1]["incomplete_answer"] = True  # this round's convergence no longer stops the run
        state.update({"missing": verdict.missing, "stop_reason": None})
        return "route"
    return "done"
