"""run_agentic_rag: the hand-written loop over a plain dict, and the only code that changes it.

Each pass asks stop_condition whether the run may go on; if it may, it runs the handler of the
state's phase (GRAPH below), which calls its step functions and returns the next phase. Every
stop is decided in stop_condition, in the order it checks them.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable

from . import _phases as phases
from ._config import Config
from ._errors import BudgetExceeded, ConfigurationError, DeadlineExceeded, RetrievalError
from ._openai_api import RUN_DEADLINE
from ._state import AgentState, new_state
from .kb import KnowledgeBase
from .models._meter import Meter
from .models._protocol import Model
from .tools._registry import ToolRegistry

# phase -> its handler; the step functions each calls, and the phases it can return
GRAPH: dict[str, Callable[[AgentState, phases.Run], str]] = {
    "route": phases.route,        # route_query                             -> search | tool | generate (direct)
    "search": phases.search,      # rewrite_query, decompose_query, then
                                  # vector_search | graph_search | web      -> verify | route (nothing left)
    "tool": phases.tool,          # call_tool                               -> generate | route (it failed)
    "verify": phases.verify,      # verify_sufficiency                      -> generate | route (another round)
    "generate": phases.generate,  # generate_answer, verify_citations       -> check | done | route (graded low)
    "check": phases.check,        # check_faithfulness, repair_answer       -> done | route (a part is missing)
}


def stop_condition(state: AgentState, run: phases.Run, now: float) -> str | None:
    """Why the run may not start another round, or None. Asked before every phase; only a round's
    start ("route") can stop. Pure given the clock `now`; checked in this order."""
    if state["phase"] != "route":
        return None
    last = state["rounds"][-1] if state["rounds"] else {}
    if run.meter.tokens_used >= run.config.token_budget:
        return "token_budget"    # nothing left for another call (a call that would pass it raises BudgetExceeded)
    if last.get("exhausted"):
        return "exhausted"       # no query, strategy or source left to try
    if state["low_rounds"] >= 2:
        return "low_confidence"  # two rounds in a row graded below low_confidence_floor
    if last.get("converged") and not last.get("incomplete_answer") and not (state["grade"] or {}).get("sufficient"):
        return "converged"       # the last round found nothing new, or what it found overlaps the one before
    if state["round"] >= run.config.max_rounds:
        return "max_rounds"
    if now > run.deadline:
        return "deadline"
    return None


Hook = Callable[[dict, dict], object]  # (event, state) -> False or "stop" to stop the run


def run_agentic_rag(question: str, kb: KnowledgeBase, model: Model, tools=(), config: Config | None = None,
                    state: dict | None = None, on_step: Hook | None = None,
                    on_token: Callable[[str], object] | None = None) -> AgentState:
    """Answer `question` from `kb` or abstain; returns the final state. Pass a state a hook stopped to
    resume it; `on_token` receives the draft answer as it is generated (the checks run after it).
    Bad input (an empty question, bad settings, an empty knowledge base) raises before the run
    starts; once it runs, a failure ends it with stop_reason "error" and the state is returned."""
    config, state = _prepare(question, kb, model, config, state)
    deadline = time.monotonic() + config.deadline_s  # every model call carries it (Meter), and each round's start
    reset = RUN_DEADLINE.set(deadline)  # and an embedder's calls inside the run's searches
    try:
        return _run(question, state, config, kb, model, tools, deadline, on_step, on_token)
    finally:
        RUN_DEADLINE.reset(reset)


def _run(question: str, state: dict, config: Config, kb: KnowledgeBase, model: Model, tools, deadline: float,
         on_step: Hook | None, on_token: Callable[[str], object] | None) -> AgentState:
    """The loop itself: until a phase says done, check the stops, then run the phase's handler."""
    meter = Meter(model, config.token_budget, copy.deepcopy(state["usage"]),
                  max_completion_tokens=config.max_completion_tokens, deadline=deadline)
    run = phases.Run(kb, meter, ToolRegistry(tools), config, deadline, on_token,
                     fold_grades=_grader_is_generator(model))
    started = time.perf_counter()
    while state["phase"] != "done":
        events, invalid = len(state["trace"]), len(run.meter.usage["invalid_usage"])
        try:
            stop = stop_condition(state, run, time.monotonic())
            # a stop answers from what there is or abstains (settle); otherwise the phase's handler runs
            state["phase"] = phases.settle(state, run, stop) if stop else GRAPH[state["phase"]](state, run)
        except BudgetExceeded as exc:
            state["stop_reason"] = "token_budget"  # whatever the grade said, the budget is why the run stops
            state["phase"] = phases.abstain(state, "token_budget", f"the token budget ran out: {exc}")
        except DeadlineExceeded as exc:  # a model call the deadline cut off, or one it came too late for
            state["stop_reason"] = "deadline"
            state["phase"] = phases.abstain(state, "deadline", f"the deadline of {config.deadline_s:g} s passed: {exc}")
        except Exception as exc:  # a model failing past its retries, or anything unexpected: recorded, not raised
            _fail(state, exc)
        for figures in run.meter.usage["invalid_usage"][invalid:]:  # counts a server sent that cannot be true
            phases.record(state, "usage", "usage:invalid", figures, 0.0, 0)
        state["usage"] = copy.deepcopy(run.meter.usage)
        new_events = state["trace"][events:]
        if on_step and any(on_step(event, copy.deepcopy(state)) in (False, "stop") for event in new_events):
            if state["phase"] != "done":
                state["resume_reason"], state["stop_reason"] = state["stop_reason"], "stopped"
                break
    elapsed_ms = (time.perf_counter() - started) * 1000
    state["timings_ms"]["total"] = round(state["timings_ms"].get("total", 0) + elapsed_ms, 1)
    return state


def _prepare(question: str, kb: KnowledgeBase, model: Model, config: Config | None,
             state: dict | None) -> tuple[Config, AgentState]:
    """The checks before a run (input errors raise here) and the state it starts from: a new one,
    or a copy of the given one with a hook's stop undone."""
    if config is None:  # a resumed run keeps the settings it started with
        saved = state["config"] if state is not None else {}
        config = Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})
    if not isinstance(config, Config):
        raise ConfigurationError(f"config must be an agentic_rag.Config, not {type(config).__name__}")
    if not callable(getattr(model, "complete", None)):
        raise ConfigurationError(f"{model!r} is not a model: it needs a complete(request) method (see models.Model)")
    state = new_state(question, config) if state is None else copy.deepcopy(state)
    if state["stop_reason"] == "stopped":
        state["stop_reason"], state["resume_reason"] = state["resume_reason"], None
    if len(kb) == 0:
        raise RetrievalError("the knowledge base is empty; index documents first (agentic-rag index PATH --kb DIR)")
    return config, state


def _grader_is_generator(model: Model) -> bool:
    """Whether grading and generation go to one model, so that an unsure grade can come in the answer's
    reply; a models set that gives grading a model of its own keeps it as the grader."""
    model_for = getattr(model, "model_for", None)
    return model_for is None or model_for("grade") is model_for("generate")


def _fail(state: AgentState, exc: Exception) -> None:
    """End the run on a failure: no answer is returned (an unchecked draft stays in draft_answer only)."""
    message = f"{exc.__class__.__name__}: {exc}"
    state.update(stop_reason="error", phase="done", error=message, answer="", citations=[], abstained=True,
                 abstain_reason=f"the run failed: {message}")
    phases.record(state, "error", "error", {"message": str(exc)}, 0.0, 0)
