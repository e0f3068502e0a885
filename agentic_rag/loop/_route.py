"""The route phase: a round starts, route_query picks its route and source; and the trace of tools the
router wanted that failed or that this run has not got."""
from __future__ import annotations

from ..steps import route_query, unheld_names
from ._endings import abstain
from ._patch import Patch
from ._run import Run, traced
from ._state import AgentState


def route(state: AgentState, run: Run, patch: Patch) -> str:
    """Start a round: route_query picks the route (direct, vector, multi_hop, tool) and the source.
    Next: "generate" for a direct reply, "tool", or "search"; "done" when the first round would
    search the knowledge base for something it never mentions (unmentioned)."""
    patch.set(round=state["round"] + 1)
    with traced(state, run, patch, "route") as event:
        decision = route_query(state["standalone"], run.meter, run.tools, state["evidence"][:run.config.evidence_k],
                               tuple(state["used_tools"]), _sources(run), tuple(state["sources_tried"]))
        event.update(detail=decision.model_dump(), summary=f"route:{decision.route}"
                     + (f"({decision.tool})" if decision.tool and decision.route == "tool" else "")
                     + (f"@{decision.source}" if decision.source != "vector" and decision.route != "tool" else ""))
    patch.set(route=decision.model_dump())
    tool_failures(state, run, patch)
    if decision.tool and decision.route != "tool":
        tool_off(state, run, patch, decision.tool)
    if decision.route == "direct":
        patch.set(stop_reason="direct")
        return "generate"
    if decision.route == "tool":
        return "tool"
    if state["round"] == 0 and "web" not in _sources(run) and (asked := unmentioned(state, run, patch)):
        patch.set(stop_reason="unmentioned")
        return abstain(state, patch, "unmentioned", f"the documents never mention {', '.join(asked)}", asked)
    return "search"


def unmentioned(state: AgentState, run: Run, patch: Patch) -> list[str]:
    """The names the question asks about that the knowledge base holds nowhere (unheld_names), traced
    with those it names only as an aside, which the answer then says it never mentions (answer_notes)."""
    unheld = unheld_names(state["standalone"], run.kb)
    asked, aside = [t for t, a in unheld if not a], [t for t, a in unheld if a]
    if unheld:
        patch.note("mentions", f"mentions:-{len(unheld)}", {"unheld": asked, "aside": aside})
    return asked


def tool_failures(state: AgentState, run: Run, patch: Patch) -> None:
    """A tool whose argument finder raised is a failed tool: traced, and not used again."""
    for name, why in run.tools.take_failures():
        patch.append(state, "used_tools", name)
        patch.note("tool", f"tool:{name}:error", {"error": why})


def tool_off(state: AgentState, run: Run, patch: Patch, name: str) -> None:
    """The router wanted a tool this run has not got: traced once a run (tool:NAME:off), with the line
    the final answer adds (finish) in the question's language."""
    summary = f"tool:{name}:off"
    if not any(e["summary"] == summary for e in state["trace"]) and not any(e.summary == summary
                                                                           for e in patch.events):
        patch.note("tool", summary, {"note": run.tools.off_note(name, state["standalone"]),
                                     "why": "the router wanted this tool; this run has not got it"})


def _sources(run: Run) -> tuple[str, ...]:
    """The configured sources this run can use: the graph (walk, PageRank) when the knowledge base has one, the web
    when a web_search tool is registered."""
    graph = run.kb.graph_size[1] > 0
    usable = {"vector": True, "graph": graph, "pagerank": graph, "web": "web_search" in run.tools.tools}
    return tuple(s for s in run.config.sources if usable[s]) or ("vector",)
