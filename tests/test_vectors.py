import numpy as np

from agentic_rag.kb._vectors import VectorIndex


def _unit(n, dim=16, seed=0):
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_exact_search_finds_itself_and_respects_deletes_and_masks():
    data = _unit(50)
    index = VectorIndex(16, exact_below=1000)
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
    index = VectorIndex(16, exact_below=100)
    index.add(list(range(150)), data[:150])
    assert index.hnsw is not None
    index.add(list(range(150, 300)), data[150:])       # grows past the initial capacity? resized if so
    exact = VectorIndex(16, exact_below=10_000)
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
    index = VectorIndex(16, exact_below=50)
    index.add(list(range(200)), data)
    allowed = np.zeros(200, bool)
    allowed[:120] = True
    rows = [row for row, _ in index.search(data[150], 10, allowed)]
    assert len(rows) == 10 and all(r < 120 for r in rows)
    assert len(index.search(data[0], 500)) == 200  # k larger than the index


def test_resize_when_full():
    index = VectorIndex(16, exact_below=10)
    index.add(list(range(20)), _unit(20))
    capacity = index.hnsw.get_max_elements()
    index.add(list(range(20, 20 + capacity)), _unit(capacity, seed=3))
    assert index.hnsw.get_max_elements() > capacity
    assert index.size == 20 + capacity


def test_builds_repeat_exactly():
    data = _unit(400, seed=4)
    results = []
    for _ in range(2):
        index = VectorIndex(16, exact_below=100, seed=7)
        index.add(list(range(400)), data)
        results.append([index.search(data[i], 10) for i in range(0, 400, 37)])
    assert results[0] == results[1]
