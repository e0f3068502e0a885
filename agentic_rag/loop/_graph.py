"""The phase graph: for each phase, its handler and the phases it may return, in one literal. The
driver runs the handler of the state's phase and refuses any phase the graph does not declare."""
from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass

from ._check import check
from ._condense import condense
from ._generate import generate
from ._grade import grade
from ._patch import Patch
from ._route import route
from ._run import Run
from ._search import search
from ._state import AgentState
from ._tool import tool
from ._verify import verify

# a handler reads the state (never writes it), puts its changes in the patch and returns the next phase
Handler = Callable[[AgentState, Run, Patch], str]


@dataclass(frozen=True)
class Phase:
    """One phase of the loop: the handler that runs it and the phases it may return ("done" ends the run)."""

    handle: Handler
    may_return: Set[str]


# Any phase may also end the run outside the graph: a model call past the budget or the deadline,
# or a failure (the driver's own stops, not edges). At a round's start ("route") stop_condition may
# stop retrieval; settle then runs in route's place and answers from what there is (generate) or
# abstains (done).
GRAPH: dict[str, Phase] = {
    # condense_query, carried_evidence: a follow-up only (a run given a history starts here)
    "condense": Phase(condense, {"route"}),
    # route_query: the route chosen (a direct reply goes to generate), or settle's answer or abstention
    "route": Phase(route, {"search", "tool", "generate", "done"}),
    # rewrite_query, decompose_query, then vector_search (+ bridge_search) | graph_search | pagerank_search
    # | web; detect_convergence, detect_stall. route: no query left to try (exhausted)
    "search": Phase(search, {"verify", "route"}),
    # call_tool. route: the tool failed, route again without it
    "tool": Phase(tool, {"generate", "route"}),
    # verify_sufficiency (deferred when unsure; none for a stalled round), count_low_rounds, wants_tool_first.
    # generate: sufficient, or unsure (the answer's reply grades too); route: another round or a tool first
    "verify": Phase(verify, {"generate", "route"}),
    # generate_answer (or the kept draft), verify_citations. grade: the reply grades the evidence too;
    # done: a direct reply, or no answer drawn; verify: a pending grade this run may not fold
    "generate": Phase(generate, {"grade", "check", "done", "verify"}),
    # folded_grade (verify_sufficiency when the reply holds none), verify_citations. route: graded low,
    # the draft kept
    "grade": Phase(grade, {"route", "check", "done"}),
    # check_faithfulness, after_faithfulness, repair_answer. route: the answer left a part out
    "check": Phase(check, {"done", "route"}),
}


class TransitionError(RuntimeError):
    """A phase returned a phase the graph does not declare for it: a fault in the loop's code, not the input."""


def next_phase(phase: str, returned: str) -> str:
    """`returned` when GRAPH lets `phase` go there; otherwise a TransitionError naming both."""
    allowed = GRAPH[phase].may_return
    if returned not in allowed:
        raise TransitionError(f"phase {phase!r} returned {returned!r}, which GRAPH does not declare; "
                              f"{phase!r} may go to {', '.join(sorted(allowed))}")
    return returned
