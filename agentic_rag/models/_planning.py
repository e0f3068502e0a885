"""The offline model's planning rules: route, rewrite (pseudo-relevance feedback), decompose."""
from __future__ import annotations

import re
from collections import Counter

from .._schemas import Decomposition, Rewrite, RouteDecision, SubQuery
from ..text._lexical import (
    COMPARISON,
    bridge_entities,
    entities,
    is_comparison,
    is_nested,
    key_terms,
    relative_clause,
    same_text,
)
from ..text._tokenize import tokenize


def route(inputs: dict) -> RouteDecision:
    """multi_hop for comparisons and nested (bridge) questions, vector otherwise."""
    question = inputs["question"]
    if is_comparison(question):
        return RouteDecision(route="multi_hop", reason="comparison or enumeration: one search per item", by="model")
    if is_nested(question):
        return RouteDecision(route="multi_hop", reason="nested question: a bridge fact is needed first", by="model")
    return RouteDecision(route="vector", reason="a single fact to look up", by="model")


def _strip(question: str, remove: list[str]) -> str:
    for item in sorted(remove, key=len, reverse=True):
        question = question.replace(item, " ")
    question = COMPARISON.sub(" ", question)
    return " ".join(re.sub(r"[?？!！。,，、;；:：]|\band\b|和|与|及|有什么|什么|的", " ", question).split())


def decompose(inputs: dict) -> Decomposition:
    """Comparisons: one query per item. With evidence: follow bridge names. Else split at a relative
    clause. (The decompose step drops queries already tried.)"""
    question, evidence = inputs["question"], inputs.get("evidence", [])
    names = entities(question)
    if is_comparison(question) and len(names) >= 2:
        rest = _strip(question, names)
        queries = [SubQuery(query=f"{name} {rest}".strip()) for name in names]
    elif evidence:
        rest = " ".join(key_terms(question))
        queries = [SubQuery(query=f"{name} {rest}") for name in bridge_entities(question, evidence)]
    elif (clause := relative_clause(question)) is not None:
        outer = question[:clause.start()]
        inner = f"{outer.split()[-1]} {question[clause.end():]}"  # "association which published X"
        queries = [SubQuery(query=_strip(inner, [])), SubQuery(query=_strip(outer, []), depends_on=[0])]
    else:
        queries = []
    return Decomposition(subqueries=queries[:5], reason=f"{len(queries[:5])} sub-queries")


def rewrite(inputs: dict) -> Rewrite:
    """Pseudo-relevance feedback: add what is missing and terms shared by the best passages."""
    question, missing = inputs["question"], inputs.get("missing", [])
    tried, evidence = inputs.get("tried", []), inputs.get("evidence", [])
    asked = set(tokenize(question))
    counts = Counter(t for item in evidence[:3] for t in dict.fromkeys(key_terms(item["text"]))
                     if t not in asked and len(t) > 1 and not t.isdigit())
    feedback = [t for t, c in counts.most_common(12) if c >= 2]
    extra = [m for m in missing if not set(tokenize(m)) <= asked][:3]
    for size in range(2, len(feedback) + 3):
        query = " ".join([question] + extra + feedback[:size])
        if not any(same_text(query, t) for t in tried):
            return Rewrite(query=query, reason=f"added {', '.join(extra + feedback[:size]) or 'nothing'}")
    return Rewrite(query=question, reason="no new terms found")
