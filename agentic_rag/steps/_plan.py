"""plan_strategy and first_hop_plan: how a vector round chooses its queries, with no model call."""
from __future__ import annotations

from ..core import SubQuery


def plan_strategy(route: str, vector_tried: bool) -> str:
    """How a vector round plans: "question" (a plain question's first vector round: the question as
    is), "rewrite" (a later plain round: one rewrite, else a decomposition) or "decompose" (a
    multi-hop round: a decomposition; a later one falls back on a rewrite)."""
    if route == "multi_hop":
        return "decompose"
    return "rewrite" if vector_tried else "question"


def first_hop_plan(question: str, subqueries: list[SubQuery]) -> tuple[list[SubQuery], list[str]]:
    """A multi-hop question's first round: the question itself, then its sub-queries (each
    depends_on shifted past it); and the parts an answer must cover: a comparison's sub-queries
    (none depends on another), else none."""
    plan = [SubQuery(query=question)] + [SubQuery(query=q.query, depends_on=[d + 1 for d in q.depends_on])
                                         for q in subqueries]
    parts = [q.query for q in subqueries] if subqueries and all(not q.depends_on for q in subqueries) else []
    return plan, parts
