"""The search phase: retrieve from the routed source, and take what the round found into the state,
or find that it stalled."""
from __future__ import annotations

from collections.abc import Callable

from ..core import RouteDecision
from ..steps import (
    SearchOutcome,
    bridge_names,
    bridge_search,
    call_tool,
    detect_convergence,
    detect_stall,
    graph_search,
    merge_into_pool,
    pagerank_search,
    usable_filters,
    vector_search,
)
from ._patch import Patch
from ._queries import plan_queries
from ._run import Run, present, traced
from ._state import AgentState, Round


def search(state: AgentState, run: Run, patch: Patch) -> str:
    """Retrieve from the routed source into the evidence pool: graph_search, pagerank_search, the web_search tool, or
    vector_search over a plan (the question; later rounds rewrite_query, then decompose_query).
    Next: "verify" (for a round that stalled, detect_stall, to keep the grade before); "route" with
    the round marked exhausted when no query is left to try."""
    route, c = present(state["route"]), run.config
    source = route.get("source", "vector")
    outcome = _SOURCES.get(source, _vector)(state, run, patch)
    if outcome is None:  # stop_condition ends the run with "exhausted"
        patch.append(state, "rounds", Round(round=state["round"], route=route["route"], source=source, queries=[],
                                            new=0, converged=False, exhausted=True))
        return "route"
    if source not in state["sources_tried"]:
        patch.append(state, "sources_tried", source)
    top = outcome.round_ids[:c.evidence_k]
    converged = detect_convergence(state["round"], top, state["last_top"], outcome.new_ids, c.converge_jaccard)
    stalled = detect_stall(state["standalone"], state["grade"], state["missing"], state["evidence"][:c.evidence_k],
                           outcome.pool[:c.evidence_k])
    found = Round(round=state["round"], route=route["route"], source=source, queries=outcome.queries_run,
                  new=len(outcome.new_ids), converged=converged or stalled)
    patch.set(queries_tried=state["queries_tried"] + outcome.queries_run)
    if stalled:
        # the graded evidence stays as it was and verify keeps its grade for this round, with no call;
        # stop_condition then ends retrieval (low_confidence or converged)
        found["stalled"] = True  # the new round, not yet the state's
        patch.append(state, "rounds", found)
        return "verify"
    patch.append(state, "rounds", found)
    patch.set(evidence=outcome.pool, last_top=top)
    return "verify"


def _found(new_ids: list[str]) -> str:
    """The documents a search added, for the trace line (at most four)."""
    return ",".join(dict.fromkeys(i.split("#")[0] for i in new_ids[:4])) or "nothing new"


def _graph(state: AgentState, run: Run, patch: Patch) -> SearchOutcome:
    with traced(state, run, patch, "graph") as event:
        outcome = graph_search(state["standalone"], run.kb, state["evidence"], run.config.search_k)
        event.update(summary=f"graph:{_found(outcome.new_ids)}", detail={
            "new": outcome.new_ids, "paths": {e["id"]: e.get("path", []) for e in outcome.pool
                                              if e["id"] in outcome.new_ids}})
    return outcome


def _pagerank(state: AgentState, run: Run, patch: Patch) -> SearchOutcome:
    with traced(state, run, patch, "pagerank") as event:
        outcome = pagerank_search(state["standalone"], run.kb, state["evidence"], run.config.search_k,
                                  run.config.evidence_k)
        event.update(summary=f"pagerank:{_found(outcome.new_ids)}", detail={"new": outcome.new_ids})
    return outcome


def _web(state: AgentState, run: Run, patch: Patch) -> SearchOutcome:
    question = state["standalone"]
    with traced(state, run, patch, "web") as event:
        items, error = call_tool(RouteDecision(route="tool", tool="web_search", arguments={"query": question}),
                                 run.tools)
        event.update(summary="web:" + (f"{len(items)} results" if not error else "error"),
                     detail={"results": [i["source"] for i in items], "error": error})
    return merge_into_pool([items], run.kb, question, state["evidence"], [f"web: {question}"])


def _vector(state: AgentState, run: Run, patch: Patch) -> SearchOutcome | None:
    """The plan's queries searched (None when no query is left), and on a multi-hop route the bridge."""
    plan, c = plan_queries(state, run, patch), run.config
    if not plan:
        return None
    route = present(state["route"])
    filters, dropped = usable_filters(route.get("filters"))
    if dropped:  # a filter the model invented: search without it, and say so
        patch.note("filters", f"filters:-{len(dropped)}", {"dropped": dropped})
    with traced(state, run, patch, "search") as event:
        outcome = vector_search(plan, run.kb, state["standalone"], state["evidence"], c.search_k, filters,
                                c.parallel_searches)
        event.update(summary=f"search:{_found(outcome.new_ids)}", detail={
            "queries": outcome.queries_run, "new": outcome.new_ids, "top": outcome.round_ids[:8]})
    return _bridge(state, run, patch, outcome, filters) if route["route"] == "multi_hop" else outcome


def _bridge(state: AgentState, run: Run, patch: Patch, outcome: SearchOutcome, filters: dict) -> SearchOutcome:
    """A multi-hop round's next hop, with no model call (bridge_names, bridge_search)."""
    names = bridge_names(state["standalone"], outcome.pool[:run.config.evidence_k],
                         state["queries_tried"] + outcome.queries_run)
    if not names:
        return outcome
    with traced(state, run, patch, "bridge") as event:
        bridged = bridge_search(names, outcome, run.kb, state["standalone"], filters, run.config.parallel_searches)
        found = bridged.new_ids[len(outcome.new_ids):]
        event.update(summary=f"bridge:{_found(found)}", detail={"names": names, "new": found})
    return bridged


# the sources other than vector search, each one call (vector search plans its queries first)
_SOURCES: dict[str, Callable[[AgentState, Run, Patch], SearchOutcome | None]] = {
    "graph": _graph, "pagerank": _pagerank, "web": _web}
