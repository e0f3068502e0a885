"""run_agentic_rag: the hand-written loop over a plain dict, and the only code that changes it.

Each pass asks stop_condition whether the run may go on; if it may, it runs the handler of the
state's phase (GRAPH below), which calls its step functions and returns the next phase. EDGES
declares which phase may follow which, and the loop refuses any other transition.

Who sets which stop_reason (settle writes those stop_condition decides at a round's start):

    stop_reason     set by
    token_budget    stop_condition; this loop, when a model call raises BudgetExceeded
    exhausted       stop_condition; search (no query left) and the answer's phases (no answer drawn)
    low_confidence  stop_condition
    converged       stop_condition
    max_rounds      stop_condition
    deadline        stop_condition; this loop, when a model call raises DeadlineExceeded
    sufficient      verify and grade (a sufficient grade), tool (a tool's result)
    direct          route (a direct reply)
    error           this loop: any other failure, an undeclared transition, a hook that raised
    stopped         this loop, when a hook stops the run
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

from ..core import _otel
from ..core._config import Config, RunConfig
from ..core._errors import BudgetExceeded, ConfigurationError, DeadlineExceeded, RetrievalError
from ..core._openai_api import RUN_DEADLINE
from ..kb import KnowledgeBaseBackend
from ..models._meter import Meter
from ..models._protocol import Model
from ..tools._registry import OffTool, Tool, ToolRegistry
from . import _phase_answer, _phase_search, _phases
from ._history import MAX_TOKENS, MAX_TURNS, history_messages
from ._state import AgentState, check_state, config_from_saved, new_state, saved_config, upgrade_state

# phase -> its handler, and the step functions each calls
GRAPH: dict[str, Callable[[AgentState, _phases.Run], str]] = {
    "condense": _phases.condense,      # condense_query (a follow-up only: a run with a history starts here)
    "route": _phases.route,            # route_query
    "search": _phase_search.search,    # rewrite_query, decompose_query, then vector_search (+ bridge_search) |
                                       # graph_search | pagerank_search | web; detect_convergence, detect_stall
    "tool": _phases.tool,              # call_tool
    "verify": _phases.verify,          # verify_sufficiency (deferred when unsure; none for a stalled round),
                                       # count_low_rounds, wants_tool_first
    "generate": _phase_answer.generate,  # generate_answer (or the kept draft), verify_citations
    "grade": _phase_answer.grade,      # folded_grade (verify_sufficiency when the reply holds none), verify_citations
    "check": _phase_answer.check,      # check_faithfulness, after_faithfulness, repair_answer
}

# phase -> the phases it may return; "done" ends the run. Any phase may also end the run on a model
# call past the budget or the deadline, or a failure (the loop's own stops, not edges).
EDGES: dict[str, frozenset[str]] = {
    "condense": frozenset({"route"}),
    "route": frozenset({"search", "tool",      # the route chosen; but first, at a round's start,
                                               # stop_condition may stop retrieval, and settle then
                        "generate",            # answers from what there is (or a direct reply goes here)
                        "done"}),              # or abstains (refusal_reason)
    "search": frozenset({"verify",             # the round's evidence to grade, or a stalled round's grade to keep
                         "route"}),            # nothing left to try (exhausted)
    "tool": frozenset({"generate",
                       "route"}),              # the tool failed: route again without it
    "verify": frozenset({"generate",           # sufficient, or unsure: the answer's reply grades too
                         "route"}),            # not yet: another round (stop_condition decides) or a tool first
    "generate": frozenset({"grade",            # the reply grades the evidence too
                           "check",
                           "done",             # a direct reply, or no answer could be drawn
                           "verify"}),         # a pending grade this run may not fold: graded apart first
    "grade": frozenset({"route",               # graded low: another round, the draft kept
                        "check", "done"}),     # as generate's
    "check": frozenset({"done",
                        "route"}),             # the answer left a part out: one more round
}


class TransitionError(RuntimeError):
    """A phase returned a phase its edges do not declare: a fault in the loop's code, not the input."""


def next_phase(phase: str, returned: str) -> str:
    """`returned` when EDGES lets `phase` go there; otherwise a TransitionError naming both."""
    if returned not in EDGES[phase]:
        raise TransitionError(f"phase {phase!r} returned {returned!r}, which EDGES does not declare; "
                              f"{phase!r} may go to {', '.join(sorted(EDGES[phase]))}")
    return returned


def stop_condition(state: AgentState, run: _phases.Run, now: float) -> str | None:
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
    config, begun = _prepare(question, kb, model, config, state, history, instructions)
    deadline = time.monotonic() + config.deadline_s  # every model call carries it (Meter), and each round's start
    reset = RUN_DEADLINE.set(deadline)  # and an embedder's calls inside the run's searches
    try:
        with _otel.span("invoke_agent agentic-rag", {"gen_ai.operation.name": "invoke_agent",
                                                     "gen_ai.agent.name": "agentic-rag",
                                                     "gen_ai.request.model": getattr(model, "name", None)}) as span:
            final = _run(question, begun, config, kb, model, tools, deadline, on_step, on_token)
            _run_attributes(span, final)
            return final
    finally:
        RUN_DEADLINE.reset(reset)


def _run_attributes(span, state: AgentState) -> None:
    """A finished run's span: its tokens and cost, rounds, stop reason, the evidence it cited and
    pooled (ids only, never text)."""
    if span is None:
        return
    usage = state["usage"]
    _otel.set_attributes(span, {
        "gen_ai.usage.input_tokens": usage["prompt_tokens"], "gen_ai.usage.output_tokens": usage["completion_tokens"],
        "agentic_rag.cost_usd": usage["cost_usd"], "agentic_rag.model_calls": usage["model_calls"],
        "agentic_rag.rounds": state["round"], "agentic_rag.stop_reason": state["stop_reason"] or "none",
        "agentic_rag.abstained": bool(state["abstained"]),
        "agentic_rag.evidence_ids": [e["id"] for e in state["evidence"]][:64],
        "agentic_rag.cited_ids": [c["id"] for c in state["citations"]]})
    if state["stop_reason"] == "error":
        _otel.failed(span, state.get("error") or "the run failed")


def _run(question: str, state: AgentState, config: Config, kb: KnowledgeBaseBackend, model: Model,
         tools: Iterable[Tool | OffTool], deadline: float,
         on_step: Hook | None, on_token: Callable[[str], object] | None) -> AgentState:
    """The loop itself: until a phase says done, check the stops, then run the phase's handler."""
    meter = Meter(model, config.token_budget, copy.deepcopy(state["usage"]),
                  max_completion_tokens=config.max_completion_tokens, deadline=deadline)
    run = _phases.Run(kb, meter, ToolRegistry(tools), config, deadline, on_token,
                      fold_grades=_grader_is_generator(model) and state["fold_grades"])
    started = time.perf_counter()
    while state["phase"] != "done":
        events, invalid = len(state["trace"]), len(run.meter.usage["invalid_usage"])
        try:
            phase, stop = state["phase"], stop_condition(state, run, time.monotonic())
            # a stop answers from what there is or abstains (settle); otherwise the phase's handler runs
            state["phase"] = next_phase(phase, _phases.settle(state, run, stop) if stop else GRAPH[phase](state, run))
        except BudgetExceeded as exc:
            state["stop_reason"] = "token_budget"  # whatever the grade said, the budget is why the run stops
            state["phase"] = _phases.abstain(state, "token_budget", f"the token budget ran out: {exc}")
        except DeadlineExceeded as exc:  # a model call the deadline cut off, or one it came too late for
            state["stop_reason"] = "deadline"
            state["phase"] = _phases.abstain(state, "deadline",
                                             f"the deadline of {config.deadline_s:g} s passed: {exc}")
        except Exception as exc:  # a model failing past its retries, or anything unexpected: recorded, not raised
            _fail(state, exc)
        if state["phase"] == "done":
            _phases.finish(state)  # once, as the answer stands: numbered as the user reads it (the hook too)
        for figures in run.meter.usage["invalid_usage"][invalid:]:  # counts a server sent that cannot be true
            _phases.record(state, "usage", "usage:invalid", figures, 0.0, 0)
        state["usage"] = copy.deepcopy(run.meter.usage)
        try:
            stop_now = on_step is not None and any(stops(on_step(event, copy.deepcopy(state)))
                                                   for event in state["trace"][events:])
        except Exception as exc:  # the caller's hook failed: the run ends as on any failure, its state kept
            _fail(state, exc, "the on_step hook raised ")
            break
        if stop_now and state["phase"] != "done":
            state["resume_reason"], state["stop_reason"] = state["stop_reason"], "stopped"
            break
    elapsed_ms = (time.perf_counter() - started) * 1000
    state["timings_ms"]["total"] = round(state["timings_ms"].get("total", 0) + elapsed_ms, 1)
    return state


def _prepare(question: str, kb: KnowledgeBaseBackend, model: Model, config: Config | RunConfig | None,
             state: dict | None, history: Sequence[Mapping] | None = None,
             instructions: str = "") -> tuple[Config, AgentState]:
    """The checks before a run (input errors raise here) and the state it starts from: a new one
    (with its history checked and bounded, what was dropped said in the trace), or a copy of the
    given one in this version's shape (upgrade_state) with a hook's stop undone."""
    if not isinstance(instructions, str):
        raise ConfigurationError(f"instructions must be text, not {type(instructions).__name__}")
    if state is not None and (history or instructions):
        raise ConfigurationError("a resumed state keeps its own history and instructions; pass them only to a new run")
    messages, dropped = history_messages(history)
    if state is not None:
        check_state(state)
        if question != state["question"]:
            raise ConfigurationError(f"the question {question!r} is not the state's {state['question']!r}; "
                                     "resume a state with the question it was asked")
    settings = _settings(config, state)
    if not callable(getattr(model, "complete", None)):
        raise ConfigurationError(f"{model!r} is not a model: it needs a complete(request) method (see models.Model)")
    if state is None:
        begun = new_state(question, settings, messages, instructions.strip())
        if dropped:
            _phases.record(begun, "history", f"history:-{dropped}", {
                "dropped_messages": dropped, "kept_messages": len(messages),
                "why": f"past {MAX_TURNS} turns or {MAX_TOKENS} tokens of history, the oldest first"}, 0.0, 0)
    else:
        begun = cast(AgentState, upgrade_state(copy.deepcopy(state)))  # check_state checked its keys and types
        if config is not None:  # the settings given now are the run's: a later resume keeps them
            begun["config"] = saved_config(settings)
    if begun["stop_reason"] == "stopped":
        begun["stop_reason"], begun["resume_reason"] = begun["resume_reason"], None
    if len(kb) == 0:
        raise RetrievalError("the knowledge base is empty; index documents first (agentic-rag index PATH --kb DIR)")
    return settings, begun


def _settings(config: Config | RunConfig | None, state: dict | None) -> Config:
    """The run's settings: the given Config, or a RunConfig with the other layers as the state saved
    them (else their defaults); none given, the state's own (a resumed run keeps its settings)."""
    if isinstance(config, Config):
        return config  # given whole: the saved settings are not read
    if config is not None and not isinstance(config, RunConfig):
        raise ConfigurationError(f"config must be an agentic_rag.Config or RunConfig, not {type(config).__name__}")
    saved = config_from_saved(state["config"]) if state is not None else Config()
    return saved if config is None else Config.from_layers(index=saved.index, search=saved.search, run=config)


def _grader_is_generator(model: Model) -> bool:
    """Whether grading and generation go to one model, so that an unsure grade can come in the answer's
    reply; a models set that gives grading a model of its own keeps it as the grader."""
    model_for = getattr(model, "model_for", None)
    return model_for is None or model_for("grade") is model_for("generate")


def _fail(state: AgentState, exc: Exception, where: str = "") -> None:
    """End the run on a failure: no answer is returned (an unchecked draft stays in draft_answer only)."""
    kind = exc.__class__.__name__  # the name alone: a module path is private and may move
    message = f"{where}{kind}: {exc}"
    state.update({"stop_reason": "error", "phase": "done", "error": message, "error_type": kind, "answer": "",
                  "citations": [], "abstained": True, "abstain_reason": f"the run failed: {message}"})
    _phases.record(state, "error", "error", {"message": f"{where}{exc}", "error_type": kind}, 0.0, 0)
