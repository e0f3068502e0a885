"""The offline model's planning rules: route, rewrite (pseudo-relevance feedback), decompose."""
from __future__ import annotations

import re
from collections import Counter

from ..analysis import bridge_entities, entities, key_terms, same_text
from ..kb.tokenize import tokenize
from ..schemas import Decomposition, Rewrite, RouteDecision, SubQuery

COMPARISON = re.compile(r"对比|区别|差异|异同|不同|相比|比较|哪个更|哪一个更|\bvs\.?\b|versus|compare|comparison|"
                        r"difference|differ|\bboth\b|\beither\b|\bwhich (?:one|of the two)\b", re.I)
_RELATIVE = re.compile(r"\s(?:which|that|who|whose|whom|where)\s", re.I)
_ENUMERATION = re.compile(r"[、,，]|\band\b|和|与|及")


def is_comparison(question: str) -> bool:
    """Comparison words, or two or more named things joined by an enumeration."""
    return bool(COMPARISON.search(question)) or (len(entities(question)) >= 2 and bool(_ENUMERATION.search(question)))


def relative_clause(question: str) -> re.Match | None:
    """A relative pronoun after the question's first two words ("the company which made X"); the
    leading interrogative of "From which country..." is not one."""
    words = re.match(r"\s*\S+\s+\S+", question)
    return _RELATIVE.search(question, words.end() if words else 0)


def is_nested(question: str) -> bool:
    """A question that needs a bridge fact first: a relative clause, or three 的 in a row of modifiers."""
    return relative_clause(question) is not None or question.count("的") >= 3


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
