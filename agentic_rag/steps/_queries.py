"""rewrite_query and decompose_query: new searches that never repeat one already tried."""
from __future__ import annotations

from collections.abc import Sequence

from .._errors import ModelOutputError
from .._schemas import Decomposition, Rewrite, SubQuery
from .._state import Evidence
from ..models._protocol import Model
from ..text._lexical import same_text
from ._ask import ask


def rewrite_query(question: str, missing: list[str], tried: list[str], evidence: Sequence[Evidence],
                  model: Model) -> Rewrite | None:
    """One reformulated query aimed at what is missing; None when nothing new comes out."""
    inputs = {"question": question, "missing": missing, "tried": tried, "evidence": evidence[:5]}
    try:
        rewrite = ask(model, "rewrite", Rewrite, inputs)
    except ModelOutputError:
        return None
    query = rewrite.query.strip()
    if not query or any(same_text(query, t) for t in tried):
        return None
    return rewrite.model_copy(update={"query": query})


def decompose_query(question: str, tried: list[str], evidence: Sequence[Evidence], model: Model,
                    max_subqueries: int = 5) -> Decomposition:
    """At most `max_subqueries` new sub-queries, each with valid `depends_on` (earlier indexes only)."""
    inputs = {"question": question, "tried": tried, "evidence": evidence[:5]}
    try:
        plan = ask(model, "decompose", Decomposition, inputs)
    except ModelOutputError as exc:
        return Decomposition(subqueries=[], reason=f"fallback: {exc}")
    kept: list[SubQuery] = []
    position: dict[int, int] = {}  # index in the model's list -> index in the kept list
    for i, sub in enumerate(plan.subqueries):
        query = sub.query.strip()
        if query and not any(same_text(query, t) for t in tried + [k.query for k in kept]):
            position[i] = len(kept)
            earlier = {position[d] for d in sub.depends_on if d in position and d < i}  # never itself: no cycle
            kept.append(SubQuery(query=query, depends_on=sorted(earlier)))
        if len(kept) == max_subqueries:
            break
    return Decomposition(subqueries=kept, reason=plan.reason)
