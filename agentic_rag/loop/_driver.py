"""run_agentic_rag: the hand-written loop over a plain dict, and the only code that changes it.

Each pass asks stop_condition whether the run may go on; if it may, it runs the handler of the
state's phase (GRAPH, in _graph.py), which reads the state, puts what it changes in a Patch and
returns the next phase. The loop refuses a phase GRAPH does not declare, and applies the patch
(apply, below: the one place a state is written).

Who sets which stop_reason (settle writes those stop_condition decides at a round's start):

    stop_reason     set by
    token_budget    stop_condition; this loop, when a model call raises BudgetExceeded
    exhausted       stop_condition; search (no query left) and the answer's phases (no answer drawn)
    low_confidence  stop_condition
    converged       stop_condition
    max_rounds      stop_condition
    deadline        stop_condition; this loop, when a model call raises DeadlineExceeded
    sufficient      verify and grade (a sufficient grade), tool (a tool's result)
    unmentioned     route: the question asks about a name the knowledge base holds nowhere
    direct          route (a direct reply)
    error           this loop: any other failure, an undeclared transition, a hook that raised
    stopped         this loop, when a hook stops the run
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from ..core import RUN_DEADLINE, BudgetExceeded, Config, DeadlineExceeded, RunConfig, tracing
from ..kb import KnowledgeBaseBackend
from ..models import Meter, Model
from ..tools import OffTool, Tool, ToolRegistry
from ._endings import abstain, finish, settle
from ._graph import GRAPH, next_phase
from ._patch import Event, Patch
from ._run import Run
from ._start import grader_is_generator, prepare
from ._state import AgentState


def stop_condition(state: AgentState, run: Run, now: float) -> str | None:
    """Why the run may not start another round, or None. Asked before every phase; only a round's
    start ("route") can stop. Pure given the clock `now`; checked in this order."""
    if state["phase"] != "route":
        return None
    last: Mapping[str, object] = state["rounds"][-1] if state["rounds"] else {}
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


Hook = Callable[[dict, AgentState], object]  # (event, state) -> False or "stop" to stop the run


def stops(answer: object) -> bool:
    """Whether a hook's answer stops the run: False or "stop" (not 0, None or anything else)."""
    return answer is False or (isinstance(answer, str) and answer == "stop")


def run_agentic_rag(question: str, kb: KnowledgeBaseBackend, model: Model, tools: Iterable[Tool | OffTool] = (),
                    config: Config | RunConfig | None = None,
                    state: dict | None = None, on_step: Hook | None = None,
                    on_token: Callable[[str], object] | None = None, history: Sequence[Mapping] | None = None,
                    instructions: str = "") -> AgentState:
    """Answer `question` from `kb` or abstain; returns the final state. Pass a state a hook stopped to
    resume it; `on_token` receives the draft answer as it is generated (the checks run after it).
    `history` is the conversation before the question: OpenAI-style user and assistant messages, or
    the states of earlier runs (a follow-up is condensed to stand alone first; see Conversation);
    `instructions` (a chat's system message) go to a hosted model with the answer's request.
    Bad input (an empty question, bad settings, a state no run returned, an empty knowledge base)
    raises before the run starts; once it runs, a failure ends it with stop_reason "error" and the
    state is returned."""
    config, begun, opening = prepare(question, kb, model, config, state, history, instructions)
    apply(begun, opening)
    deadline = time.monotonic() + config.deadline_s  # every model call carries it (Meter), and each round's start
    reset = RUN_DEADLINE.set(deadline)  # and an embedder's calls inside the run's searches
    try:
        with tracing.span("invoke_agent agentic-rag", {"gen_ai.operation.name": "invoke_agent",
                                                     "gen_ai.agent.name": "agentic-rag",
                                                     "gen_ai.request.model": getattr(model, "name", None)}) as span:
            final = _run(begun, config, kb, model, tools, deadline, on_step, on_token)
            _run_attributes(span, final)
            return final
    finally:
        RUN_DEADLINE.reset(reset)


def _run_attributes(span: Any, state: AgentState) -> None:
    """A finished run's span: its tokens and cost, rounds, stop reason, the evidence it cited and
    pooled (ids only, never text)."""
    if span is None:
        return
    usage = state["usage"]
    tracing.set_attributes(span, {
        "gen_ai.usage.input_tokens": usage["prompt_tokens"], "gen_ai.usage.output_tokens": usage["completion_tokens"],
        "agentic_rag.cost_usd": usage["cost_usd"], "agentic_rag.model_calls": usage["model_calls"],
        "agentic_rag.rounds": state["round"], "agentic_rag.stop_reason": state["stop_reason"] or "none",
        "agentic_rag.abstained": bool(state["abstained"]),
        "agentic_rag.evidence_ids": [e["id"] for e in state["evidence"]][:64],
        "agentic_rag.cited_ids": [c["id"] for c in state["citations"]]})
    if state["stop_reason"] == "error":
        tracing.failed(span, state.get("error") or "the run failed")


def _run(state: AgentState, config: Config, kb: KnowledgeBaseBackend, model: Model, tools: Iterable[Tool | OffTool],
         deadline: float, on_step: Hook | None, on_token: Callable[[str], object] | None) -> AgentState:
    """The loop itself: until a phase says done, check the stops, run the phase's handler, apply its patch."""
    meter = Meter(model, config.token_budget, copy.deepcopy(state["usage"]),
                  max_completion_tokens=config.max_completion_tokens, deadline=deadline)
    run = Run(kb, meter, ToolRegistry(tools), config, deadline, on_token,
              fold_grades=grader_is_generator(model) and state["fold_grades"])
    started = time.perf_counter()
    while state["phase"] != "done":
        events, invalid = len(state["trace"]), len(run.meter.usage["invalid_usage"])
        patch = Patch()  # this pass's changes; a handler that raises keeps what it put in before, as its trace says
        try:
            phase, stop = state["phase"], stop_condition(state, run, time.monotonic())
            # a stop answers from what there is or abstains (settle); otherwise the phase's handler runs
            patch.set(phase=next_phase(phase, settle(state, run, patch, stop) if stop
                                       else GRAPH[phase].handle(state, run, patch)))
        except BudgetExceeded as exc:
            patch.set(stop_reason="token_budget")  # whatever the grade said, the budget is why the run stops
            patch.set(phase=abstain(state, patch, "token_budget", f"the token budget ran out: {exc}"))
        except DeadlineExceeded as exc:  # a model call the deadline cut off, or one it came too late for
            patch.set(stop_reason="deadline")
            patch.set(phase=abstain(state, patch, "deadline", f"the deadline of {config.deadline_s:g} s passed: {exc}"))
        except Exception as exc:  # a model failing past its retries, or anything unexpected: recorded, not raised
            _fail(patch, exc)
        apply(state, patch)
        if state["phase"] == "done":
            apply(state, finish(state))  # once, as the answer stands: numbered as the user reads it (the hook too)
        apply(state, _metered(run, invalid))
        try:
            stop_now = on_step is not None and any(stops(on_step(event, copy.deepcopy(state)))
                                                   for event in state["trace"][events:])
        except Exception as exc:  # the caller's hook failed: the run ends as on any failure, its state kept
            apply(state, _fail(Patch(), exc, "the on_step hook raised "))
            break
        if stop_now and state["phase"] != "done":
            apply(state, Patch({"resume_reason": state["stop_reason"], "stop_reason": "stopped"}))
            break
    total = round(state["timings_ms"].get("total", 0) + (time.perf_counter() - started) * 1000, 1)
    apply(state, Patch({"timings_ms": {**state["timings_ms"], "total": total}}))
    return state


def apply(state: AgentState, patch: Patch) -> None:
    """Write a patch into the state, the one place a state changes: its values (keys AgentState
    declares: Patch refuses others), then its events, each stamped with the round and its time
    added to timings_ms[step]."""
    cast(dict[str, Any], state).update(patch.values)
    for event in patch.events:
        state["trace"].append({"round": state["round"], "step": event.step, "summary": event.summary,
                               "detail": event.detail, "ms": round(event.ms, 2), "tokens": event.tokens,
                               "cost_usd": round(event.cost_usd, 8)})
        state["timings_ms"][event.step] = round(state["timings_ms"].get(event.step, 0) + event.ms, 2)


def _metered(run: Run, invalid: int) -> Patch:
    """The usage so far, and an event for each count a server sent that cannot be true since `invalid`."""
    return Patch({"usage": copy.deepcopy(run.meter.usage)},
                 [Event("usage", "usage:invalid", figures) for figures in run.meter.usage["invalid_usage"][invalid:]])


def _fail(patch: Patch, exc: Exception, where: str = "") -> Patch:
    """End the run on a failure: no answer is returned (an unchecked draft stays in draft_answer only)."""
    kind = exc.__class__.__name__  # the name alone: a module path is private and may move
    message = f"{where}{kind}: {exc}"
    patch.set(stop_reason="error", phase="done", error=message, error_type=kind, answer="", citations=[],
              abstained=True, abstain_reason=f"the run failed: {message}")
    patch.note("error", "error", {"message": f"{where}{exc}", "error_type": kind})
    return patch
