"""refusal_reason and refusal_text, the refusal's two steps, from literal inputs (end to end: test_refusal.py)."""
import pytest

from agentic_rag import RunConfig
from agentic_rag.steps._refusal import refusal_reason, refusal_text

LOW = {"score": 0.2, "sufficient": False, "reason": "no weekend rule"}
MIDDLE = {"score": 0.5, "sufficient": False}


def test_refusal_text_says_why_what_was_searched_and_the_score_in_the_questions_language():
    assert refusal_text("Is there an Android app?", "retrieval stopped", ["android app", "mobile"], 0.25) == (
        "The knowledge base does not hold a reliable answer to this. Why: retrieval stopped. Searched for: "
        "android app; mobile; best evidence score 0.25.")
    assert refusal_text("有安卓应用吗？", "retrieval stopped", [], 0.0, "converged") == (  # in Chinese throughout
        "知识库中没有找到可靠的答案。原因：再检索也找不到新的内容，证据仍不足。已检索：无；最佳证据得分 0.00。")
    assert "Searched for: a; b; c; d;" in refusal_text("q?", "why", ["a", "b", "c", "d", "e"], 0.0)  # four at most


@pytest.mark.parametrize("stop_reason, grade, has_evidence, changes, refuses", [
    ("max_rounds", MIDDLE, True, {}, False),                          # answers from what there is
    ("converged", MIDDLE, True, {}, False),
    ("token_budget", MIDDLE, True, {}, True),                         # always refuses
    ("low_confidence", MIDDLE, True, {}, True),
    ("max_rounds", LOW, True, {}, True),                              # below answer_floor (0.3)
    ("max_rounds", MIDDLE, False, {}, True),                          # no evidence
    ("exhausted", MIDDLE, True, {}, False),
    ("exhausted", MIDDLE, True, {"answer_when_exhausted": False}, True),
    ("deadline", None, True, {}, True),                               # no grade: score 0
])
def test_refusal_reason_answers_from_what_there_is_unless_the_stop_or_the_grade_forbid(
        stop_reason, grade, has_evidence, changes, refuses):
    why = refusal_reason(stop_reason, grade, has_evidence, RunConfig(**changes))
    assert (why is not None) is refuses
    if why and stop_reason != "token_budget":
        assert why.endswith(f"retrieval stopped: {stop_reason}") and "needs 0.60" in why


def test_refusal_reason_quotes_the_grades_reason():
    assert refusal_reason("max_rounds", LOW, True, RunConfig()) == (
        "evidence stayed insufficient (last score 0.20, needs 0.60): no weekend rule; retrieval stopped: max_rounds")
    assert refusal_reason("token_budget", LOW, True, RunConfig()) == "the token budget ran out before another round"
