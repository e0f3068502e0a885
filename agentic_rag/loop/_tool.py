"""The tool phase: the routed tool called, its result taken as evidence that needs no grading."""
from __future__ import annotations

from ..core import RouteDecision
from ..steps import call_tool
from ._patch import Patch
from ._run import Run, present, traced
from ._state import AgentState, Round


def tool(state: AgentState, run: Run, patch: Patch) -> str:
    """Call the routed tool (call_tool); its result becomes evidence that needs no grading.
    Next: "generate", or "route" (without this tool) when it failed."""
    decision = present(state["route"])
    with traced(state, run, patch, "tool") as event:      # one timed trace event in the patch
        items, error = call_tool(RouteDecision(**decision), run.tools)
        event.update(summary=f"tool:{decision['tool']}" + (":error" if error else ""),
                     detail={"results": [i["text"][:300] for i in items], "error": error})
    patch.append(state, "used_tools", decision["tool"])  # used_tools: a new list, one name longer
    patch.append(state, "rounds", Round(round=state["round"], route="tool", tool=decision["tool"], error=error))
    if error:
        return "route"
    ids = {i["id"] for i in items}
    patch.set(evidence=items + [e for e in state["evidence"] if e["id"] not in ids], stop_reason="sufficient",
              grade={"score": 1.0, "sufficient": True, "missing": [], "reason": "a tool answered", "by": "tool"})
    return "generate"
