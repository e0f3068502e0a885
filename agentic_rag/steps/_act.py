"""call_tool: run the routed tool; its results are evidence with citations, an error is recorded."""
from __future__ import annotations

import json

from ..core import Evidence, RouteDecision, ToolError, new_evidence
from ..tools import ToolRegistry


def call_tool(decision: RouteDecision, tools: ToolRegistry) -> tuple[list[Evidence], str | None]:
    """(evidence items, None) on success, ([], error message) on failure; never raises. A tool may
    return text, or a list of {title, url or source, text} results (a web search), each cited alone."""
    call = f"{decision.tool}({json.dumps(decision.arguments, ensure_ascii=False, sort_keys=True, default=str)})"
    name = decision.tool or ""  # a route without a tool is an unknown tool: call raises
    try:
        result = tools.call(name, decision.arguments)
    except ToolError as exc:
        return [], str(exc)
    kind = tools.tools[name].kind
    if isinstance(result, list):
        results = [{k: str(v) for k, v in r.items() if v is not None} if isinstance(r, dict) else {"text": str(r)}
                   for r in result]  # evidence is plain JSON, whatever a tool returns
        return [new_evidence(id=f"{kind}:{r.get('url') or r.get('source') or call}#{i}",
                             doc_id=r.get("url") or f"tool:{decision.tool}",
                             source=r.get("url") or r.get("source") or f"tool:{call}", text=r.get("text", ""),
                             title=r.get("title", name), kind=kind, query=call, rank=i + 1,
                             relevance=2.0 - i / 100) for i, r in enumerate(results)], None
    return [new_evidence(id=f"tool:{call}", doc_id=f"tool:{decision.tool}", source=f"tool:{call}", text=str(result),
                         title=f"tool {decision.tool}", kind=kind, query=call, rank=1, relevance=2.0)], None
