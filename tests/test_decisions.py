"""count_low_rounds, wants_tool_first and after_faithfulness, the loop's decisions after a grade or a
faithfulness check, from literal inputs (end to end: test_loop.py)."""
import pytest

from agentic_rag import RunConfig
from agentic_rag.core._schemas import Faithfulness
from agentic_rag.steps._decisions import after_faithfulness, count_low_rounds, wants_tool_first


def test_low_rounds_count_in_a_row_and_a_better_grade_resets_them():
    assert count_low_rounds(0.2, 0, 0.25) == 1
    assert count_low_rounds(0.1, 1, 0.25) == 2
    assert count_low_rounds(0.25, 1, 0.25) == 0      # at the floor is not below it


def test_a_tool_comes_first_only_for_a_sufficient_grade_with_a_round_left():
    asked = []
    select = lambda: asked.append(1) or "calculator"  # noqa: E731
    assert wants_tool_first(True, 1, 3, select) and asked == [1]
    assert not wants_tool_first(True, 1, 3, lambda: None)
    assert not wants_tool_first(False, 1, 3, select) and not wants_tool_first(True, 3, 3, select)
    assert asked == [1]                              # not asked when no tool could come first


GOOD = Faithfulness(score=0.95)
UNSUPPORTED = Faithfulness(score=0.5, unsupported=["ships on Sunday"])
INCOMPLETE = Faithfulness(score=0.95, complete=False, missing=["the price"])


@pytest.mark.parametrize("verdict, answered, repairs, reflections, round_no, repaired, decision", [
    (GOOD, True, 0, 0, 1, False, "done"),
    (UNSUPPORTED, True, 0, 0, 1, False, "repair"),
    (UNSUPPORTED, True, 1, 0, 1, False, "done"),       # repaired once this run already; 0.5 >= abstain_floor
    (UNSUPPORTED, True, 0, 0, 1, True, "done"),        # one repair per check
    (Faithfulness(score=0.3, unsupported=["x"]), True, 1, 0, 1, False, "abstain"),
    (GOOD, False, 0, 0, 1, False, "abstain"),          # the repair left no answer
    (INCOMPLETE, True, 0, 0, 1, False, "reflect"),
    (INCOMPLETE, True, 0, 1, 1, False, "done"),        # one reflection per run
    (INCOMPLETE, True, 0, 0, 3, False, "done"),        # no round left
])
def test_after_faithfulness_repairs_abstains_reflects_or_is_done(verdict, answered, repairs, reflections,
                                                                  round_no, repaired, decision):
    assert after_faithfulness(verdict, answered, repairs, reflections, round_no, RunConfig(),
                              repaired=repaired) == decision
