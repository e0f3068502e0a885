"""route_query: rules first (direct, tools, comparisons, nested and plain questions), the model for the rest."""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..core import Evidence, ModelOutputError, RouteDecision
from ..models import Model
from ..text import entities, has_content, is_comparison, is_direct, is_nested, key_terms
from ..tools import ToolRegistry
from ._ask import ask

_RELATION = re.compile(r"\bwho (?:developed|founded|created|invented|wrote|directed|owns|built|made|published|"
                       r"signed)\b|\bwhich (?:contract|company|organi[sz]ation|supplier|party) |"
                       r"哪份合同|哪家公司|由谁|谁(?:开发|创立|创办|发明|编写|签订|提供)|(?:之间|的)关系|"
                       r"供应商是|乙方是|甲方是", re.I)
_YEAR = re.compile(r"(?:\bin |在)((?:19|20)\d\d)(?:\s*年)?")
_TYPES = {"release_note": r"release notes?|changelog|发布说明|更新日志|版本说明", "ticket": r"\btickets?\b|工单",
          "contract": r"\bcontracts?\b|合同", "manual": r"\bmanual\b|手册|说明书",
          "policy": r"\bpolic(?:y|ies)\b|政策|规则"}


def _filters(question: str) -> dict:
    """A year or a document type named in the question becomes a metadata filter; a filter only
    puts matching passages first (the search fills up without it). A version is not made a filter:
    a question names the version of a fix, while the tickets describing the problem carry an
    earlier one (measured on the example: filtering by it lost them); the tokenizer's version
    normalisation matches it instead."""
    filters: dict[str, dict[str, str] | list[str]] = {}
    if year := _YEAR.search(question):
        filters["date"] = {"gte": f"{year.group(1)}-01-01", "lte": f"{year.group(1)}-12-31"}
    types = [name for name, pattern in _TYPES.items() if re.search(pattern, question, re.I)]
    if types:
        filters["type"] = types
    return filters


def pick_source(wanted: str, sources: tuple[str, ...], tried: tuple[str, ...]) -> str:
    """The first round takes the source the question suits; after that, the next untried source in
    the configured order; when every source has been tried, vector search (rewrites, hops) again."""
    if not tried:
        return wanted if wanted in sources else sources[0]
    return next((s for s in sources if s not in tried), "vector")


def route_query(question: str, model: Model, tools: ToolRegistry | None = None, evidence: Sequence[Evidence] = (),
                used_tools: tuple[str, ...] = (), sources: tuple[str, ...] = ("vector",),
                tried: tuple[str, ...] = ()) -> RouteDecision:
    """Decide direct | vector | multi_hop | tool for the next round, and for retrieval the source
    (vector, graph, web) among those available; sees the evidence so far. A retrieval route that
    names a `tool` names one the router wanted and this run has not got (an off tool whose patterns
    and arguments fit, or a tool the model chose that is not registered): the answer says so."""
    decision = _route(question, model, tools, evidence, used_tools)
    if decision.route in ("vector", "multi_hop"):
        wanted = "graph" if _RELATION.search(question) else decision.source
        off = tools.wanted_off(question, list(evidence), used_tools) if tools and not decision.tool else None
        decision = decision.model_copy(update={"source": pick_source(wanted, tuple(sources), tuple(tried)),
                                               "tool": decision.tool or (off.name if off else None)})
    return decision


def _route(question: str, model: Model, tools: ToolRegistry | None, evidence: Sequence[Evidence],
           used_tools: tuple[str, ...]) -> RouteDecision:
    tools = tools or ToolRegistry()
    if is_direct(question):
        return RouteDecision(route="direct", reason="needs no fact from the knowledge base")
    selected = tools.select(question, list(evidence), tuple(used_tools))
    if selected:
        tool, arguments = selected
        return RouteDecision(route="tool", tool=tool.name, arguments=arguments,
                             reason=f"matches {tool.name}'s patterns")
    if not has_content(question) and not used_tools:  # never answered from whatever overlaps "的" or "??"
        return RouteDecision(route="direct", reason="the question holds no content word: nothing to look up")
    filters = _filters(question)
    if is_comparison(question):
        return RouteDecision(route="multi_hop", filters=filters, reason="comparison: one search per item")
    if is_nested(question) and not tools.tools:  # with no tool to weigh, the model could only say the same
        return RouteDecision(route="multi_hop", filters=filters, reason="nested: a bridge fact is needed first")
    plain = not is_nested(question) and len(key_terms(question)) <= 12 and len(entities(question)) <= 2
    if plain and not any(tool.model_routed for tool in tools.tools.values()):  # else a model weighs the tools
        return RouteDecision(route="vector", filters=filters, reason="a plain factual question")
    try:
        decision = ask(model, "route", RouteDecision, {"question": question, "tools": tools.describe(),
                                                       "evidence": list(evidence)[:8]})
    except ModelOutputError as exc:
        return RouteDecision(route="vector", filters=filters, reason=f"fallback: {exc}", by="fallback")
    if decision.route == "tool" and decision.tool not in tools.tools:  # wanted, but not this run's: named
        return RouteDecision(route="vector", filters=filters, tool=decision.tool or None,
                             reason=f"fallback: model chose unknown tool {decision.tool!r}", by="fallback")
    if decision.route == "direct":  # a question the rules did not call direct is factual: never direct
        return RouteDecision(route="vector", filters=filters, reason="model said direct; factual questions search")
    return decision.model_copy(update={"filters": decision.filters or filters, "by": "model"})
