"""Vector index: exact numpy search for small collections, hnswlib (cosine) above a threshold."""
from __future__ import annotations

import hnswlib
import numpy as np

from ._filters import fit_mask


class VectorIndex:
    """Rows are integer labels chosen by the caller; vectors must be L2-normalised."""

    def __init__(self, dimension: int, m: int = 16, ef_construction: int = 200, ef: int = 100,
                 exact_below: int = 20_000, seed: int = 100):
        self.dimension = dimension
        self.m, self.ef_construction, self.ef = m, ef_construction, ef
        self.exact_below, self.seed = exact_below, seed
        self.vectors = np.zeros((0, dimension), np.float32)
        self.alive = np.zeros(0, bool)
        self.hnsw: hnswlib.Index | None = None

    @property
    def size(self) -> int:
        """Number of live vectors."""
        return int(self.alive.sum())

    def add(self, rows: list[int], vectors: np.ndarray) -> None:
        """Store vectors under new rows; builds or grows the hnswlib graph when large enough."""
        rows_array = np.asarray(rows, np.int64)
        needed = int(rows_array.max(initial=-1)) + 1
        if needed > len(self.alive):  # grow by half at least, so many small adds stay cheap
            grow = max(needed, len(self.alive) * 3 // 2) - len(self.alive)
            self.vectors = np.concatenate([self.vectors, np.zeros((grow, self.dimension), np.float32)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
        self.vectors[rows_array] = vectors
        self.alive[rows_array] = True
        if self.hnsw is not None:
            self._hnsw_add(rows_array, vectors)
        elif self.size >= self.exact_below:
            self._build_hnsw()

    def _build_hnsw(self) -> None:
        self.hnsw = hnswlib.Index(space="cosine", dim=self.dimension)
        self.hnsw.init_index(max_elements=max(1024, 2 * len(self.alive)), M=self.m,
                             ef_construction=self.ef_construction, random_seed=self.seed)
        self.hnsw.set_ef(self.ef)
        live = np.flatnonzero(self.alive)
        self._hnsw_add(live, self.vectors[live])

    def _hnsw_add(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        needed = self.hnsw.get_current_count() + len(rows)
        if needed > self.hnsw.get_max_elements():
            self.hnsw.resize_index(max(needed, 2 * self.hnsw.get_max_elements()))
        # one thread: insertion order then fixes the graph, so builds repeat exactly
        self.hnsw.add_items(vectors, rows, num_threads=1)

    def delete(self, rows: list[int]) -> None:
        """Remove rows from every search at once."""
        for row in rows:
            if self.alive[row] and self.hnsw is not None:
                self.hnsw.mark_deleted(int(row))
            self.alive[row] = False

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k rows most similar to the query (cosine), best first, among `allowed` rows (a mask
        of any length: rows past its end are not allowed)."""
        mask = self.alive if allowed is None else self.alive & fit_mask(allowed, len(self.alive))
        candidates = int(mask.sum())
        k = min(k, candidates)
        if k == 0:
            return []
        if self.hnsw is not None and candidates >= self.exact_below:
            try:
                labels, distances = self.hnsw.knn_query(
                    query.reshape(1, -1), k=k, filter=None if allowed is None else (lambda row: bool(mask[row])))
                return [(int(r), 1.0 - float(d)) for r, d in zip(labels[0], distances[0], strict=True)]
            except RuntimeError:
                pass  # the graph could not return k live neighbours: search exactly instead
        sims = self.vectors @ query.astype(np.float32)
        sims[~mask] = -np.inf
        best = np.argpartition(-sims, k - 1)[:k]
        best = best[np.lexsort((best, -sims[best]))]
        return [(int(r), float(sims[r])) for r in best]
