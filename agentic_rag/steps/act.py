"""call_tool: run the routed tool; its result is evidence with a citation, an error is recorded."""
from __future__ import annotations

import json

from ..errors import ToolError
from ..schemas import RouteDecision
from ..tools.registry import ToolRegistry


def call_tool(decision: RouteDecision, tools: ToolRegistry) -> tuple[dict | None, str | None]:
    """(evidence item, None) on success, (None, error message) on failure; never raises."""
    call = f"{decision.tool}({json.dumps(decision.arguments, ensure_ascii=False, sort_keys=True)})"
    try:
        result = tools.call(decision.tool or "", decision.arguments)
    except ToolError as exc:
        return None, str(exc)
    return {"id": f"tool:{call}", "doc_id": f"tool:{decision.tool}", "source": f"tool:{call}",
            "title": f"tool {decision.tool}", "text": result, "kind": "tool", "ranks": {},
            "query": call, "rank": 1, "relevance": 2.0}, None
