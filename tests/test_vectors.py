import numpy as np

from agentic_rag.kb.embedders._embedders import HashingEmbedder
from agentic_rag.kb.indexes._vectors import DenseIndex, SparseIndex


def _unit(n, dim=16, seed=0):
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_exact_search_finds_itself_and_respects_deletes_and_masks():
    data = _unit(50)
    index = DenseIndex(16, exact_below=1000)
    index.add(list(range(50)), data)
    assert index.hnsw is None
    assert index.search(data[7], 1)[0][0] == 7
    index.delete([7])
    assert 7 not in [row for row, _ in index.search(data[7], 5)]
    allowed = np.zeros(50, bool)
    allowed[[3, 4]] = True
    assert sorted(row for row, _ in index.search(data[3], 10, allowed)) == [3, 4]


def test_hnsw_path_builds_grows_and_agrees_with_exact():
    data = _unit(300, seed=1)
    index = DenseIndex(16, exact_below=100)
    index.add(list(range(150)), data[:150])
    assert index.hnsw is not None
    index.add(list(range(150, 300)), data[150:])       # grows past the initial capacity? resized if so
    exact = DenseIndex(16, exact_below=10_000)
    exact.add(list(range(300)), data)
    hits = [index.search(data[i], 1)[0][0] for i in range(0, 300, 10)]
    assert hits == list(range(0, 300, 10))
    top_h = [row for row, _ in index.search(data[5], 5)]
    top_e = [row for row, _ in exact.search(data[5], 5)]
    assert len(set(top_h) & set(top_e)) >= 4
    index.delete([5])
    assert 5 not in [row for row, _ in index.search(data[5], 5)]


def test_hnsw_filter_and_small_candidate_sets():
    data = _unit(200, seed=2)
    index = DenseIndex(16, exact_below=50)
    index.add(list(range(200)), data)
    allowed = np.zeros(200, bool)
    allowed[:120] = True
    rows = [row for row, _ in index.search(data[150], 10, allowed)]
    assert len(rows) == 10 and all(r < 120 for r in rows)
    assert len(index.search(data[0], 500)) == 200  # k larger than the index


def test_resize_when_full():
    index = DenseIndex(16, exact_below=10)
    index.add(list(range(20)), _unit(20))
    capacity = index.hnsw.get_max_elements()
    index.add(list(range(20, 20 + capacity)), _unit(capacity, seed=3))
    assert index.hnsw.get_max_elements() > capacity
    assert index.size == 20 + capacity


def test_builds_repeat_exactly():
    data = _unit(400, seed=4)
    results = []
    for _ in range(2):
        index = DenseIndex(16, exact_below=100, seed=7)
        index.add(list(range(400)), data)
        results.append([index.search(data[i], 10) for i in range(0, 400, 37)])
    assert results[0] == results[1]


def _hashed(n, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)]
    return HashingEmbedder(256).embed([" ".join(rng.choice(words, size=rng.integers(1, 20))) for _ in range(n)])


def test_sparse_search_is_the_exact_cosine_ranking_through_adds_deletes_merges_and_masks():
    data = _hashed(400)
    sparse = SparseIndex(256)
    for start in range(0, 400, 40):  # ten blocks: more than _MAX_BLOCKS, so they are merged on the way
        sparse.add(list(range(start, start + 40)), data[start:start + 40])
    sparse.delete([3, 50, 399])
    live = np.ones(400, bool)
    live[[3, 50, 399]] = False
    allowed = np.random.default_rng(1).random(400) < 0.3
    for i in range(0, 400, 23):
        for mask in (live, live & allowed):
            got = sparse.search(data[i], 12, None if mask is live else allowed)
            exact = data @ data[i]
            best = np.sort(exact[mask])[::-1][:12]  # the exact top 12 similarities (ties may pick other rows)
            assert np.allclose([s for _, s in got], best, atol=1e-5)
            assert all(mask[r] and abs(exact[r] - s) < 1e-5 for r, s in got)
    assert sparse.size == 397 and len(sparse._blocks) <= 8


def test_sparse_rows_round_trip_through_arrays_and_fill_with_unrelated_rows():
    data = _hashed(50, seed=2)
    index = SparseIndex(256)
    index.add(list(range(50)), data)
    copy = SparseIndex(256)
    copy.add_arrays(index.arrays([40, 2, 17]))
    assert np.array_equal(copy.vectors_of([2, 17, 40]), data[[2, 17, 40]])
    unrelated = np.zeros(256, np.float32)
    unrelated[np.flatnonzero(data.any(axis=0) == 0)[:1]] = 1.0  # a dimension no row holds
    assert [r for r, _ in copy.search(unrelated, 2)] == [2, 17]  # similarity 0 for all: the lowest rows


def test_dense_vectors_keep_float16_precision_so_a_save_changes_nothing():
    data = _unit(30)
    index = DenseIndex(16)
    index.add(list(range(30)), data)
    copy = DenseIndex(16)
    copy.add_arrays(index.arrays(list(range(30))))
    assert index.arrays([0])["vectors"].dtype == np.float16
    assert copy.search(data[4], 5) == index.search(data[4], 5)
