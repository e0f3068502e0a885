"""Vector indexes, cosine similarity over L2-normalised vectors; rows are integer labels chosen by
the caller.

DenseIndex (e5, hosted embedders): exact numpy search for small collections, hnswlib above a
threshold. Vectors are kept at float16 precision, which is how they are saved: a search gives the
same result before and after a save.

SparseIndex (the hashing embedder: about 50 non-zero dimensions of 2,048): rows listed by the
dimensions they hold, searched exactly by adding up query weight x row weight over the query's
dimensions. No graph to build, nothing approximate, a twentieth of the memory.

Each saves and loads itself: `files` gives the writers of a segment's vector files (vectors.npz,
and the dense index's hnswlib graph, hnsw.bin, in a full save), `load` reads them back, each
checked before it is used.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core import IndexConfig, SearchConfig
from ._checks import check_hnsw, check_vectors
from ._csr import group, parts_of, write_npz
from ._filters import fit_mask

if TYPE_CHECKING:
    import hnswlib

_MAX_BLOCKS = 8  # SparseIndex: additions kept as separate blocks until there are this many


def _hnswlib() -> Any:
    """hnswlib, imported once a graph is first built or loaded: a knowledge base that never holds
    enough dense vectors for one (and importing agentic_rag) does not load it."""
    import hnswlib

    return hnswlib


def _grow(alive: np.ndarray, needed: int) -> np.ndarray:
    """`alive` long enough for `needed` rows, grown by half at least, so that many small adds stay cheap."""
    if needed <= len(alive):
        return alive
    return np.concatenate([alive, np.zeros(max(needed, len(alive) * 3 // 2) - len(alive), bool)])


def _best(rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (row, score), best first, ties to the lower row."""
    if len(rows) > k:
        keep = scores >= np.partition(scores, len(rows) - k)[len(rows) - k]
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return [(int(rows[i]), float(scores[i])) for i in order]


class DenseIndex:
    """Exact search below `exact_below` live vectors, an hnswlib graph (cosine) above it."""

    kind = "dense"

    def __init__(self, dimension: int, m: int = 16, ef_construction: int = 200, ef: int = 256,
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
        """Store vectors (at float16 precision) under new rows; builds or grows the graph when large enough."""
        rows_array = np.asarray(rows, np.int64)
        vectors = np.asarray(vectors, np.float32).astype(np.float16).astype(np.float32)
        self.alive = _grow(self.alive, int(rows_array.max(initial=-1)) + 1)
        if len(self.alive) > len(self.vectors):
            grown = np.zeros((len(self.alive), self.dimension), np.float32)
            grown[:len(self.vectors)] = self.vectors
            self.vectors = grown
        self.vectors[rows_array] = vectors
        self.alive[rows_array] = True
        if self.hnsw is not None:
            self._hnsw_add(rows_array, vectors, self.hnsw)
        elif self.size >= self.exact_below:
            self._build_hnsw()

    def _build_hnsw(self) -> None:
        """A graph of the live rows, built off to the side and then put in place: searches meanwhile
        use the old one (or exact search), never a half-built one."""
        graph = _hnswlib().Index(space="cosine", dim=self.dimension)
        graph.init_index(max_elements=max(1024, 2 * len(self.alive)), M=self.m,
                         ef_construction=self.ef_construction, random_seed=self.seed)
        graph.set_ef(self.ef)
        live = np.flatnonzero(self.alive)
        self._hnsw_add(live, self.vectors[live], graph)
        self.hnsw = graph

    def compact(self) -> None:
        """Rebuild the graph without its deleted nodes once they are a fifth of it."""
        if self.hnsw is not None and self.hnsw.get_current_count() > 1.25 * self.size:
            self._build_hnsw()

    def _hnsw_add(self, rows: np.ndarray, vectors: np.ndarray, graph: hnswlib.Index) -> None:
        needed = graph.get_current_count() + len(rows)
        if needed > graph.get_max_elements():
            graph.resize_index(max(needed, 2 * graph.get_max_elements()))
        # one thread: insertion order then fixes the graph, so builds repeat exactly
        graph.add_items(vectors, rows, num_threads=1)

    def pack(self, vectors: np.ndarray) -> np.ndarray:
        """A batch of vectors as add_packed takes them: float16, all the precision kept."""
        return np.asarray(vectors, np.float32).astype(np.float16)

    def add_packed(self, rows: list[int], packed: np.ndarray) -> None:
        """Add a batch made by `pack` under new rows."""
        self.add(rows, packed.astype(np.float32))

    def add_packs(self, batches: list[tuple[list[int], np.ndarray]]) -> None:
        """Add batches made by `pack`, each under its new rows."""
        for rows, packed in batches:
            self.add_packed(rows, packed)

    def delete(self, rows: list[int]) -> None:
        """Remove rows from every search at once (a row never given a vector is none of them)."""
        for row in rows:
            if row < len(self.alive) and self.alive[row]:
                if self.hnsw is not None:
                    self.hnsw.mark_deleted(int(row))
                self.alive[row] = False

    def vectors_of(self, rows: list[int]) -> np.ndarray:
        """The stored vectors of the given rows."""
        return self.vectors[np.asarray(rows, np.int64)].reshape(len(rows), self.dimension)

    def arrays(self, rows: list[int]) -> dict[str, np.ndarray]:
        """The given rows' vectors for saving: float16, which loses nothing they hold."""
        return {"rows": np.asarray(rows, np.int64), "vectors": self.vectors_of(rows).astype(np.float16)}

    def files(self, rows: list[int], whole: bool) -> dict[str, Callable[[Path], None]]:
        """The writers of a segment's vector files for these rows: vectors.npz, and in a whole save the
        graph (hnsw.bin, rebuilt first if deleted nodes are a fifth of it) so a load need not build it."""
        writers = {"vectors.npz": lambda path: write_npz(path, self.arrays(rows))}
        if whole:
            self.compact()
            graph = self.hnsw  # the one just compacted: the writer runs within this save, before any other change
            if graph is not None:
                writers["hnsw.bin"] = lambda path: graph.save_index(str(path))
        return writers

    def add_arrays(self, arrays: dict, graph: Path | None = None) -> None:
        """Add rows saved by `arrays`; with the hnswlib graph saved with them (`graph`), read it
        instead of building it again."""
        rows = np.asarray(arrays["rows"], np.int64)
        vectors = np.asarray(arrays["vectors"], np.float32).astype(np.float16).astype(np.float32)
        if vectors.shape != (len(rows), self.dimension):
            raise ValueError(f"saved vectors have shape {vectors.shape}, expected ({len(rows)}, {self.dimension})")
        if graph is None:
            self.add(rows.tolist(), vectors)
            return
        self.alive = _grow(self.alive, int(rows.max(initial=-1)) + 1)
        self.vectors = np.zeros((len(self.alive), self.dimension), np.float32)
        self.vectors[rows], self.alive[rows] = vectors, True
        self.hnsw = _hnswlib().Index(space="cosine", dim=self.dimension)
        self.hnsw.load_index(str(graph), max_elements=max(len(self.alive), 1))
        self.hnsw.set_ef(self.ef)

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
        live = np.flatnonzero(mask)
        return _best(live, (self.vectors @ query.astype(np.float32))[live], k)


class SparseIndex:
    """Exact search over vectors with few non-zero dimensions: for each dimension, the rows that hold
    it and their weights (blocks of additions, merged when there are more than _MAX_BLOCKS)."""

    kind = "sparse"

    def __init__(self, dimension: int):
        self.dimension = dimension
        self.alive = np.zeros(0, bool)
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (indptr by dimension, rows, weights)

    @property
    def size(self) -> int:
        """Number of live vectors."""
        return int(self.alive.sum())

    def add(self, rows: list[int], vectors: np.ndarray) -> None:
        """Store the non-zero weights of each vector under new rows."""
        self.add_packed(rows, self.pack(vectors))

    def pack(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A batch of vectors as add_packed takes them: (vector index, dimension, weight) of each non-zero."""
        vectors = np.asarray(vectors, np.float32).reshape(-1, self.dimension)
        at, dims = np.nonzero(vectors)
        return at.astype(np.int32), dims.astype(np.int32), vectors[at, dims]

    def add_packed(self, rows: list[int], packed: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Add a batch made by `pack` under new rows."""
        self.add_packs([(rows, packed)])

    def add_packs(self, batches: list[tuple[list[int], tuple]]) -> None:
        """Add batches made by `pack`, each under its new rows, as one block."""
        new_rows = np.concatenate([np.zeros(0, np.int64)] + [np.asarray(rows, np.int64) for rows, _ in batches])
        self._add(new_rows, [(dims, np.asarray(rows, np.int32)[at], weights) for rows, (at, dims, weights) in batches])

    def _add(self, new_rows: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """New rows, and their (dimension, row, weight) entries in parts, as one more block."""
        self.alive = _grow(self.alive, int(np.max(new_rows, initial=-1)) + 1)
        self.alive[new_rows] = True
        self._blocks.append(self._block(parts))
        if len(self._blocks) > _MAX_BLOCKS:
            self._merge()

    def _block(self, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A block by dimension from parts of (dimension, row, weight); each dimension's rows keep the
        order given, ascending since rows only ever grow: (indptr, rows, weights)."""
        indptr, rows, weights = group(parts, self.dimension, (np.int32, np.float32))
        return indptr, rows, weights

    @property
    def _dim_type(self) -> type[np.integer]:
        return np.int16 if self.dimension <= 32767 else np.int32

    def _entries(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Every live (dimension, row, weight), dimension by dimension within each block, in parts."""
        parts = []
        for indptr, rows, weights in self._blocks:
            dims = np.repeat(np.arange(self.dimension, dtype=self._dim_type), np.diff(indptr))
            for dim, row, weight in parts_of(dims, rows, weights):
                keep = self.alive[row]
                parts.append((dim, row, weight) if keep.all() else (dim[keep], row[keep], weight[keep]))
        return parts

    def _merge(self) -> None:
        """One block from all, without the rows deleted since."""
        self._blocks = [self._block(self._entries())]

    def delete(self, rows: list[int]) -> None:
        """Remove rows from every search at once (their weights go at the next merge; a row never
        given a vector is none of them)."""
        rows_array = np.asarray(rows, np.int64)
        self.alive[rows_array[rows_array < len(self.alive)]] = False

    def vectors_of(self, rows: list[int]) -> np.ndarray:
        """The given rows' vectors, dense."""
        out = np.zeros((len(rows), self.dimension), np.float32)
        arrays = self.arrays(rows)
        out[np.repeat(np.arange(len(rows)), np.diff(arrays["indptr"])), arrays["dims"]] = arrays["weights"]
        return out

    def arrays(self, rows: list[int]) -> dict[str, np.ndarray]:
        """The given rows' weights for saving, row by row (CSR): `indptr` into `dims` and `weights`."""
        wanted = np.asarray(rows, np.int64)
        slot = np.full(len(self.alive), -1, np.int32)  # each row's place in `rows`, -1 if not wanted
        slot[wanted] = np.arange(len(wanted), dtype=np.int32)
        parts = []
        for dim, row, weight in self._entries():
            at = slot[row]
            keep = at >= 0
            parts.append((at, dim, weight) if keep.all() else (at[keep], dim[keep], weight[keep]))
        indptr, dims, weights = group(parts, len(wanted), (self._dim_type, np.float32))  # each row's dims ascending
        return {"rows": wanted, "indptr": indptr, "dims": dims, "weights": weights}

    def files(self, rows: list[int], whole: bool) -> dict[str, Callable[[Path], None]]:
        """The writer of a segment's vectors.npz for these rows (a sparse index has no graph to save)."""
        return {"vectors.npz": lambda path: write_npz(path, self.arrays(rows))}

    def add_arrays(self, arrays: dict, graph: Path | None = None) -> None:
        """Add rows saved by `arrays`, or dense ones (`vectors`, as format 2 saved them); `graph`:
        none is saved, the argument is DenseIndex's."""
        if "vectors" in arrays:
            self.add(np.asarray(arrays["rows"]).tolist(), np.asarray(arrays["vectors"], np.float32))
            return
        rows, indptr = np.asarray(arrays["rows"], np.int64), np.asarray(arrays["indptr"], np.int64)
        dims, weights = np.asarray(arrays["dims"], np.int64), np.asarray(arrays["weights"], np.float32)
        if len(indptr) != len(rows) + 1 or indptr[-1] != len(dims) or len(dims) != len(weights) \
                or (len(dims) and (dims.min() < 0 or dims.max() >= self.dimension)):
            raise ValueError("saved sparse vectors do not match their rows or the dimension")
        self._add(rows, parts_of(dims, np.repeat(rows, np.diff(indptr)), weights))

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k rows most similar to the query (cosine), best first, among `allowed` rows (a mask
        of any length: rows past its end are not allowed). A row that shares no dimension with the
        query has similarity 0: such rows (the lowest first) come after the positive ones."""
        dims = np.flatnonzero(query)
        scores = np.zeros(len(self.alive))
        for indptr, rows, weights in self._blocks:  # every posting of the query's dimensions at once
            starts, counts = indptr[dims], indptr[dims + 1] - indptr[dims]
            at = np.arange(counts.sum()) + np.repeat(starts - np.cumsum(counts) + counts, counts)
            scores += np.bincount(rows[at], np.repeat(query[dims], counts) * weights[at], len(self.alive))
        mask = self.alive if allowed is None else self.alive & fit_mask(allowed, len(self.alive))
        found = np.flatnonzero(mask & (scores != 0))
        if k > 0 and (scores[found] > 0).sum() < k:  # not enough above 0: rows at 0 rank next
            found = np.union1d(found, np.flatnonzero(mask & (scores == 0))[:k])
        return _best(found, scores[found], k) if k > 0 else []



VectorIndex = DenseIndex | SparseIndex


def holds_vector(index: VectorIndex, row: int) -> bool:
    """Whether the index holds a live vector for the row (a row added without one, or past its end, does not)."""
    return row < len(index.alive) and bool(index.alive[row])


def vector_index(dimension: int, sparse: bool, index: IndexConfig, search: SearchConfig) -> VectorIndex:
    """A sparse index for vectors with few non-zero dimensions, else a dense one with these settings."""
    if sparse:
        return SparseIndex(dimension)
    return DenseIndex(dimension, index.hnsw_m, index.hnsw_ef_construction, search.hnsw_ef,
                      index.exact_search_below, index.seed)


def load_vectors(index: VectorIndex, segment: Path, files: list[str], rows: list[int], total: int,
                 reading: Callable[[str], AbstractContextManager] = lambda what: nullcontext()) -> None:
    """Add the vectors a segment saved, for some of `rows` (of `total` rows: a row may be waiting
    for its vector), to `index`, each file checked before it is used, and hnsw.bin read instead of
    building the graph again when `files` (the segment's verified files) list it; `reading(name)`
    names the file a failure came from."""
    name = "vectors.npy" if "vectors.npy" in files else "vectors.npz"
    with reading(str(segment / name)):
        arrays = saved_arrays(segment, rows, total)
    with reading(f"{segment / name} (or the chunks.jsonl beside it)"):
        check_vectors(arrays, index.dimension, rows)
    graph = segment / "hnsw.bin" if "hnsw.bin" in files else None
    with reading(f"{graph} (or the vectors.npz beside it)" if graph else str(segment / "vectors.npz")):
        if graph is not None:
            check_hnsw(graph, index.dimension, np.asarray(arrays["rows"], np.int64).tolist(), arrays["vectors"])
        index.add_arrays(arrays, graph)


def saved_arrays(segment: Path, live: list[int], rows: int) -> dict:
    """A segment's vectors as its index saved them (vectors.npz), or, written by format 2, the
    `live` rows of its float32 matrix of `rows` rows (vectors.npy)."""
    if (segment / "vectors.npz").is_file():
        with np.load(segment / "vectors.npz", allow_pickle=False) as arrays:
            return dict(arrays)
    vectors = np.load(segment / "vectors.npy", mmap_mode="r", allow_pickle=False)
    if len(vectors) != rows:
        raise ValueError(f"vectors.npy has {len(vectors)} rows, expected {rows}")
    return {"rows": np.array(live, np.int64), "vectors": np.asarray(vectors[live], np.float32)}
