"""run_agentic_rag: the hand-written loop over a plain dict, and the only code that changes it.

Each pass runs the step the state's `phase` names and sets the next phase:

    route -> search | tool | generate(direct) ; search -> verify ; tool -> generate | route
    verify -> generate (sufficient) | route (another round) | stop (converged, low confidence...)
    generate -> check ; check -> done | route (incomplete answer, one more round) | abstain
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable

from . import _phases as phases
from ._config import Config
from ._errors import BudgetExceeded, ConfigurationError, RetrievalError
from ._state import AgentState, new_state
from .kb import KnowledgeBase
from .models._meter import Meter
from .models._protocol import Model
from .tools._registry import ToolRegistry

Hook = Callable[[dict, dict], object]  # (event, state) -> False or "stop" to stop the run


def run_agentic_rag(question: str, kb: KnowledgeBase, model: Model, tools=(), config: Config | None = None,
                    state: dict | None = None, on_step: Hook | None = None,
                    on_token: Callable[[str], object] | None = None) -> AgentState:
    """Answer `question` from `kb` or abstain; returns the final state. Pass a state a hook stopped to
    resume it; `on_token` receives the draft answer as it is generated (the checks run after it).
    Bad input (an empty question, bad settings, an empty knowledge base) raises before the run
    starts; once it runs, a failure ends it with stop_reason "error" and the state is returned."""
    config, state = _prepare(question, kb, model, config, state)
    meter = Meter(model, config.token_budget, copy.deepcopy(state["usage"]),
                  max_completion_tokens=config.max_completion_tokens)
    run = phases.Run(kb, meter, ToolRegistry(tools), config, time.monotonic() + config.deadline_s, on_token)
    started = time.perf_counter()
    while state["phase"] != "done":
        events = len(state["trace"])
        try:
            if state["phase"] == "route" and state["round"] >= config.max_rounds:
                phases.settle(state, run, "max_rounds")
            elif state["phase"] == "route" and time.monotonic() > run.deadline:
                phases.settle(state, run, "deadline")
            else:
                phases.STEPS[state["phase"]](state, run)
        except BudgetExceeded as exc:
            state["stop_reason"] = "token_budget"  # whatever the grade said, the budget is why the run stops
            phases.abstain(state, "token_budget", f"the token budget ran out: {exc}")
        except Exception as exc:  # a model failing past its retries, or anything unexpected: recorded, not raised
            _fail(state, exc)
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


def _fail(state: AgentState, exc: Exception) -> None:
    """End the run on a failure: no answer is returned (an unchecked draft stays in draft_answer only)."""
    message = f"{exc.__class__.__name__}: {exc}"
    state.update(stop_reason="error", phase="done", error=message, answer="", citations=[], abstained=True,
                 abstain_reason=f"the run failed: {message}")
    phases.record(state, "error", "error", {"message": str(exc)}, 0.0, 0)
