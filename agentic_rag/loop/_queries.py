"""A vector round's queries, as plan_strategy says: the question, a rewrite aimed at what is missing,
or a decomposition along the bridge names in the evidence."""
from __future__ import annotations

from ..core import SubQuery
from ..steps import decompose_query, first_hop_plan, plan_strategy, rewrite_query
from ._patch import Patch
from ._run import Run, present, traced
from ._state import AgentState


def plan_queries(state: AgentState, run: Run, patch: Patch) -> list[SubQuery]:
    """The round's queries as plan_strategy says: the question; a rewrite aimed at what is missing;
    or a decomposition along bridge names in the evidence (round 1: first_hop_plan)."""
    first = "vector" not in state["sources_tried"]
    strategy = plan_strategy(present(state["route"])["route"], not first)
    if strategy == "question":
        return [SubQuery(query=state["standalone"])]
    if strategy == "rewrite" and (rewrite := _rewrite(state, run, patch)):
        return [rewrite]
    plan = _decompose(state, run, patch)
    if first:
        queries, parts = first_hop_plan(state["standalone"], plan)
        if parts:
            patch.set(parts=parts)  # a comparison: the answer must cover each
        return queries
    return plan or ([rewrite] if (rewrite := _rewrite(state, run, patch)) else [])


def _decompose(state: AgentState, run: Run, patch: Patch) -> list[SubQuery]:
    """decompose_query's new sub-queries, kept as the latest decomposition when there are any."""
    with traced(state, run, patch, "decompose") as event:
        decomposition = decompose_query(state["standalone"], state["queries_tried"],
                                        state["evidence"][:run.config.evidence_k], run.meter, run.config.max_subqueries)
        event.update(summary=f"decompose:{len(decomposition.subqueries)}", detail=decomposition.model_dump())
    if decomposition.subqueries:
        patch.set(subqueries=[q.model_dump() for q in decomposition.subqueries])
    return decomposition.subqueries


def _rewrite(state: AgentState, run: Run, patch: Patch) -> SubQuery | None:
    """One rewrite per run (max_rewrites), never of a query already tried; counted as it is asked for
    (a plan may ask twice: the second sees the first)."""
    rewrites = patch.get(state, "rewrites")
    if rewrites >= run.config.max_rewrites:
        return None
    patch.set(rewrites=rewrites + 1)
    with traced(state, run, patch, "rewrite") as event:
        rewrite = rewrite_query(state["standalone"], state["missing"], state["queries_tried"],
                                state["evidence"][:run.config.evidence_k], run.meter)
        event.update(summary="rewrite" if rewrite else "rewrite:none",
                     detail=rewrite.model_dump() if rewrite else {"result": None})
    return SubQuery(query=rewrite.query) if rewrite else None
