"""detect_convergence and detect_stall, from literal ids and passages."""
from agentic_rag.steps._progress import detect_convergence, detect_stall


def test_a_later_round_converges_when_it_finds_nothing_new_or_overlaps_the_last():
    assert not detect_convergence(1, ["a"], [], [])                           # the first round never converges
    assert detect_convergence(2, ["a", "b"], ["c"], [])                       # nothing new
    assert detect_convergence(2, ["a", "b", "c", "d"], ["a", "b", "c", "d", "e"], ["x"], 0.8)  # Jaccard 4/5
    assert not detect_convergence(2, ["a", "b", "c", "d"], ["a", "b", "c", "d", "e"], ["x"], 0.81)
    assert not detect_convergence(3, ["a", "b"], ["c", "d"], ["a"])


GRADED = [{"id": "p1", "text": "Orders paid on weekdays ship the same day."}]
LOW = {"score": 0.4, "sufficient": False, "missing": []}
QUESTION = "When do orders paid on weekends ship?"


def test_a_round_stalls_when_no_new_passage_holds_what_the_graded_evidence_lacked():
    unrelated = GRADED + [{"id": "p2", "text": "The Team plan costs 8 USD."}]
    weekend = GRADED + [{"id": "p3", "text": "Weekend orders leave on Monday."}]
    assert detect_stall(QUESTION, LOW, [], GRADED, unrelated)
    assert not detect_stall(QUESTION, LOW, [], GRADED, weekend)               # "weekends" was lacking
    assert not detect_stall(QUESTION, dict(LOW, sufficient=True), [], GRADED, unrelated)
    assert not detect_stall(QUESTION, None, [], GRADED, unrelated)            # nothing graded yet
    assert not detect_stall(QUESTION, LOW, ["Team plan"], GRADED, unrelated)  # what the grade missed came in
