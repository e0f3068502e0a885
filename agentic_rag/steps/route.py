"""route_query: rules first (direct, tools, comparisons, plain questions), the model for the rest."""
from __future__ import annotations

import re

from ..analysis import entities, key_terms
from ..errors import ModelOutputError
from ..models.planning import is_comparison
from ..models.protocol import Model
from ..schemas import RouteDecision
from ..tools.registry import ToolRegistry
from ._ask import ask

_DIRECT = re.compile(r"^\s*(?:hi|hello|hey|thanks|thank you|good (?:morning|afternoon|evening)|你好|您好|谢谢|早上好|"
                     r"晚上好)\W*$|^\s*(?:translate|翻译)\b|(?:翻译成|translate (?:this|it)? ?(?:in)?to)\s*\w+", re.I)
_NESTED = re.compile(r"\s(?:which|that|who|whose|whom|where)\s|的.*的.*的", re.I)
_YEAR = re.compile(r"(?:\bin |在)((?:19|20)\d\d)(?:\s*年)?")


def _filters(question: str) -> dict:
    """A year named in the question becomes a date filter (the search fills up without it if needed)."""
    year = _YEAR.search(question)
    return {"date": {"gte": f"{year.group(1)}-01-01", "lte": f"{year.group(1)}-12-31"}} if year else {}


def route_query(question: str, model: Model, tools: ToolRegistry | None = None, evidence: list[dict] = (),
                used_tools: tuple[str, ...] = ()) -> RouteDecision:
    """Decide direct | vector | multi_hop | tool for the next round; sees the evidence so far."""
    tools = tools or ToolRegistry()
    if _DIRECT.search(question):
        return RouteDecision(route="direct", reason="needs no fact from the knowledge base")
    selected = tools.select(question, list(evidence))
    if selected and selected[0].name not in used_tools:
        tool, arguments = selected
        return RouteDecision(route="tool", tool=tool.name, arguments=arguments, reason=f"matches {tool.name}'s patterns")
    filters = _filters(question)
    if is_comparison(question):
        return RouteDecision(route="multi_hop", filters=filters, reason="comparison: one search per item")
    if not _NESTED.search(question) and len(key_terms(question)) <= 12 and len(entities(question)) <= 2:
        return RouteDecision(route="vector", filters=filters, reason="a plain factual question")
    try:
        decision = ask(model, "route", RouteDecision, {"question": question, "tools": tools.describe(),
                                                       "evidence": list(evidence)[:8]})
    except ModelOutputError as exc:
        return RouteDecision(route="vector", filters=filters, reason=f"fallback: {exc}", by="fallback")
    if decision.route == "tool" and decision.tool not in tools.tools:
        return RouteDecision(route="vector", filters=filters, reason=f"fallback: model chose unknown tool "
                                                                      f"{decision.tool!r}", by="fallback")
    if decision.route == "direct":  # a question the rules did not call direct is factual: never direct
        return RouteDecision(route="vector", filters=filters, reason="model said direct; factual questions search")
    return decision.model_copy(update={"filters": decision.filters or filters, "by": "model"})
