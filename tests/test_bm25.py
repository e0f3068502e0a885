import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rag.kb import BM25

DOCS = [["a", "b"], ["a", "c", "c"], ["d"]]


def test_hand_computed_example():
    # N = 3, avgdl = (2 + 3 + 1) / 3 = 2, k1 = 1.2, b = 0.75
    # idf(c) = ln(1 + (3 - 1 + .5) / (1 + .5)) = ln(2.6667) = 0.980829
    # idf(a) = ln(1 + (3 - 2 + .5) / (2 + .5)) = ln(1.6)    = 0.470004
    # doc 1: c (tf 2, |d| 3): 0.980829 * 2 * 2.2 / (2 + 1.2 * (.25 + .75 * 3 / 2)) = 1.182369
    #        a (tf 1):        0.470004 * 1 * 2.2 / (1 + 1.65)                       = 0.390192
    # doc 0: a (tf 1, |d| 2): 0.470004 * 2.2 / (1 + 1.2)                            = 0.470004
    index = BM25(k1=1.2, b=0.75)
    index.add([0, 1, 2], DOCS)
    scores = index.scores(["c", "a"])
    assert scores[1] == pytest.approx(1.182369 + 0.390192, abs=1e-5)
    assert scores[0] == pytest.approx(0.470004, abs=1e-5)
    assert scores[2] == 0
    assert index.top(["c", "a"], 5) == [(1, pytest.approx(1.572561, abs=1e-5)), (0, pytest.approx(0.470004, abs=1e-5))]
    assert index.idf(["a", "zzz"]) == {"a": pytest.approx(math.log(1.6))}


def test_incremental_add_and_delete_match_a_fresh_build():
    grown = BM25()
    grown.add([0, 1], DOCS[:2])
    grown.add([2, 3], [DOCS[2], ["a", "e"]])   # stays in the tail
    grown.delete([3])
    fresh = BM25()
    fresh.add([0, 1, 2], DOCS)
    query = ["a", "c", "d", "e"]
    assert np.allclose(grown.scores(query)[:3], fresh.scores(query))
    grown.merge()
    assert np.allclose(grown.scores(query)[:3], fresh.scores(query))
    assert grown.size == 3 and grown.top(["e"], 3) == []


def test_filter_mask_and_k():
    index = BM25()
    index.add([0, 1, 2], DOCS)
    allowed = np.array([True, False, True])
    assert [row for row, _ in index.top(["a"], 5, allowed)] == [0]
    assert len(index.top(["a"], 1)) == 1


def test_a_mask_shorter_or_longer_than_the_grown_arrays_is_fitted():
    index = BM25()
    index.add(list(range(10)), [["a", f"t{i}"] for i in range(10)])
    index.add([10], [["a", "new"]])          # the arrays grow by half: 15 slots for 11 rows
    assert len(index.alive) > 11
    short = np.zeros(11, bool)
    short[[2, 10]] = True
    assert sorted(row for row, _ in index.top(["a"], 20, short)) == [2, 10]
    long = np.ones(40, bool)
    assert len(index.top(["a"], 20, long)) == 11


def test_round_trip_through_arrays_keeps_scores():
    index = BM25()
    index.add([0, 1, 2], DOCS)
    index.add([3], [["c", "d"]])
    arrays, vocab = index.to_arrays()
    copy = BM25.from_arrays(arrays, vocab, 1.2, 0.75)
    assert np.allclose(copy.scores(["c", "d"]), index.scores(["c", "d"]))


def test_from_arrays_rejects_mismatched_vocabulary():
    index = BM25()
    index.add([0], [["a"]])
    arrays, vocab = index.to_arrays()
    with pytest.raises(ValueError):
        BM25.from_arrays(arrays, vocab + ["extra"], 1.2, 0.75)


# Pruned top-k (MaxScore) against the exhaustive ranking of every row's score: the same rows, in
# the same order, with the same scores, on random Zipf-like corpora (so that common terms are
# looked up for candidates only) with deletions, unmerged additions and filters. Bounded and
# derandomized, so it cannot fail by luck.
def zipf_docs(rng, count: int) -> list[list[str]]:
    words = np.array([f"w{i}" for i in range(40)] + ["中文", "知识"], dtype=object)
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.2
    return [rng.choice(words, size=rng.integers(1, 15), p=weights / weights.sum()).tolist() for _ in range(count)]


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(seed=st.integers(0, 10_000), count=st.integers(1, 800), later=st.integers(0, 20),
       deleted=st.sets(st.integers(0, 819), max_size=40), query=st.lists(st.integers(0, 41), min_size=1, max_size=6),
       k=st.integers(1, 12), filtered=st.booleans())
def test_pruned_top_k_equals_the_exhaustive_ranking(seed, count, later, deleted, query, k, filtered):
    rng = np.random.default_rng(seed)
    index = BM25()
    index.add(list(range(count)), zipf_docs(rng, count))
    index.merge()
    index.add(list(range(count, count + later)), zipf_docs(rng, later))  # unmerged: the tail
    index.delete([row for row in deleted if row < count + later])
    allowed = rng.random(len(index.alive)) < 0.5 if filtered else None
    tokens = [f"w{i}" if i < 40 else ["中文", "知识"][i - 40] for i in query]
    scores = index.scores(tokens)
    rows = [r for r in np.flatnonzero(scores > 0) if allowed is None or allowed[r]]
    expected = sorted(rows, key=lambda r: (-scores[r], r))[:k]
    assert index.top(tokens, k, allowed) == [(int(r), float(scores[r])) for r in expected]


def test_impacts_follow_every_change_of_the_index():
    index = BM25()
    index.add([0, 1, 2], DOCS)
    before = index.top(["a"], 3)
    index.add([3], [["a", "a", "b"]])      # N, df and the average length change: so do the scores
    fresh = BM25()
    fresh.add([0, 1, 2, 3], DOCS + [["a", "a", "b"]])
    assert index.top(["a"], 4) == fresh.top(["a"], 4)
    assert index.scores(["a"])[0] != before[0][1]
    index.merge()
    index.delete([3])
    assert index.top(["a"], 4) == before
    assert index.idf(["a"]) == BM25.from_arrays(*index.to_arrays(), 1.2, 0.75).idf(["a"])


def test_saved_arrays_hold_row_gaps_and_counts_and_load_back_exactly():
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(300)]
    docs = [list(rng.choice(words, size=rng.integers(1, 40))) for _ in range(2_000)]
    index = BM25()
    index.add(list(range(len(docs))), docs)
    index.delete([5, 17, 1_999])
    arrays, vocab = index.to_arrays()
    assert arrays["post_gaps"].min() >= 0 and arrays["post_tf"].dtype == np.uint16
    loaded = BM25.from_arrays(arrays, vocab, index.k1, index.b)
    merged = index._merged()
    assert np.array_equal(loaded.post_rows, merged[1]) and np.array_equal(loaded.post_tf, merged[2])
    for query in (["w1", "w7"], ["w299"], ["w3", "w3", "w150", "nope"]):
        assert np.allclose(loaded.scores(query), index.scores(query))
        assert [row for row, _ in loaded.top(query, 10)] == [row for row, _ in index.top(query, 10)]


def test_a_first_bulk_load_builds_the_same_index_as_adds_one_by_one():
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(500)]
    docs = [list(rng.choice(words, size=rng.integers(1, 30))) for _ in range(20_000)]
    bulk, small = BM25(), BM25()
    bulk.add(list(range(len(docs))), docs)               # 3 slices, placed without a sort
    for start in range(0, len(docs), 1_000):
        small.add(list(range(start, start + 1_000)), docs[start:start + 1_000])
    small.merge()
    assert bulk.vocab == small.vocab
    for name in ("indptr", "post_rows", "post_tf"):
        assert np.array_equal(getattr(bulk, name), getattr(small, name)), name
    assert np.array_equal(bulk.scores(["w3", "w77"]), small.scores(["w3", "w77"])[:len(docs)])
