"""The loop's phase handlers: each runs one step, writes its result into the state, records a
trace event and names the next phase. With run_agentic_rag, the only code that changes a state."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ._config import Config
from ._schemas import RouteDecision, SubQuery
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
from .steps._verify import question_weights, unseen_terms
from .tools._registry import ToolRegistry


@dataclass
class Run:
    """What one run holds besides its state: the knowledge base, the metered model, tools, settings."""

    kb: KnowledgeBase
    meter: Meter                # the caller's model, wrapped: counts tokens and enforces the budget
    tools: ToolRegistry
    config: Config
    deadline: float             # time.monotonic() after which no new round starts
    on_token: Callable[[str], object] | None = None


def record(state: AgentState, step: str, summary: str, detail: dict, ms: float, tokens: int,
           cost: float = 0.0) -> None:
    """Append one trace event and add its time to the step's total."""
    state["trace"].append({"round": state["round"], "step": step, "summary": summary, "detail": detail,
                           "ms": round(ms, 2), "tokens": tokens, "cost_usd": round(cost, 8)})
    state["timings_ms"][step] = round(state["timings_ms"].get(step, 0) + ms, 2)


def _timed(state: AgentState, run: Run, step: str, fn, *args, summary=None, detail=None, **kwargs):
    """Run a step function, then record it (summary and detail drawn from the result)."""
    tokens, cost, start = run.meter.tokens_used, run.meter.usage["cost_usd"], time.perf_counter()
    result = fn(*args, **kwargs)
    detail = detail(result) if detail else result.model_dump() if hasattr(result, "model_dump") else {"result": result}
    record(state, step, summary(result) if summary else step, detail, (time.perf_counter() - start) * 1000,
           run.meter.tokens_used - tokens, run.meter.usage["cost_usd"] - cost)
    return result


def abstain(state: AgentState, stop_reason: str, why: str) -> None:
    """End the run with a clear refusal that says what was searched and how well it scored."""
    searched = "; ".join(state["queries_tried"][:4]) or "nothing"
    score = state["grade"]["score"] if state["grade"] else 0.0
    if has_cjk(state["question"]):
        message = f"知识库中没有找到可靠的答案。原因：{why}。已检索：{searched}；最佳证据得分 {score:.2f}。"
    else:
        message = (f"The knowledge base does not hold a reliable answer to this. Why: {why}. Searched for: "
                   f"{searched}; best evidence score {score:.2f}.")
    state.update(answer=message, citations=[], abstained=True, abstain_reason=why, phase="done",
                 stop_reason=state["stop_reason"] or stop_reason)
    record(state, "abstain", "abstain", {"why": why}, 0.0, 0)


def settle(state: AgentState, run: Run, stop_reason: str) -> None:
    """Retrieval stops without a sufficient grade: answer from what there is, or abstain when it is too weak."""
    state["stop_reason"] = stop_reason
    score = state["grade"]["score"] if state["grade"] else 0.0
    gives_up = stop_reason == "exhausted" and not run.config.answer_when_exhausted
    if stop_reason == "low_confidence" or gives_up or score < run.config.answer_floor or not state["evidence"]:
        grade = f": {state['grade']['reason']}" if state["grade"] and state["grade"].get("reason") else ""
        abstain(state, stop_reason, f"evidence stayed insufficient (last score {score:.2f}, needs "
                                    f"{run.config.min_context_score:.2f}){grade}; retrieval stopped: {stop_reason}")
    else:
        state["phase"] = "generate"


def _route(state: AgentState, run: Run) -> None:
    state["round"] += 1
    decision = _timed(state, run, "route", route_query, state["question"], run.meter, run.tools,
                      state["evidence"][:run.config.evidence_k], tuple(state["used_tools"]), _sources(run),
                      tuple(state["sources_tried"]),
                      summary=lambda d: f"route:{d.route}" + (f"({d.tool})" if d.tool else "")
                      + (f"@{d.source}" if d.source != "vector" and d.route != "tool" else ""))
    state["route"] = decision.model_dump()
    _tool_failures(state, run)
    if decision.route == "direct":
        state.update(stop_reason="direct", phase="generate")
    else:
        state["phase"] = "tool" if decision.route == "tool" else "search"


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
    plan = _timed(state, run, "decompose", decompose_query, question, state["queries_tried"],
                  state["evidence"][:c.evidence_k], run.meter, c.max_subqueries,
                  summary=lambda d: f"decompose:{len(d.subqueries)}").subqueries
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
    rewrite = _timed(state, run, "rewrite", rewrite_query, state["question"], state["missing"],
                     state["queries_tried"], state["evidence"][:run.config.evidence_k], run.meter,
                     summary=lambda r: "rewrite" if r else "rewrite:none")
    return SubQuery(query=rewrite.query) if rewrite else None


def _found(outcome: SearchOutcome) -> str:
    """The documents a search added, for the trace line (at most four)."""
    return ",".join(dict.fromkeys(i.split("#")[0] for i in outcome.new_ids[:4])) or "nothing new"


def _search(state: AgentState, run: Run) -> None:
    source, question, c = state["route"].get("source", "vector"), state["question"], run.config
    if source == "graph":
        outcome = _timed(state, run, "graph", graph_search, question, run.kb, state["evidence"], c.search_k,
                         summary=lambda o: f"graph:{_found(o)}",
                         detail=lambda o: {"new": o.new_ids, "paths": {e["id"]: e.get("path", []) for e in o.pool
                                                                      if e["id"] in o.new_ids}})
    elif source == "web":
        call = RouteDecision(route="tool", tool="web_search", arguments={"query": question})
        items, error = _timed(state, run, "web", call_tool, call, run.tools,
                              summary=lambda r: "web:" + (f"{len(r[0])} results" if not r[1] else "error"),
                              detail=lambda r: {"results": [i["source"] for i in r[0]], "error": r[1]})
        outcome = merge_into_pool([items], run.kb, question, state["evidence"], [f"web: {question}"])
    else:
        plan = _plan(state, run)
        if not plan:
            return settle(state, run, "exhausted")
        filters, dropped = usable_filters(state["route"].get("filters"))
        if dropped:  # a filter the model invented: search without it, and say so
            record(state, "filters", f"filters:-{len(dropped)}", {"dropped": dropped}, 0.0, 0)
        outcome = _timed(state, run, "search", vector_search, plan, run.kb, question, state["evidence"], c.search_k,
                         filters, c.parallel_searches,
                         summary=lambda o: f"search:{_found(o)}",
                         detail=lambda o: {"queries": o.queries_run, "new": o.new_ids, "top": o.round_ids[:8]})
    if source not in state["sources_tried"]:
        state["sources_tried"].append(source)
    top = outcome.round_ids[:c.evidence_k]
    overlap = len(set(top) & set(state["last_top"])) / max(1, len(set(top) | set(state["last_top"])))
    converged = state["round"] > 1 and (not outcome.new_ids or overlap >= c.converge_jaccard)
    state["queries_tried"] += outcome.queries_run
    state["rounds"].append({"round": state["round"], "route": state["route"]["route"], "source": source,
                            "queries": outcome.queries_run, "new": len(outcome.new_ids), "converged": converged})
    state.update(evidence=outcome.pool, last_top=top, phase="verify")


def _tool(state: AgentState, run: Run) -> None:
    decision = state["route"]
    items, error = _timed(state, run, "tool", call_tool, RouteDecision(**decision), run.tools,
                          summary=lambda r: f"tool:{decision['tool']}" + (":error" if r[1] else ""),
                          detail=lambda r: {"results": [i["text"][:300] for i in r[0]], "error": r[1]})
    state["used_tools"].append(decision["tool"])
    state["rounds"].append({"round": state["round"], "route": "tool", "tool": decision["tool"], "error": error})
    if error:
        state["phase"] = "route"  # the next round routes again, without this tool
        return
    ids = {i["id"] for i in items}
    state["evidence"] = items + [e for e in state["evidence"] if e["id"] not in ids]
    state.update(stop_reason="sufficient", phase="generate",
                 grade={"score": 1.0, "sufficient": True, "missing": [], "reason": "a tool answered", "by": "tool"})


def _verify(state: AgentState, run: Run) -> None:
    c = run.config
    kb_weights = run.kb.term_weights(state["question"])
    grade = _timed(state, run, "verify", verify_sufficiency, state["question"], state["evidence"][:c.evidence_k],
                   run.meter, c.min_context_score, question_weights(state["question"], kb_weights),
                   unseen_terms(state["question"], kb_weights), summary=lambda g: f"verify:{g.score:.2f}")
    state.update(grade=grade.model_dump(), missing=grade.missing)
    state["rounds"][-1]["grade"] = grade.score
    state["low_rounds"] = state["low_rounds"] + 1 if grade.score < c.low_confidence_floor else 0
    wants_tool = grade.sufficient and state["round"] < c.max_rounds and \
        run.tools.select(state["question"], state["evidence"][:c.evidence_k], tuple(state["used_tools"]))
    _tool_failures(state, run)
    if wants_tool:
        state["phase"] = "route"  # the evidence now gives a tool the question asks for its arguments: use it first
    elif grade.sufficient:
        state.update(stop_reason="sufficient", phase="generate")
    elif state["low_rounds"] >= 2:
        settle(state, run, "low_confidence")
    elif state["rounds"][-1].get("converged"):
        settle(state, run, "converged")
    else:
        state["phase"] = "route"


def _generate(state: AgentState, run: Run) -> None:
    shown = [] if state["stop_reason"] == "direct" else state["evidence"][:run.config.evidence_k]
    weights = question_weights(state["question"], run.kb.term_weights(state["question"]))
    draft = _timed(state, run, "generate", generate_answer, state["question"], shown, run.meter, state["parts"],
                   weights, run.on_token)
    answer, citations, removed = verify_citations(draft.answer, shown)
    state.update(draft_answer=draft.answer, answer=answer, citations=citations, removed_citations=removed)
    if removed:
        record(state, "citations", f"citations:-{len(removed)}", {"removed": removed}, 0.0, 0)
    if state["stop_reason"] == "direct":
        state["phase"] = "done"
    elif not answer:
        abstain(state, "exhausted", f"no answer could be drawn from the evidence ({draft.reason})")
    else:
        state["phase"] = "check"


def _check(state: AgentState, run: Run) -> None:
    c, shown = run.config, state["evidence"][:run.config.evidence_k]
    verdict = _timed(state, run, "faithfulness", check_faithfulness, state["question"], state["answer"], shown,
                     run.meter, state["parts"], summary=lambda f: f"faithfulness:{f.score:.2f}")
    if verdict.score < c.min_faithfulness and verdict.unsupported and state["repairs"] < c.max_repairs:
        state["repairs"] += 1
        fixed = _timed(state, run, "repair", repair_answer, state["question"], state["answer"], verdict.unsupported,
                       shown, run.meter)
        answer, citations, _ = verify_citations(fixed.answer, shown)
        state.update(answer=answer, citations=citations)
        verdict = _timed(state, run, "faithfulness", check_faithfulness, state["question"], answer, shown, run.meter,
                         state["parts"], summary=lambda f: f"faithfulness:{f.score:.2f}")
    state["faithfulness"] = verdict.model_dump()
    if not state["answer"] or verdict.score < c.abstain_floor:
        abstain(state, state["stop_reason"] or "exhausted",
                f"the answer was not supported by the evidence (faithfulness {verdict.score:.2f})")
    elif not verdict.complete and state["reflections"] < 1 and state["round"] < c.max_rounds:
        state["reflections"] += 1  # reflect: one more round aimed at what the answer left out
        state.update(missing=verdict.missing, stop_reason=None, phase="route")
    else:
        state["phase"] = "done"


STEPS: dict[str, Callable[[AgentState, Run], None]] = {
    "route": _route, "search": _search, "tool": _tool, "verify": _verify, "generate": _generate, "check": _check}
