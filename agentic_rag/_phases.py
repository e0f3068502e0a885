"""The loop's phase handlers: each calls its step functions, writes their results into the state,
records a trace event per step and returns the next phase. With run_agentic_rag, the only code
that changes a state; which phase follows which is spelled out in _loop.py."""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from ._config import Config
from ._lexical import adds_needed, bridge_entities
from ._schemas import Faithfulness, Grade, GradedAnswer, RouteDecision, SubQuery
from ._state import AgentState
from .kb import KnowledgeBase
from .kb._tokenize import has_cjk
from .models._meter import Meter
from .steps import (
    call_tool,
    check_faithfulness,
    decompose_query,
    generate_answer,
    graph_search,
    repair_answer,
    rewrite_query,
    route_query,
    vector_search,
    verify_citations,
    verify_sufficiency,
)
from .steps._search import SearchOutcome, merge_into_pool, usable_filters
from .steps._verify import folded_grade, question_weights, unseen_terms
from .tools._registry import ToolRegistry


@dataclass
class Run:
    """What one run holds besides its state: the knowledge base, the metered model, tools, settings."""

    kb: KnowledgeBase
    meter: Meter                # the caller's model, wrapped: counts tokens and enforces the budget
    tools: ToolRegistry
    config: Config
    deadline: float             # time.monotonic() after which no round starts and no model call goes on
    on_token: Callable[[str], object] | None = None
    fold_grades: bool = True    # off once the model answers without a grade, or when grading has its own model

    @property
    def folds(self) -> bool:
        """Whether an unsure grade is asked for with the answer (not when streaming: only a graded answer streams)."""
        return self.fold_grades and self.on_token is None


def record(state: AgentState, step: str, summary: str, detail: dict, ms: float, tokens: int,
           cost: float = 0.0) -> None:
    """Append one trace event and add its time to the step's total."""
    state["trace"].append({"round": state["round"], "step": step, "summary": summary, "detail": detail,
                           "ms": round(ms, 2), "tokens": tokens, "cost_usd": round(cost, 8)})
    state["timings_ms"][step] = round(state["timings_ms"].get(step, 0) + ms, 2)


@contextmanager
def traced(state: AgentState, run: Run, step: str):
    """Time the block and record it as one trace event with the tokens and cost it used. The block
    fills in the event: `summary` (the trace line's word; the step's name unless set) and `detail`.
    A block that raises records nothing."""
    event = {"summary": step, "detail": {}}
    tokens, cost, start = run.meter.tokens_used, run.meter.usage["cost_usd"], time.perf_counter()
    yield event
    record(state, step, event["summary"], event["detail"], (time.perf_counter() - start) * 1000,
           run.meter.tokens_used - tokens, run.meter.usage["cost_usd"] - cost)


def abstain(state: AgentState, stop_reason: str, why: str) -> str:
    """End the run with a clear refusal that says what was searched and how well it scored; "done"."""
    searched = "; ".join(state["queries_tried"][:4]) or "nothing"
    score = state["grade"]["score"] if state["grade"] else 0.0
    if has_cjk(state["question"]):
        message = f"知识库中没有找到可靠的答案。原因：{why}。已检索：{searched}；最佳证据得分 {score:.2f}。"
    else:
        message = (f"The knowledge base does not hold a reliable answer to this. Why: {why}. Searched for: "
                   f"{searched}; best evidence score {score:.2f}.")
    state.update(answer=message, citations=[], abstained=True, abstain_reason=why,
                 stop_reason=state["stop_reason"] or stop_reason)
    record(state, "abstain", "abstain", {"why": why}, 0.0, 0)
    return "done"


def settle(state: AgentState, run: Run, stop_reason: str) -> str:
    """Retrieval stopped (stop_condition said why) without a sufficient grade: answer from what there
    is ("generate"), or abstain ("done") on low confidence, a spent budget, or a grade too weak."""
    state["stop_reason"] = stop_reason
    score = state["grade"]["score"] if state["grade"] else 0.0
    if stop_reason == "token_budget":
        return abstain(state, stop_reason, "the token budget ran out before another round")
    gives_up = stop_reason == "exhausted" and not run.config.answer_when_exhausted
    if stop_reason == "low_confidence" or gives_up or score < run.config.answer_floor or not state["evidence"]:
        grade = f": {state['grade']['reason']}" if state["grade"] and state["grade"].get("reason") else ""
        return abstain(state, stop_reason, f"evidence stayed insufficient (last score {score:.2f}, needs "
                                           f"{run.config.min_context_score:.2f}){grade}; retrieval stopped: "
                                           f"{stop_reason}")
    return "generate"


def route(state: AgentState, run: Run) -> str:
    """Start a round: route_query picks the route (direct, vector, multi_hop, tool) and the source.
    Next: "generate" for a direct reply, "tool", or "search"."""
    state["round"] += 1
    with traced(state, run, "route") as event:
        decision = route_query(state["question"], run.meter, run.tools, state["evidence"][:run.config.evidence_k],
                               tuple(state["used_tools"]), _sources(run), tuple(state["sources_tried"]))
        event.update(detail=decision.model_dump(), summary=f"route:{decision.route}"
                     + (f"({decision.tool})" if decision.tool else "")
                     + (f"@{decision.source}" if decision.source != "vector" and decision.route != "tool" else ""))
    state["route"] = decision.model_dump()
    _tool_failures(state, run)
    if decision.route == "direct":
        state["stop_reason"] = "direct"
        return "generate"
    return "tool" if decision.route == "tool" else "search"


def _tool_failures(state: AgentState, run: Run) -> None:
    """A tool whose argument finder raised is a failed tool: traced, and not used again."""
    for name, why in run.tools.take_failures():
        state["used_tools"].append(name)
        record(state, "tool", f"tool:{name}:error", {"error": why}, 0.0, 0)


def _sources(run: Run) -> tuple[str, ...]:
    """The configured sources this run can use: the graph when the knowledge base has one, the web
    when a web_search tool is registered."""
    usable = {"vector": True, "graph": run.kb.graph_size[1] > 0, "web": "web_search" in run.tools.tools}
    return tuple(s for s in run.config.sources if usable[s]) or ("vector",)


def _plan(state: AgentState, run: Run) -> list[SubQuery]:
    """Round 1: the question as is, plus its sub-queries when the route is multi-hop. Later rounds:
    one rewrite aimed at what is missing, else a decomposition along bridge names in the evidence."""
    question, c = state["question"], run.config
    first, multi = "vector" not in state["sources_tried"], state["route"]["route"] == "multi_hop"
    if first and not multi:
        return [SubQuery(query=question)]
    if not first and not multi and (rewrite := _rewrite(state, run)):
        return [rewrite]
    with traced(state, run, "decompose") as event:
        decomposition = decompose_query(question, state["queries_tried"], state["evidence"][:c.evidence_k],
                                        run.meter, c.max_subqueries)
        plan = decomposition.subqueries
        event.update(summary=f"decompose:{len(plan)}", detail=decomposition.model_dump())
    if plan:
        state["subqueries"] = [q.model_dump() for q in plan]
    if first:
        if plan and all(not q.depends_on for q in plan):
            state["parts"] = [q.query for q in plan]  # a comparison: the answer must cover each
        return [SubQuery(query=question)] + [SubQuery(query=q.query, depends_on=[d + 1 for d in q.depends_on])
                                             for q in plan]
    return plan or ([rewrite] if (rewrite := _rewrite(state, run)) else [])


def _rewrite(state: AgentState, run: Run) -> SubQuery | None:
    """One rewrite per run (max_rewrites), never of a query already tried."""
    if state["rewrites"] >= run.config.max_rewrites:
        return None
    state["rewrites"] += 1
    with traced(state, run, "rewrite") as event:
        rewrite = rewrite_query(state["question"], state["missing"], state["queries_tried"],
                                state["evidence"][:run.config.evidence_k], run.meter)
        event.update(summary="rewrite" if rewrite else "rewrite:none",
                     detail=rewrite.model_dump() if rewrite else {"result": None})
    return SubQuery(query=rewrite.query) if rewrite else None


def _found(outcome: SearchOutcome) -> str:
    """The documents a search added, for the trace line (at most four)."""
    return ",".join(dict.fromkeys(i.split("#")[0] for i in outcome.new_ids[:4])) or "nothing new"


def search(state: AgentState, run: Run) -> str:
    """Retrieve from the routed source into the evidence pool: graph_search, the web_search tool, or
    vector_search over a plan (the question; later rounds rewrite_query, then decompose_query).
    Next: "verify"; "route" with the round marked exhausted when no query is left to try."""
    source, question, c = state["route"].get("source", "vector"), state["question"], run.config
    if source == "graph":
        with traced(state, run, "graph") as event:
            outcome = graph_search(question, run.kb, state["evidence"], c.search_k)
            event.update(summary=f"graph:{_found(outcome)}", detail={
                "new": outcome.new_ids, "paths": {e["id"]: e.get("path", []) for e in outcome.pool
                                                  if e["id"] in outcome.new_ids}})
    elif source == "web":
        with traced(state, run, "web") as event:
            items, error = call_tool(RouteDecision(route="tool", tool="web_search", arguments={"query": question}),
                                     run.tools)
            event.update(summary="web:" + (f"{len(items)} results" if not error else "error"),
                         detail={"results": [i["source"] for i in items], "error": error})
        outcome = merge_into_pool([items], run.kb, question, state["evidence"], [f"web: {question}"])
    else:
        plan = _plan(state, run)
        if not plan:  # stop_condition ends the run with "exhausted"
            state["rounds"].append({"round": state["round"], "route": state["route"]["route"], "source": source,
                                    "queries": [], "new": 0, "converged": False, "exhausted": True})
            return "route"
        filters, dropped = usable_filters(state["route"].get("filters"))
        if dropped:  # a filter the model invented: search without it, and say so
            record(state, "filters", f"filters:-{len(dropped)}", {"dropped": dropped}, 0.0, 0)
        with traced(state, run, "search") as event:
            outcome = vector_search(plan, run.kb, question, state["evidence"], c.search_k, filters,
                                    c.parallel_searches)
            event.update(summary=f"search:{_found(outcome)}", detail={
                "queries": outcome.queries_run, "new": outcome.new_ids, "top": outcome.round_ids[:8]})
        if state["route"]["route"] == "multi_hop":
            outcome = _bridge(state, run, outcome, filters)
    if source not in state["sources_tried"]:
        state["sources_tried"].append(source)
    top = outcome.round_ids[:c.evidence_k]
    overlap = len(set(top) & set(state["last_top"])) / max(1, len(set(top) | set(state["last_top"])))
    converged = state["round"] > 1 and (not outcome.new_ids or overlap >= c.converge_jaccard)
    state["queries_tried"] += outcome.queries_run
    state["rounds"].append({"round": state["round"], "route": state["route"]["route"], "source": source,
                            "queries": outcome.queries_run, "new": len(outcome.new_ids), "converged": converged})
    shown, graded = state["evidence"][:c.evidence_k], state["grade"]
    if graded and not graded["sufficient"] and not adds_needed(state["question"], state["missing"], shown,
                                                                   outcome.pool[:c.evidence_k]):
        # nothing the grade lacked came in: the graded evidence stays as it was and its grade stands for
        # this round too, with no call; stop_condition ends retrieval (low_confidence or converged)
        state["rounds"][-1].update(converged=True, stalled=True)
        record(state, "verify", "verify:stalled", dict(graded, why="no new passage holds what the evidence lacked"),
               0.0, 0)
        return _after_grade(state, run, Grade(**graded))
    state.update(evidence=outcome.pool, last_top=top)
    return "verify"


def _bridge(state: AgentState, run: Run, outcome: SearchOutcome, filters: dict) -> SearchOutcome:
    """A multi-hop question's next hop, with no model call: the names that the best passages hold and
    the question does not (a passage's title, a name in its text), each searched on its own, so that
    the passage about that entity joins the pool (two names, three hits each: chosen on half 1)."""
    tried = set(state["queries_tried"]) | set(outcome.queries_run)
    names = [n for n in bridge_entities(state["question"], outcome.pool[:run.config.evidence_k], 2) if n not in tried]
    if not names:
        return outcome
    with traced(state, run, "bridge") as event:
        bridged = vector_search([SubQuery(query=n) for n in names], run.kb, state["question"], outcome.pool, 3,
                                filters, run.config.parallel_searches)
        event.update(summary=f"bridge:{_found(bridged)}", detail={"names": names, "new": bridged.new_ids})
    return SearchOutcome(pool=bridged.pool, new_ids=outcome.new_ids + bridged.new_ids,
                         round_ids=outcome.round_ids + [i for i in bridged.round_ids if i not in outcome.round_ids],
                         queries_run=outcome.queries_run + bridged.queries_run)


def tool(state: AgentState, run: Run) -> str:
    """Call the routed tool (call_tool); its result becomes evidence that needs no grading.
    Next: "generate", or "route" (without this tool) when it failed."""
    decision = state["route"]
    with traced(state, run, "tool") as event:
        items, error = call_tool(RouteDecision(**decision), run.tools)
        event.update(summary=f"tool:{decision['tool']}" + (":error" if error else ""),
                     detail={"results": [i["text"][:300] for i in items], "error": error})
    state["used_tools"].append(decision["tool"])
    state["rounds"].append({"round": state["round"], "route": "tool", "tool": decision["tool"], "error": error})
    if error:
        return "route"
    ids = {i["id"] for i in items}
    state["evidence"] = items + [e for e in state["evidence"] if e["id"] not in ids]
    state.update(stop_reason="sufficient",
                 grade={"score": 1.0, "sufficient": True, "missing": [], "reason": "a tool answered", "by": "tool"})
    return "generate"


def verify(state: AgentState, run: Run) -> str:
    """Grade the evidence with verify_sufficiency, which costs no model call when its deterministic
    check is confident. Next: "generate" when sufficient, or unsure (the answer's reply then grades
    too, and can still send the run on); "route" for another round (stop_condition decides whether
    there is one), or first for a tool that the evidence now gives its arguments."""
    grade = _grade(state, run, state["evidence"][:run.config.evidence_k], defer=run.folds)
    if grade is None:
        state["rounds"][-1]["grade"] = None  # pending: generate asks for it in the same reply
        return "generate"
    return _after_grade(state, run, grade)


def _after_grade(state: AgentState, run: Run, grade: Grade) -> str:
    """Take a grade into the state: "generate" when sufficient (and no tool is wanted first), else "route"."""
    c = run.config
    state.update(grade=grade.model_dump(), missing=grade.missing)
    state["rounds"][-1]["grade"] = grade.score
    state["low_rounds"] = state["low_rounds"] + 1 if grade.score < c.low_confidence_floor else 0
    wants_tool = grade.sufficient and state["round"] < c.max_rounds and \
        run.tools.select(state["question"], state["evidence"][:c.evidence_k], tuple(state["used_tools"]))
    _tool_failures(state, run)
    if grade.sufficient and not wants_tool:
        state["stop_reason"] = "sufficient"
        return "generate"
    return "route"


def generate(state: AgentState, run: Run) -> str:
    """Draft the answer from the best evidence (generate_answer) and drop citations that point
    nowhere (verify_citations). When verify was unsure, the same reply grades the evidence: a grade
    below the threshold sends the run on ("route") and keeps the draft, which a stop then answers
    with instead of generating again. Next: "check"; "done" for a direct reply or an abstention."""
    shown = [] if state["stop_reason"] == "direct" else state["evidence"][:run.config.evidence_k]
    pending = bool(shown) and "grade" in state["rounds"][-1] and state["rounds"][-1]["grade"] is None
    if pending and not run.folds:  # e.g. a resumed run that may not fold
        return _after_grade(state, run, _grade(state, run, shown))
    kept = next((r["drafted"] for r in reversed(state["rounds"]) if "drafted" in r), None)
    reused = bool(shown) and kept == [e["id"] for e in shown] and bool(state["draft_answer"])
    if reused:
        for r in state["rounds"]:
            r.pop("drafted", None)  # used up: a later stop drafts anew
        draft = GradedAnswer(answer=state["draft_answer"], reason="drafted for this evidence before its grade")
        record(state, "generate", "generate:kept", {"answer": draft.answer}, 0.0, 0)
    else:
        with traced(state, run, "generate") as event:
            draft = generate_answer(state["question"], shown, run.meter, state["parts"],
                                    question_weights(state["question"], run.kb.term_weights(state["question"])),
                                    None if pending else run.on_token, grade=pending)
            event["detail"] = draft.model_dump()
    state["draft_answer"] = draft.answer
    if pending:
        grade = folded_grade(draft, run.config.min_context_score)
        if grade is None:  # the model gave no grade: ask for it apart, now and for the rest of the run
            run.fold_grades = False
            grade = _grade(state, run, shown)
        else:
            record(state, "verify", f"verify:{grade.score:.2f}", grade.model_dump(), 0.0, 0)
        if _after_grade(state, run, grade) == "route":
            state["rounds"][-1]["drafted"] = [e["id"] for e in shown]  # the draft stands for this evidence
            return "route"
    if (pending or reused) and run.on_token:
        run.on_token(draft.answer)  # not streamed while ungraded: handed over whole once it stands
    answer, citations, removed = verify_citations(draft.answer, shown)
    state.update(answer=answer, citations=citations, removed_citations=removed)
    if removed:
        record(state, "citations", f"citations:-{len(removed)}", {"removed": removed}, 0.0, 0)
    if state["stop_reason"] == "direct":
        return "done"
    if not answer:
        return abstain(state, "exhausted", f"no answer could be drawn from the evidence ({draft.reason})")
    return "check"


def _grade(state: AgentState, run: Run, shown: list, defer: bool = False) -> Grade | None:
    """verify_sufficiency with the knowledge base's word weights, traced; with `defer`, None when its
    deterministic check is unsure (the grade then comes with the answer)."""
    kb_weights = run.kb.term_weights(state["question"])
    with traced(state, run, "verify") as event:
        grade = verify_sufficiency(state["question"], shown, run.meter, run.config.min_context_score,
                                   question_weights(state["question"], kb_weights),
                                   unseen_terms(state["question"], kb_weights), defer=defer)
        event.update(summary=f"verify:{grade.score:.2f}" if grade else "verify:?",
                     detail=grade.model_dump() if grade else {"unsure": "graded with the answer"})
    return grade


def _faithfulness(state: AgentState, run: Run, answer: str, shown: list) -> Faithfulness:
    with traced(state, run, "faithfulness") as event:
        verdict = check_faithfulness(state["question"], answer, shown, run.meter, state["parts"])
        event.update(summary=f"faithfulness:{verdict.score:.2f}", detail=verdict.model_dump())
    return verdict


def check(state: AgentState, run: Run) -> str:
    """Check the answer against the evidence (check_faithfulness); repair an unsupported one once
    (repair_answer). Next: "done" (answered, or abstained when still unsupported), or "route" for
    one more round aimed at a part the answer left out."""
    c, shown = run.config, state["evidence"][:run.config.evidence_k]
    verdict = _faithfulness(state, run, state["answer"], shown)
    if verdict.score < c.min_faithfulness and verdict.unsupported and state["repairs"] < c.max_repairs:
        state["repairs"] += 1
        with traced(state, run, "repair") as event:
            fixed = repair_answer(state["question"], state["answer"], verdict.unsupported, shown, run.meter)
            event["detail"] = fixed.model_dump()
        answer, citations, _ = verify_citations(fixed.answer, shown)
        state.update(answer=answer, citations=citations)
        verdict = _faithfulness(state, run, answer, shown)
    state["faithfulness"] = verdict.model_dump()
    if not state["answer"] or verdict.score < c.abstain_floor:
        return abstain(state, state["stop_reason"] or "exhausted",
                       f"the answer was not supported by the evidence (faithfulness {verdict.score:.2f})")
    if not verdict.complete and state["reflections"] < 1 and state["round"] < c.max_rounds:
        state["reflections"] += 1  # reflect: one more round aimed at what the answer left out
        state["rounds"][-1]["incomplete_answer"] = True  # this round's convergence no longer stops the run
        state.update(missing=verdict.missing, stop_reason=None)
        return "route"
    return "done"
