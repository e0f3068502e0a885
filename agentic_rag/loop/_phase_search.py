"""The search phase: plan the round's queries (rewrite_query, decompose_query), retrieve from the
routed source, and take what the round found into the state, or find that it stalled."""
from __future__ import annotations

from ..core._schemas import RouteDecision, SubQuery
from ..steps import call_tool, decompose_query, graph_search, pagerank_search, rewrite_query, vector_search
from ..steps._bridge import bridge_names, bridge_search
from ..steps._plan import first_hop_plan, plan_strategy
from ..steps._progress import detect_convergence, detect_stall
from ..steps._search import SearchOutcome, merge_into_pool, usable_filters
from ._phases import Run, present, record, traced
from ._state import AgentState, Round


def _plan(state: AgentState, run: Run) -> list[SubQuery]:
    """The round's queries as plan_strategy says: the question; a rewrite aimed at what is missing;
    or a decomposition along bridge names in the evidence (round 1: first_hop_plan)."""
    first = "vector" not in state["sources_tried"]
    strategy = plan_strategy(present(state["route"])["route"], not first)
    if strategy == "question":
        return [SubQuery(query=state["standalone"])]
    if strategy == "rewrite" and (rewrite := _rewrite(state, run)):
        return [rewrite]
    plan = _decompose(state, run)
    if first:
        queries, parts = first_hop_plan(state["standalone"], plan)
        if parts:
            state["parts"] = parts  # a comparison: the answer must cover each
        return queries
    return plan or ([rewrite] if (rewrite := _rewrite(state, run)) else [])


def _decompose(state: AgentState, run: Run) -> list[SubQuery]:
    """decompose_query's new sub-queries, kept as the latest decomposition when there are any."""
    with traced(state, run, "decompose") as event:
        decomposition = decompose_query(state["standalone"], state["queries_tried"],
                                        state["evidence"][:run.config.evidence_k], run.meter, run.config.max_subqueries)
        event.update(summary=f"decompose:{len(decomposition.subqueries)}", detail=decomposition.model_dump())
    if decomposition.subqueries:
        state["subqueries"] = [q.model_dump() for q in decomposition.subqueries]
    return decomposition.subqueries


def _rewrite(state: AgentState, run: Run) -> SubQuery | None:
    """One rewrite per run (max_rewrites), never of a query already tried."""
    if state["rewrites"] >= run.config.max_rewrites:
        return None
    state["rewrites"] += 1
    with traced(state, run, "rewrite") as event:
        rewrite = rewrite_query(state["standalone"], state["missing"], state["queries_tried"],
                                state["evidence"][:run.config.evidence_k], run.meter)
        event.update(summary="rewrite" if rewrite else "rewrite:none",
                     detail=rewrite.model_dump() if rewrite else {"result": None})
    return SubQuery(query=rewrite.query) if rewrite else None


def _found(new_ids: list[str]) -> str:
    """The documents a search added, for the trace line (at most four)."""
    return ",".join(dict.fromkeys(i.split("#")[0] for i in new_ids[:4])) or "nothing new"


def search(state: AgentState, run: Run) -> str:
    """Retrieve from the routed source into the evidence pool: graph_search, pagerank_search, the web_search tool, or
    vector_search over a plan (the question; later rounds rewrite_query, then decompose_query).
    Next: "verify" (for a round that stalled, detect_stall, to keep the grade before); "route" with
    the round marked exhausted when no query is left to try."""
    route, c = present(state["route"]), run.config
    source = route.get("source", "vector")
    outcome = {"graph": _graph, "pagerank": _pagerank, "web": _web}.get(source, _vector)(state, run)
    if outcome is None:  # stop_condition ends the run with "exhausted"
        state["rounds"].append(Round(round=state["round"], route=route["route"], source=source, queries=[],
                                     new=0, converged=False, exhausted=True))
        return "route"
    if source not in state["sources_tried"]:
        state["sources_tried"].append(source)
    top = outcome.round_ids[:c.evidence_k]
    converged = detect_convergence(state["round"], top, state["last_top"], outcome.new_ids, c.converge_jaccard)
    state["queries_tried"] += outcome.queries_run
    state["rounds"].append(Round(round=state["round"], route=route["route"], source=source,
                                 queries=outcome.queries_run, new=len(outcome.new_ids), converged=converged))
    if detect_stall(state["standalone"], state["grade"], state["missing"], state["evidence"][:c.evidence_k],
                    outcome.pool[:c.evidence_k]):
        # the graded evidence stays as it was and verify keeps its grade for this round, with no call;
        # stop_condition then ends retrieval (low_confidence or converged)
        state["rounds"][-1].update({"converged": True, "stalled": True})
        return "verify"
    state.update({"evidence": outcome.pool, "last_top": top})
    return "verify"


def _graph(state: AgentState, run: Run) -> SearchOutcome:
    with traced(state, run, "graph") as event:
        outcome = graph_search(state["standalone"], run.kb, state["evidence"], run.config.search_k)
        event.update(summary=f"graph:{_found(outcome.new_ids)}", detail={
            "new": outcome.new_ids, "paths": {e["id"]: e.get("path", []) for e in outcome.pool
                                              if e["id"] in outcome.new_ids}})
    return outcome


def _pagerank(state: AgentState, run: Run) -> SearchOutcome:
    with traced(state, run, "pagerank") as event:
        outcome = pagerank_search(state["standalone"], run.kb, state["evidence"], run.config.search_k,
                                  run.config.evidence_k)
        event.update(summary=f"pagerank:{_found(outcome.new_ids)}", detail={"new": outcome.new_ids})
    return outcome


def _web(state: AgentState, run: Run) -> SearchOutcome:
    question = state["standalone"]
    with traced(state, run, "web") as event:
        items, error = call_tool(RouteDecision(route="tool", tool="web_search", arguments={"query": question}),
                                 run.tools)
        event.update(summary="web:" + (f"{len(items)} results" if not error else "error"),
                     detail={"results": [i["source"] for i in items], "error": error})
    return merge_into_pool([items], run.kb, question, state["evidence"], [f"web: {question}"])


def _vector(state: AgentState, run: Run) -> SearchOutcome | None:
    """The plan's queries searched (None when no query is left), and on a multi-hop route the bridge."""
    plan, c = _plan(state, run), run.config
    if not plan:
        return None
    route = present(state["route"])
    filters, dropped = usable_filters(route.get("filters"))
    if dropped:  # a filter the model invented: search without it, and say so
        record(state, "filters", f"filters:-{len(dropped)}", {"dropped": dropped}, 0.0, 0)
    with traced(state, run, "search") as event:
        outcome = vector_search(plan, run.kb, state["standalone"], state["evidence"], c.search_k, filters,
                                c.parallel_searches)
        event.update(summary=f"search:{_found(outcome.new_ids)}", detail={
            "queries": outcome.queries_run, "new": outcome.new_ids, "top": outcome.round_ids[:8]})
    return _bridge(state, run, outcome, filters) if route["route"] == "multi_hop" else outcome


def _bridge(state: AgentState, run: Run, outcome: SearchOutcome, filters: dict) -> SearchOutcome:
    """A multi-hop round's next hop, with no model call (bridge_names, bridge_search)."""
    names = bridge_names(state["standalone"], outcome.pool[:run.config.evidence_k],
                         state["queries_tried"] + outcome.queries_run)
    if not names:
        return outcome
    with traced(state, run, "bridge") as event:
        bridged = bridge_search(names, outcome, run.kb, state["standalone"], filters, run.config.parallel_searches)
        found = bridged.new_ids[len(outcome.new_ids):]
        event.update(summary=f"bridge:{_found(found)}", detail={"names": names, "new": found})
    return bridged
