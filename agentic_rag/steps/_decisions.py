"""count_low_rounds, wants_tool_first and after_faithfulness: what the loop does after a grade or a
faithfulness check, from the figures alone."""
from __future__ import annotations

from collections.abc import Callable

from ..core import Faithfulness, RunConfig


def count_low_rounds(score: float, low_rounds: int, floor: float) -> int:
    """The rounds graded below `floor` in a row, counting a round graded `score`."""
    return low_rounds + 1 if score < floor else 0


def wants_tool_first(sufficient: bool, round_no: int, max_rounds: int, select: Callable[[], object]) -> bool:
    """Whether a sufficient grade waits for a tool first: only with a round left, and only when
    `select` (asked only then) names a tool that the evidence now gives its arguments."""
    return sufficient and round_no < max_rounds and bool(select())


def after_faithfulness(verdict: Faithfulness, answered: bool, repairs: int, reflections: int, round_no: int,
                       config: RunConfig, repaired: bool = False) -> str:
    """What follows a faithfulness check: "repair" an unsupported answer (once per check, max_repairs
    per run), "abstain" when there is no answer or it stays below abstain_floor, "reflect" (one more
    round, once per run, with a round left) when it left a part out, else "done"."""
    if not repaired and verdict.score < config.min_faithfulness and verdict.unsupported \
            and repairs < config.max_repairs:
        return "repair"
    if not answered or verdict.score < config.abstain_floor:
        return "abstain"
    if not verdict.complete and reflections < 1 and round_no < config.max_rounds:
        return "reflect"
    return "done"
