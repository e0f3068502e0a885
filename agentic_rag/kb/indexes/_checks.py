"""Checks of a saved index's files, before the index is built on them: every array's shape and dtype,
every row in range, BM25 term frequencies against document lengths and, for a sample of chunks,
against their text; vectors finite and of unit length (embedders return L2-normalised rows);
hnswlib's file parsed and checked in full before hnswlib reads it (it reads its file unchecked, and a
link out of range crashes the process at the first search). A failed check raises ValueError; the
knowledge base that reads the file names it (folder/_integrity.reading)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._bm25 import BM25

import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

SAMPLE = 16  # chunks whose tokens are compared with the BM25 postings at each load


def require(ok: object, what: str) -> None:
    """Raise ValueError(what) unless `ok`."""
    if not ok:
        raise ValueError(what)


def integers(array: Any, name: str, ndim: int = 1) -> np.ndarray:
    """`array` as int64, refused unless it holds integers (or nothing) in `ndim` dimensions."""
    array = np.asarray(array)
    require(array.ndim == ndim and (array.dtype.kind in "iu" or array.size == 0), f"{name} is not integers")
    return array.astype(np.int64)


def check_vocab(vocab: Any) -> list[str]:
    """The BM25 vocabulary, refused unless it is a list of distinct strings."""
    require(isinstance(vocab, list) and all(isinstance(t, str) for t in vocab) and len(set(vocab)) == len(vocab),
             "the vocabulary is not a list of distinct terms")
    return vocab


def check_bm25_arrays(arrays: dict, terms: int, rows: int) -> None:
    """The arrays' shapes, before BM25.from_arrays builds on them."""
    indptr = integers(arrays["indptr"], "indptr")
    postings = len(arrays["post_gaps"] if "post_gaps" in arrays else arrays["post_rows"])
    require(len(indptr) == terms + 1 and indptr[0] == 0 and (np.diff(indptr) >= 0).all() and indptr[-1] == postings,
             "indptr does not match the vocabulary and the postings")
    require(np.asarray(arrays["post_tf"]).shape == (postings,), "post_tf does not match the postings")
    lengths, alive = np.asarray(arrays["lengths"]), np.asarray(arrays["alive"])
    require(lengths.ndim == 1 and lengths.shape == alive.shape and alive.dtype == bool and lengths.dtype.kind == "f"
             and not alive[rows:].any(), "lengths or alive do not have one entry per row")  # rows past: room


def check_bm25(index: BM25, vocab: list[str], chunks: list, tokens_of: Callable[[dict], list[str]]) -> None:
    """A BM25 index read back: postings in range and ascending, live rows as the chunks say, lengths
    the sum of their term frequencies, and a sample of chunks' tokens as their postings say."""
    rows, post_rows, tf = len(chunks), integers(index.post_rows, "post_rows"), np.asarray(index.post_tf, np.float64)
    require(not len(post_rows) or (post_rows.min() >= 0 and post_rows.max() < rows), "a posting's row is out of range")
    starts = np.zeros(len(post_rows), bool)
    starts[index.indptr[:-1][np.diff(index.indptr) > 0]] = True
    require((np.diff(post_rows, prepend=-1)[~starts] > 0).all(), "a term's postings are not in row order")
    require(np.isfinite(tf).all() and (tf >= 1).all() and (tf == np.round(tf)).all(),
             "a term frequency is not a count")
    live = np.zeros(max(rows, len(index.alive)), bool)
    live[:rows] = [c is not None for c in chunks]
    require(np.array_equal(index.alive, live[:len(index.alive)]) and not live[len(index.alive):].any(),
             "the live rows differ from the chunks")
    live = live[:rows]
    counted = np.bincount(post_rows, tf, rows)
    require(np.array_equal(counted[live], np.asarray(index.lengths, np.float64)[:rows][live]),
             "document lengths differ from their term frequencies")
    sample = np.flatnonzero(live)[np.linspace(0, live.sum() - 1, min(SAMPLE, live.sum())).astype(int)]
    at = np.flatnonzero(np.isin(post_rows, sample))
    terms = np.searchsorted(index.indptr, at, side="right") - 1
    held: dict[int, Counter[str]] = {int(row): Counter() for row in sample}
    for row, term, count in zip(post_rows[at].tolist(), terms.tolist(), tf[at].tolist(), strict=True):
        held[row][vocab[term]] = int(count)
    for row in held:
        require(held[row] == Counter(tokens_of(chunks[row])), f"the postings of row {row} differ from its text")


def check_vectors(arrays: dict, dimension: int, allowed: list[int]) -> None:
    """vectors.npz: some of the `allowed` rows (those embedded when it was saved: a knowledge base
    whose vectors are still being filled holds chunks without one), ascending, once each, each
    vector finite and of unit length (or zero)."""
    saved = integers(arrays["rows"], "rows")
    require(bool((np.diff(saved) > 0).all() and np.isin(saved, np.asarray(allowed, np.int64)).all()),
            "the rows of the vectors are not rows of the chunks'")
    rows = saved
    if "vectors" in arrays:  # dense
        vectors = np.asarray(arrays["vectors"])
        require(vectors.shape == (len(rows), dimension) and vectors.dtype.kind == "f", "the vectors' shape is wrong")
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1) if len(rows) else np.zeros(0)
    else:  # sparse: row by row, dims ascending
        indptr, dims = integers(arrays["indptr"], "indptr"), integers(arrays["dims"], "dims")
        weights = np.asarray(arrays["weights"])
        require(len(indptr) == len(rows) + 1 and indptr[0] == 0 and (np.diff(indptr) >= 0).all()
                 and indptr[-1] == len(dims) == len(weights) and weights.dtype.kind == "f",
                 "the vectors' shape is wrong")
        require(not len(dims) or (dims.min() >= 0 and dims.max() < dimension), "a dimension is out of range")
        starts = np.zeros(len(dims), bool)
        starts[indptr[:-1][np.diff(indptr) > 0]] = True
        require((np.diff(dims, prepend=-1)[~starts] > 0).all(), "a row's dimensions are not ascending")
        owner = np.repeat(np.arange(len(rows)), np.diff(indptr))
        norms = np.sqrt(np.bincount(owner, weights.astype(np.float64) ** 2, len(rows)))
    require(np.isfinite(norms).all() and ((norms == 0) | (np.abs(norms - 1) < 0.01)).all(),
             "a vector is not of unit length")


def check_graph(data: Any, rows: int) -> None:
    """graph.json: labels, and edges between labelled names whose rows lie in [0, rows)."""
    require(isinstance(data, dict) and isinstance(data.get("labels"), dict) and isinstance(data.get("edges"), list)
             and isinstance(data.get("relations", []), list), "the graph is not labels and edges")
    labels = data["labels"]
    for edge in data["edges"]:
        require(type(edge) is list and len(edge) == 3 and edge[0] in labels and edge[1] in labels
                 and type(edge[2]) is list and set(map(type, edge[2])) <= {int}
                 and (not edge[2] or 0 <= min(edge[2]) and max(edge[2]) < rows),
                 f"an edge is not two names and rows below {rows}")
    for relation in data.get("relations", []):
        require(isinstance(relation, list) and len(relation) == 3 and isinstance(relation[2], list)
                 and all(isinstance(r, str) for r in relation[2]), "a relation is not two names and labels")


_HNSW_HEADER = struct.Struct("<QQQQQQiIQQQdQ")  # hnswlib 0.8 saveIndex, field by field


def check_hnsw(path: Path, dimension: int, rows: list[int], vectors: np.ndarray) -> None:
    """hnswlib's saved graph, parsed as hnswlib writes it: header, every link in range (a link out
    of range crashes the process at the first search), every live row labelled once, its vectors
    those of vectors.npz."""
    data = np.fromfile(path, np.uint8)
    require(len(data) >= _HNSW_HEADER.size, "the file is shorter than its header")
    (level0_at, capacity, count, per_element, label_at, data_at, max_level, entry, max_m, max_m0, m, _, _) = \
        _HNSW_HEADER.unpack_from(data)  # type: ignore[arg-type]  # a buffer: numpy says so for Python 3.12+ only
    links0 = 4 + 4 * max_m0
    require(level0_at == 0 and 0 < m == max_m and max_m0 == 2 * m <= 4096 and data_at == links0
             and label_at == links0 + 4 * dimension and per_element == label_at + 8 and len(rows) <= count <= capacity
             and (0 <= max_level < 64 and entry < count or count == 0 and max_level == -1),
             "the header does not match the vectors")  # an empty graph has no level and no entry point
    end = _HNSW_HEADER.size + count * per_element
    require(len(data) >= end, "the file is shorter than its elements")
    level0 = data[_HNSW_HEADER.size:end].reshape(count, per_element)
    _links_in_range(level0[:, :links0].view(np.uint32), count, max_m0)
    labels = level0[:, label_at:].copy().view(np.int64)[:, 0]
    deleted = (level0[:, 2] & 1).astype(bool)
    require(np.array_equal(np.sort(labels[~deleted]), np.asarray(rows, np.int64))
             and len(np.unique(labels)) == count, "the labels differ from the live rows")
    stored = level0[~deleted][:, data_at:label_at].copy().view(np.float32)
    order = np.argsort(labels[~deleted])
    expected = np.asarray(vectors, np.float32)
    expected = expected / (np.linalg.norm(expected, axis=1, keepdims=True) + 1e-30)
    require(np.allclose(stored[order], expected, atol=1e-5), "the graph's vectors differ from vectors.npz")
    levels = _upper_levels(data[end:], count, max_m, max_level)
    require(count == 0 or levels[entry] == max_level, "the entry point is not on the top level")


def _links_in_range(lists: np.ndarray, count: int, most: int, levels: np.ndarray | None = None,
                    level: int = 0) -> None:
    """Link lists (a count, then `most` slots): counts at most `most`, links to elements (on this level)."""
    counts = lists[:, 0] & 0xFFFF
    require((counts <= most).all(), "a node has more links than the graph allows")
    used = np.arange(most)[None, :] < counts[:, None]
    targets = lists[:, 1:][used].astype(np.int64)
    require((targets < count).all(), "a link points past the last node")
    require(levels is None or (levels[targets] >= level).all(), "a link points at a node below its level")


def _upper_levels(data: np.ndarray, count: int, max_m: int, max_level: int) -> np.ndarray:
    """Each element's level, from the upper levels' link lists (a size, then that many bytes each),
    whose links are checked once every level is known."""
    require(len(data) % 4 == 0, "the upper levels are cut off")
    words, size = data.view(np.uint32), 4 * (max_m + 1)
    levels, blocks, at = np.zeros(count, np.int64), [], 0
    for element in range(count):
        require(at < len(words), "the upper levels are cut off")
        length = int(words[at])
        require(length % size == 0 and length // size <= max_level and at + 1 + length // 4 <= len(words),
                 "an element's upper levels are damaged")
        levels[element] = length // size
        if length:
            blocks.append(words[at + 1:at + 1 + length // 4].reshape(-1, max_m + 1))
        at += 1 + length // 4
    require(at == len(words), "the file is longer than its elements")
    for block in blocks:
        for level, lists in enumerate(block, 1):
            _links_in_range(lists[None, :], count, max_m, levels, level)
    return levels
