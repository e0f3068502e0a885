"""The run state: one plain, JSON-serialisable dict per run, and a one-line trace (the evidence items it
holds are core.Evidence)."""
from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, TypedDict

from ..core import Config, ConfigurationError, Evidence, count_tokens, new_usage

PHASES = ("condense", "route", "search", "tool", "verify", "generate", "grade", "check", "done")
STOP_REASONS = ("sufficient", "direct", "max_rounds", "token_budget", "low_confidence", "converged", "deadline",
                "exhausted", "unmentioned", "stopped", "error")


class _RoundKeys(TypedDict):
    round: int                  # the round's number (state["round"] when it ran)
    route: str                  # vector, multi_hop or tool


class Round(_RoundKeys, total=False):
    """One entry of state["rounds"]: what a round searched or called and how it went (state.md)."""

    source: str                 # retrieval rounds: vector, graph or web
    queries: list[str]          # the queries it ran
    new: int                    # passages it added to the pool
    converged: bool             # it found nothing new, or its best passages overlap the round before's
    exhausted: bool             # no query was left to try
    stalled: bool               # none of its new passages held what the last grade lacked
    grade: float                # its grade's score, once the grade is taken
    incomplete_answer: bool     # the answer left a part out and asked for another round
    tool: str                   # tool rounds: the tool called
    error: str | None           # tool rounds: why the call failed, or None


class AgentState(TypedDict):
    """What each key holds. Only the loop's driver writes it, from the patches its phases return."""

    question: str               # the question as asked; never overwritten
    standalone: str             # the question routed, searched and graded: as asked, or a follow-up written
                                # to stand alone by condense
    history: list[dict]         # the conversation before the question ({"role", "content"} messages, bounded;
                                # an assistant turn may hold the "evidence" it cited); [] for a single question
    instructions: str           # the application's instructions (a chat's system message) for the answer
    config: dict                # the settings of this run
    phase: str                  # the next phase: condense, route, search, tool, verify, generate, grade, check
                                # or done
    round: int                  # retrieval rounds run so far
    route: dict | None          # the latest routing decision
    rounds: list[Round]         # one per round (see Round)
    queries_tried: list[str]    # every search query run, so none is repeated
    subqueries: list[dict]      # the latest decomposition (query, depends_on)
    parts: list[str]            # the parts an answer must cover (comparisons, sub-questions)
    used_tools: list[str]
    sources_tried: list[str]    # retrieval sources used so far (vector, graph, web)
    rewrites: int
    repairs: int
    reflections: int            # extra rounds asked for by an incomplete answer
    evidence: list[Evidence]    # the pool, best first (see Evidence)
    grade: dict | None          # the latest sufficiency grade
    grade_pending: bool         # verify was unsure: the grade comes in the answer's reply
    fold_grades: bool           # False once the model answered without the grade asked for: grading goes apart
    missing: list[str]          # what the latest grade or faithfulness check found missing
    low_rounds: int             # consecutive rounds graded below the low-confidence floor
    last_top: list[str]         # the previous round's best passage ids (convergence)
    draft_answer: str           # the answer as generated, before checks
    draft_reply: dict | None    # the reply that drafted it while its folded grade is still to be taken
    draft_for: list[str]        # the evidence ids a draft kept past its low grade stands for; [] when none
    answer: str                 # the answer as returned
    citations: list[dict]       # evidence the answer cites, each with its number n
    removed_citations: list[int]
    faithfulness: dict | None
    abstained: bool
    abstain_reason: str
    stop_reason: str | None     # one of STOP_REASONS, once retrieval has stopped
    resume_reason: str | None   # the stop reason a hook's stop interrupted, restored on resume
    error: str | None           # what failed, "ExceptionName: message", when stop_reason is error
    error_type: str | None      # that exception's class name (ExceptionName), else None
    trace: list[dict]           # events: round, step, summary, detail, ms, tokens
    timings_ms: dict            # milliseconds per step, and total
    usage: dict                 # model_calls, prompt_tokens, completion_tokens, cost_usd, by_task


STATE_KEYS = frozenset(AgentState.__annotations__)  # what a state holds, and all a patch may set


def new_state(question: str, config: Config | None = None, history: list[dict] | None = None,
              instructions: str = "") -> AgentState:
    """A fresh state for one run; an empty question, or one too long for the budget, is an error.
    With a `history` (checked and bounded messages, _history.history_messages) the run starts by
    condensing the question; without one it starts at route."""
    config = config or Config()
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError("the question is empty; ask something")
    tokens = count_tokens(question)
    if tokens > config.token_budget // 4:  # every call carries the question: a quarter of the budget at most
        raise ConfigurationError(f"the question has {tokens} tokens, more than a quarter of the token budget "
                                 f"({config.token_budget}); shorten it or raise token_budget (ask --budget)")
    return AgentState(
        question=question, standalone=question, history=list(history or []), instructions=instructions,
        config=saved_config(config), phase="condense" if history else "route", round=0, route=None, rounds=[],
        queries_tried=[], subqueries=[], parts=[], used_tools=[], sources_tried=[],
        rewrites=0, repairs=0, reflections=0,
        evidence=[], grade=None, grade_pending=False, fold_grades=True, missing=[], low_rounds=0, last_top=[],
        draft_answer="",
        draft_reply=None, draft_for=[], answer="", citations=[],
        removed_citations=[], faithfulness=None, abstained=False, abstain_reason="", stop_reason=None,
        resume_reason=None, error=None, error_type=None, trace=[], timings_ms={}, usage=new_usage())


def saved_config(config: Config) -> dict:
    """The settings as a state saves them: flat and JSON-ready (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def config_from_saved(saved: dict) -> Config:
    """The Config a state's settings describe; a key Config does not know, or a value it refuses
    (Config checks each field's type and range), is a ConfigurationError naming it."""
    known = {f.name for f in fields(Config)}
    unknown = next((key for key in saved if key not in known), None)
    if unknown is not None:
        raise ConfigurationError(f"the state's config has the unknown setting {unknown!r}; "
                                 "pass a state that run_agentic_rag returned")
    try:
        return Config(**saved)  # lists, as JSON gives them, become tuples in Config itself
    except ConfigurationError as exc:
        raise ConfigurationError(f"the state's config is not valid ({exc}); resume it with "
                                 "config=Config(...), or pass a state that run_agentic_rag returned") from None


UPGRADE_FILLS = ("grade_pending", "draft_for", "draft_reply", "fold_grades", "error_type",  # not saved before
                 "standalone", "history", "instructions")


def check_state(state: object) -> None:
    """Raise one ConfigurationError naming what keeps `state` from being a state a run can resume:
    not a dict, a key missing or of the wrong type, an unknown phase, or a phase's precondition unmet."""
    fix = "pass a state that run_agentic_rag returned"
    if not isinstance(state, dict):
        raise ConfigurationError(f"the state is a {type(state).__name__}, not a dict; {fix}")
    hints = typing.get_type_hints(AgentState)
    missing = [key for key in hints if key not in state and key not in UPGRADE_FILLS]
    if missing:
        raise ConfigurationError(f"the state has no {', '.join(missing)}; {fix}")
    for key, hint in hints.items():
        if key in state and not isinstance(state[key], kinds := _runtime_types(hint)):
            raise ConfigurationError(f"the state's {key} should be {' or '.join(k.__name__ for k in kinds)}, "
                                     f"not {type(state[key]).__name__}; {fix}")
    for key in ("rounds", "evidence", "trace", "citations"):
        if not all(isinstance(item, dict) for item in state[key]):
            raise ConfigurationError(f"the state's {key} holds an item that is not a dict; {fix}")
    if state["phase"] not in PHASES:
        raise ConfigurationError(f"the state's phase {state['phase']!r} is none of {', '.join(PHASES)}; {fix}")
    for needed, why in _preconditions(state):
        if not needed:
            raise ConfigurationError(f"the state is in phase {state['phase']!r} but {why}; {fix}")


def _preconditions(state: dict) -> list[tuple[bool, str]]:
    """What the state's phase needs to run, each with what is wrong when it does not hold."""
    phase, has_route = state["phase"], isinstance(state["route"], dict) and "route" in state["route"]
    return [(phase not in ("search", "tool") or has_route, "holds no routing decision (route)"),
            (phase != "tool" or has_route and bool(state["route"].get("tool")), "its route names no tool"),
            (phase not in ("verify", "grade", "check") or bool(state["rounds"]), "holds no round (rounds is empty)"),
            (not state.get("grade_pending") or bool(state["rounds"]), "a grade is pending for no round"),
            (phase != "grade" or isinstance(state.get("draft_reply"), dict), "holds no draft_reply to grade"),
            (phase != "verify" or not state["rounds"] or not state["rounds"][-1].get("stalled")
             or isinstance(state["grade"], dict), "its stalled round has no grade to keep")]


def _runtime_types(hint: object) -> tuple[type, ...]:
    """The classes a value of the annotation `hint` may be: list[str] -> (list,), dict | None -> (dict, NoneType)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(t for arg in typing.get_args(hint) for t in _runtime_types(arg))
    if hint is type(None):
        return (type(None),)
    origin = typing.get_origin(hint) or hint
    if typing.is_typeddict(origin):
        return (dict,)
    if not isinstance(origin, type):  # Literal[...], a TypeVar: nothing isinstance could check a value against
        raise TypeError(f"{hint!r} names no class; give the state's keys plain annotations")
    return (int, float) if origin is float else (origin,)


# how earlier versions began state["error"]: the class's name, after these words when a hook raised
_ERROR_TYPE = re.compile(r"(?:the on_step hook raised )?([A-Za-z_]\w*): ")


def upgrade_state(state: dict) -> dict:
    """A saved state in the shape this version runs, changed in place: states saved before the
    typed round keys marked a pending grade as `grade: None` in the last round and a kept draft's
    evidence as `drafted` in the round that kept it (the latest such round counts); a state saved
    before fold_grades was kept had it off when its trace shows a draft graded apart; one saved
    before error_type was kept takes it from its error message; one saved before conversations is
    a single question (standalone as asked, no history, no instructions)."""
    rounds = state["rounds"]
    if "fold_grades" not in state:
        state["fold_grades"] = not graded_apart_after_a_draft(state["trace"])
    if "grade_pending" not in state:
        state["grade_pending"] = bool(rounds) and "grade" in rounds[-1] and rounds[-1]["grade"] is None
    if "draft_for" not in state:
        drafted = [r["drafted"] for r in rounds if "drafted" in r]
        state["draft_for"] = list(drafted[-1]) if drafted else []
    state.setdefault("draft_reply", None)
    state.setdefault("standalone", state["question"])  # saved before conversations: a single question
    state.setdefault("history", [])
    state.setdefault("instructions", "")
    if "error_type" not in state:  # the class was only in the message then, which starts with its name
        found = _ERROR_TYPE.match(state["error"] or "")
        state["error_type"] = found.group(1) if found else None
    for entry in rounds:
        entry.pop("drafted", None)
        if "grade" in entry and entry["grade"] is None:
            del entry["grade"]
    return state


def graded_apart_after_a_draft(trace: list[dict]) -> bool:
    """Whether a trace shows a draft whose reply held no grade: a verify right after a generate that
    did not come with the answer."""
    steps = [e for e in trace if e.get("step") != "usage"]  # counts a server sent come between the two
    pairs = zip(steps, steps[1:], strict=False)
    return any(a["step"] == "generate" and b["step"] == "verify"
               and (b.get("detail") or {}).get("by") != "with the answer" for a, b in pairs)


def format_trace(state: Mapping[str, Any]) -> str:
    """The run on one line, e.g. route:vector -> search:d3,d7 -> verify:0.42 -> generate -> faithfulness:0.95."""
    return " -> ".join(event["summary"] for event in state["trace"])
