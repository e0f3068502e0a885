import pytest

from agentic_rag.eval import all_relevant_at_k, bootstrap_ci, mrr_at_k, recall_at_k
from agentic_rag.eval._metrics import entries, percentile

HITS = ["d3", "d1", "d3", "d7", "d2", "d9"]


def test_entry_level_metrics():
    assert entries(HITS) == ["d3", "d1", "d7", "d2", "d9"]
    assert recall_at_k(HITS, ["d1", "d9"], 5) == 0.5       # d9 is the 6th hit
    assert recall_at_k(HITS, ["d1", "d9"], 6) == 1.0
    assert all_relevant_at_k(HITS, ["d1", "d2"], 5) == 1.0
    assert all_relevant_at_k(HITS, ["d1", "d9"], 5) == 0.0
    assert mrr_at_k(HITS, ["d7", "d2"], 10) == pytest.approx(1 / 4)
    assert mrr_at_k(HITS, ["d9"], 5) == 0.0


def test_bootstrap_interval_brackets_the_mean_and_repeats():
    values = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    low, high = bootstrap_ci(values)
    assert low < 0.7 < high and (low, high) == bootstrap_ci(values)
    assert bootstrap_ci([1, 1, 1]) == (1.0, 1.0)
    assert percentile([1, 2, 3, 4], 50) == 2.5
