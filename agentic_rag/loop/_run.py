"""What every phase handler shares: Run (what one run holds besides its state) and traced (a step
timed and recorded as one trace event in the phase's patch)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ..core import Config, tracing
from ..kb import KnowledgeBaseBackend
from ..models import Meter
from ..tools import ToolRegistry
from ._patch import Event, Patch
from ._state import AgentState


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


T = TypeVar("T")


def present(value: T | None) -> T:
    """A value the phase graph has set by the time it is read (route runs before search and tool, a
    stalled round follows a graded one, generate leaves grade a draft's reply), as check_state also
    requires of a saved state: typed as set."""
    return cast(T, value)


@contextmanager
def traced(state: AgentState, run: Run, patch: Patch, step: str) -> Iterator[dict[str, Any]]:
    """Time the block and add it to `patch` as one trace event with the tokens and cost it used. The
    block fills in the event: `summary` (the trace line's word; the step's name unless set) and
    `detail`. A block that raises adds no event (what it set in the patch before stays)."""
    event: dict[str, Any] = {"summary": step, "detail": {}}
    tokens, cost, start = run.meter.tokens_used, run.meter.usage["cost_usd"], time.perf_counter()
    with tracing.span(f"agentic_rag.{step}", {"agentic_rag.round": patch.get(state, "round"),
                                            "agentic_rag.phase": state["phase"]}) as span:
        yield event
        tracing.set_attributes(span, {"agentic_rag.summary": event["summary"],
                                    "agentic_rag.tokens": run.meter.tokens_used - tokens,
                                    "agentic_rag.cost_usd": run.meter.usage["cost_usd"] - cost})
    patch.events.append(Event(step, event["summary"], event["detail"], (time.perf_counter() - start) * 1000,
                              run.meter.tokens_used - tokens, run.meter.usage["cost_usd"] - cost))
