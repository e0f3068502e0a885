"""The loop's shared phase machinery and its retrieval-side handlers: route, tool and verify. A
handler calls its step functions, writes their results into the state, records a trace event per
step and returns the next phase; with run_agentic_rag, the only code that changes a state. Which
phase may follow which is declared in _driver.py (EDGES); search is in _phase_search.py, generate,
grade and check in _phase_answer.py."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ..core import _otel
from ..core._config import Config
from ..core._schemas import Grade, RouteDecision
from ..kb import KnowledgeBaseBackend
from ..models._meter import Meter
from ..steps import call_tool, condense_query, route_query, verify_sufficiency
from ..steps._answer import number_citations
from ..steps._decisions import count_low_rounds, wants_tool_first
from ..steps._refusal import refusal_reason, refusal_text
from ..steps._search import merge_into_pool
from ..steps._verify import question_weights, unseen_terms
from ..tools._registry import ToolRegistry
from ._history import carried_evidence, history_lines
from ._state import AgentState, Evidence, Round


@dataclass
class Run:
    """What one run holds besides its state: the knowledge base, the metered model, tools, settings."""

    kb: KnowledgeBaseBackend
    meter: Meter                # the caller's model, wrapped: counts tokens and enforces the budget
    tools: ToolRegistry
    config: Config
    deadline: float             # time.monotonic() after which no round starts and no model call goes on
    on_token: Callable[[str], object] | None = None
    fold_grades: bool = True    # off once the model answers without a grade (state["fold_grades"]), or when
                                # grading has its own model

    @property
    def folds(self) -> bool:
        """Whether an unsure grade is asked for with the answer, streaming or not: a run costs the same
        calls with `on_token` as without. A graded reply is not streamed (a model streams plain answer
        text, which carries no grade, and a draft whose grade may yet send the run on must not be
        shown); it is handed to `on_token` whole once its grade stands. An answer to evidence the
        deterministic check settled streams as it is written."""
        return self.fold_grades


def record(state: AgentState, step: str, summary: str, detail: dict, ms: float, tokens: int,
           cost: float = 0.0) -> None:
    """Append one trace event and add its time to the step's total."""
    state["trace"].append({"round": state["round"], "step": step, "summary": summary, "detail": detail,
                           "ms": round(ms, 2), "tokens": tokens, "cost_usd": round(cost, 8)})
    state["timings_ms"][step] = round(state["timings_ms"].get(step, 0) + ms, 2)


T = TypeVar("T")


def present(value: T | None) -> T:
    """A value the phase graph has set by the time it is read (route runs before search and tool, a
    stalled round follows a graded one, generate leaves grade a draft's reply), as check_state also
    requires of a saved state: typed as set."""
    return cast(T, value)


@contextmanager
def traced(state: AgentState, run: Run, step: str) -> Iterator[dict[str, Any]]:
    """Time the block and record it as one trace event with the tokens and cost it used. The block
    fills in the event: `summary` (the trace line's word; the step's name unless set) and `detail`.
    A block that raises records nothing."""
    event: dict[str, Any] = {"summary": step, "detail": {}}
    tokens, cost, start = run.meter.tokens_used, run.meter.usage["cost_usd"], time.perf_counter()
    with _otel.span(f"agentic_rag.{step}", {"agentic_rag.round": state["round"],
                                            "agentic_rag.phase": state["phase"]}) as span:
        yield event
        _otel.set_attributes(span, {"agentic_rag.summary": event["summary"],
                                    "agentic_rag.tokens": run.meter.tokens_used - tokens,
                                    "agentic_rag.cost_usd": run.meter.usage["cost_usd"] - cost})
    record(state, step, event["summary"], event["detail"], (time.perf_counter() - start) * 1000,
           run.meter.tokens_used - tokens, run.meter.usage["cost_usd"] - cost)


def abstain(state: AgentState, stop_reason: str, why: str) -> str:
    """End the run with a clear refusal (refusal_text) that says what was searched and how well it scored; "done"."""
    score = state["grade"]["score"] if state["grade"] else 0.0
    state.update({"answer": refusal_text(state["standalone"], why, state["queries_tried"], score), "citations": [],
                  "abstained": True, "abstain_reason": why, "stop_reason": state["stop_reason"] or stop_reason})
    record(state, "abstain", "abstain", {"why": why}, 0.0, 0)
    return "done"


def finish(state: AgentState) -> None:
    """The answer as the user gets it, once the run's answer is final (after the faithfulness check
    and repair, which read markers as positions in the evidence shown): its sources numbered 1..k in
    the order it first cites them (number_citations; the trace keeps what the model wrote), and a line
    for each tool the router wanted that the run had not got (tool_notes)."""
    answer, citations = number_citations(state["answer"], state["citations"])
    state["answer"], state["citations"] = "\n".join([answer, *tool_notes(state)]) if answer else answer, citations


def settle(state: AgentState, run: Run, stop_reason: str) -> str:
    """Retrieval stopped (stop_condition said why) without a sufficient grade: answer from what there
    is ("generate"), or abstain ("done") for the reason refusal_reason gives."""
    state["stop_reason"] = stop_reason
    why = refusal_reason(stop_reason, state["grade"], bool(state["evidence"]), run.config.run)
    return abstain(state, stop_reason, why) if why else "generate"


def condense(state: AgentState, run: Run) -> str:
    """A follow-up's first phase: condense_query writes the question to stand alone from the history
    (state["standalone"], what the run routes, searches and grades), and the passages the previous
    answer cited that the knowledge base still holds (none when the question moved on to another
    version or name: carried_evidence) start the evidence pool, marked carried and
    ranked against it (cited again only where they support the new answer). Next: "route"."""
    with traced(state, run, "condense") as event:
        condensed = condense_query(state["question"], history_lines(state["history"]), run.meter, run.kb,
                                   run.config.search_k)
        carried = carried_evidence(state["history"], condensed.standalone)
        if carried:  # only what the knowledge base, as this run may see it, still holds
            documents = set(run.kb.held_documents([e["doc_id"] for e in carried]))
            carried = [e for e in carried if e["doc_id"] in documents]
        held = run.kb.bm25_scores(condensed.standalone, [e["id"] for e in carried]) if carried else {}
        kept = [cast(Evidence, {**e, "kind": "passage", "ranks": e.get("ranks", {}), "rank": run.config.search_k,
                                "carried": True}) for e in carried if e["id"] in held]
        state["standalone"] = condensed.standalone
        state["evidence"] = merge_into_pool([], run.kb, condensed.standalone, kept, []).pool
        changed = condensed.standalone != state["question"]
        event.update(summary="condense" if changed else "condense:as-asked",
                     detail={**condensed.model_dump(), "carried": [e["id"] for e in kept]})
    return "route"


def route(state: AgentState, run: Run) -> str:
    """Start a round: route_query picks the route (direct, vector, multi_hop, tool) and the source.
    Next: "generate" for a direct reply, "tool", or "search"."""
    state["round"] += 1
    with traced(state, run, "route") as event:
        decision = route_query(state["standalone"], run.meter, run.tools, state["evidence"][:run.config.evidence_k],
                               tuple(state["used_tools"]), _sources(run), tuple(state["sources_tried"]))
        event.update(detail=decision.model_dump(), summary=f"route:{decision.route}"
                     + (f"({decision.tool})" if decision.tool and decision.route == "tool" else "")
                     + (f"@{decision.source}" if decision.source != "vector" and decision.route != "tool" else ""))
    state["route"] = decision.model_dump()
    tool_failures(state, run)
    if decision.tool and decision.route != "tool":
        tool_off(state, run, decision.tool)
    if decision.route == "direct":
        state["stop_reason"] = "direct"
        return "generate"
    return "tool" if decision.route == "tool" else "search"


def tool_failures(state: AgentState, run: Run) -> None:
    """A tool whose argument finder raised is a failed tool: traced, and not used again."""
    for name, why in run.tools.take_failures():
        state["used_tools"].append(name)
        record(state, "tool", f"tool:{name}:error", {"error": why}, 0.0, 0)


def tool_off(state: AgentState, run: Run, name: str) -> None:
    """The router wanted a tool this run has not got: traced once a run (tool:NAME:off), with the line
    the final answer adds (finish) in the question's language."""
    summary = f"tool:{name}:off"
    if not any(e["summary"] == summary for e in state["trace"]):
        record(state, "tool", summary, {"note": run.tools.off_note(name, state["standalone"]),
                                        "why": "the router wanted this tool; this run has not got it"}, 0.0, 0)


def tool_notes(state: Mapping[str, Any]) -> list[str]:
    """The lines the answer adds for tools the router wanted that the run had not got (tool_off)."""
    return [e["detail"]["note"] for e in state["trace"] if e["step"] == "tool" and e["summary"].endswith(":off")]


def _sources(run: Run) -> tuple[str, ...]:
    """The configured sources this run can use: the graph (walk, PageRank) when the knowledge base has one, the web
    when a web_search tool is registered."""
    graph = run.kb.graph_size[1] > 0
    usable = {"vector": True, "graph": graph, "pagerank": graph, "web": "web_search" in run.tools.tools}
    return tuple(s for s in run.config.sources if usable[s]) or ("vector",)


def tool(state: AgentState, run: Run) -> str:
    """Call the routed tool (call_tool); its result becomes evidence that needs no grading.
    Next: "generate", or "route" (without this tool) when it failed."""
    decision = present(state["route"])
    with traced(state, run, "tool") as event:
        items, error = call_tool(RouteDecision(**decision), run.tools)
        event.update(summary=f"tool:{decision['tool']}" + (":error" if error else ""),
                     detail={"results": [i["text"][:300] for i in items], "error": error})
    state["used_tools"].append(decision["tool"])
    state["rounds"].append(Round(round=state["round"], route="tool", tool=decision["tool"], error=error))
    if error:
        return "route"
    ids = {i["id"] for i in items}
    state["evidence"] = items + [e for e in state["evidence"] if e["id"] not in ids]
    state.update({"stop_reason": "sufficient", "grade": {"score": 1.0, "sufficient": True, "missing": [],
                                                         "reason": "a tool answered", "by": "tool"}})
    return "generate"


def verify(state: AgentState, run: Run) -> str:
    """Grade the evidence with verify_sufficiency, which costs no model call when its deterministic
    check is confident; a stalled round keeps the grade before, with no call. Next: "generate" when
    sufficient, or unsure (the answer's reply then grades too, and can still send the run on);
    "route" for another round (stop_condition decides whether there is one), or first for a tool
    that the evidence now gives its arguments."""
    if state["rounds"][-1].get("stalled"):  # grading the same evidence again could only say the same
        record(state, "verify", "verify:stalled",
               dict(present(state["grade"]), why="no new passage holds what the evidence lacked"), 0.0, 0)
        return after_grade(state, run, Grade(**present(state["grade"])))
    grade = grade_evidence(state, run, state["evidence"][:run.config.evidence_k], defer=run.folds)
    if grade is None:
        state["grade_pending"] = True  # generate asks for it in the same reply
        return "generate"
    return after_grade(state, run, grade)


def after_grade(state: AgentState, run: Run, grade: Grade) -> str:
    """Take a grade into the state: "generate" when sufficient (and no tool is wanted first), else "route"."""
    c = run.config
    state.update({"grade": grade.model_dump(), "missing": grade.missing, "grade_pending": False})
    state["rounds"][-1]["grade"] = grade.score
    state["low_rounds"] = count_low_rounds(grade.score, state["low_rounds"], c.low_confidence_floor)
    wants_tool = wants_tool_first(grade.sufficient, state["round"], c.max_rounds, lambda: run.tools.select(
        state["standalone"], state["evidence"][:c.evidence_k], tuple(state["used_tools"])))
    tool_failures(state, run)
    if grade.sufficient and not wants_tool:
        state["stop_reason"] = "sufficient"
        return "generate"
    return "route"


def grade_evidence(state: AgentState, run: Run, shown: Sequence[Evidence], defer: bool = False) -> Grade | None:
    """verify_sufficiency with the knowledge base's word weights, traced; with `defer`, None when its
    deterministic check is unsure (the grade then comes with the answer)."""
    kb_weights = run.kb.term_weights(state["standalone"])
    with traced(state, run, "verify") as event:
        grade = verify_sufficiency(state["standalone"], shown, run.meter, run.config.min_context_score,
                                   question_weights(state["standalone"], kb_weights),
                                   unseen_terms(state["standalone"], kb_weights), defer=defer)
        event.update(summary=f"verify:{grade.score:.2f}" if grade else "verify:?",
                     detail=grade.model_dump() if grade else {"unsure": "graded with the answer"})
    return grade
