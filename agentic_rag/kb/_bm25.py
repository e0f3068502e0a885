"""Okapi BM25 over an inverted index held in numpy arrays.

score(q, d) = sum over terms t of q:  idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

The ranking function is Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond" (2009), eq. 3.13 with the Robertson/Sparck Jones idf; the `1 +` inside the log is Lucene's
guard against negative idf for terms in more than half the documents.

Postings live in a compressed base (CSR: one run of rows per term) plus a small tail of recent
additions that is merged into the base when it grows, so adding one document does not rebuild
the index. Deleted rows are masked at once and their postings dropped at the next merge.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ._filters import fit_mask

_TAIL_LIMIT = 50_000  # tail postings kept unmerged; a query scans the tail once per term


class BM25:
    """An incremental BM25 index; rows are integer ids chosen by the caller."""

    def __init__(self, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.vocab: dict[str, int] = {}
        self.lengths = np.zeros(0, np.float32)
        self.alive = np.zeros(0, bool)
        self.indptr = np.zeros(1, np.int64)
        self.post_rows = np.zeros(0, np.int32)
        self.post_tf = np.zeros(0, np.float32)
        self._tail = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))

    @property
    def size(self) -> int:
        """Number of live (not deleted) rows."""
        return int(self.alive.sum())

    def add(self, rows: list[int], token_lists: list[list[str]]) -> None:
        """Index each row's tokens; a row must be new (delete it first to replace it)."""
        terms, post_rows, tfs = [], [], []
        for row, tokens in zip(rows, token_lists, strict=True):
            for term, tf in Counter(tokens).items():
                terms.append(self.vocab.setdefault(term, len(self.vocab)))
                post_rows.append(row)
                tfs.append(tf)
        needed = max(rows, default=-1) + 1
        if needed > len(self.alive):  # grow by half at least, so many small adds stay cheap
            grow = max(needed, len(self.alive) * 3 // 2) - len(self.alive)
            self.lengths = np.concatenate([self.lengths, np.zeros(grow, np.float32)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
        self.lengths[rows] = [len(tokens) for tokens in token_lists]
        self.alive[rows] = True
        tail_terms, tail_rows, tail_tf = self._tail
        self._tail = (np.concatenate([tail_terms, np.asarray(terms, np.int32)]),
                      np.concatenate([tail_rows, np.asarray(post_rows, np.int32)]),
                      np.concatenate([tail_tf, np.asarray(tfs, np.float32)]))
        if len(self._tail[0]) > _TAIL_LIMIT:
            self.merge()

    def delete(self, rows: list[int]) -> None:
        """Remove rows from every ranking at once."""
        self.alive[np.asarray(rows, np.int64)] = False

    def merge(self) -> None:
        """Fold the tail into the base and drop postings of deleted rows."""
        self.indptr, self.post_rows, self.post_tf = self._merged()
        self._tail = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))

    def _merged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        base_terms = np.repeat(np.arange(len(self.indptr) - 1, dtype=np.int32), np.diff(self.indptr))
        terms = np.concatenate([base_terms, self._tail[0]])
        rows = np.concatenate([self.post_rows, self._tail[1]])
        tfs = np.concatenate([self.post_tf, self._tail[2]])
        keep = self.alive[rows]
        terms, rows, tfs = terms[keep], rows[keep], tfs[keep]
        order = np.argsort(terms, kind="stable")
        indptr = np.zeros(len(self.vocab) + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocab)), out=indptr[1:])
        return indptr, rows[order], tfs[order]

    def _postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        rows, tfs = self.post_rows[:0], self.post_tf[:0]
        if term_id < len(self.indptr) - 1:
            start, end = self.indptr[term_id], self.indptr[term_id + 1]
            rows, tfs = self.post_rows[start:end], self.post_tf[start:end]
        in_tail = self._tail[0] == term_id
        if in_tail.any():
            rows = np.concatenate([rows, self._tail[1][in_tail]])
            tfs = np.concatenate([tfs, self._tail[2][in_tail]])
        keep = self.alive[rows]
        return rows[keep], tfs[keep]

    def _idf(self, df: int, n: int) -> float:
        return float(np.log1p((n - df + 0.5) / (df + 0.5)))

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """Each distinct known term's idf (0 for terms no live row holds)."""
        n = self.size
        weights = {}
        for term in dict.fromkeys(tokens):
            if term in self.vocab:
                df = len(self._postings(self.vocab[term])[0])
                weights[term] = self._idf(df, n) if df else 0.0
        return weights

    def scores(self, tokens: list[str]) -> np.ndarray:
        """BM25 score of every row for the query tokens (each distinct term counted once)."""
        out = np.zeros(len(self.alive), np.float32)
        n = self.size
        if n == 0:
            return out
        avgdl = max(float(self.lengths[self.alive].mean()), 1e-9)
        for term in dict.fromkeys(tokens):
            term_id = self.vocab.get(term)
            if term_id is None:
                continue
            rows, tfs = self._postings(term_id)
            if len(rows) == 0:
                continue
            idf = self._idf(len(rows), n)
            norm = self.k1 * (1 - self.b + self.b * self.lengths[rows] / avgdl)
            out[rows] += idf * tfs * (self.k1 + 1) / (tfs + norm)
        return out

    def top(self, tokens: list[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best rows with a score above zero, best first, among `allowed` rows if given (a
        mask of any length: rows past its end are not allowed)."""
        scores = self.scores(tokens)
        if allowed is not None:
            scores[~fit_mask(allowed, len(scores))] = 0
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > k:
            candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        candidates = candidates[np.lexsort((candidates, -scores[candidates]))]
        return [(int(row), float(scores[row])) for row in candidates]

    def to_arrays(self) -> tuple[dict[str, np.ndarray], list[str]]:
        """The index as arrays plus its vocabulary, for saving; the index itself is not changed."""
        indptr, post_rows, post_tf = self._merged()
        arrays = {"indptr": indptr, "post_rows": post_rows, "post_tf": post_tf,
                  "lengths": self.lengths, "alive": self.alive}
        return arrays, sorted(self.vocab, key=self.vocab.__getitem__)

    @classmethod
    def from_arrays(cls, arrays: dict, vocab: list[str], k1: float, b: float) -> BM25:
        """Rebuild an index saved by to_arrays."""
        index = cls(k1, b)
        index.vocab = {term: i for i, term in enumerate(vocab)}
        for name in ("indptr", "post_rows", "post_tf", "lengths", "alive"):
            setattr(index, name, np.asarray(arrays[name]))
        if len(index.indptr) != len(vocab) + 1 or len(index.lengths) != len(index.alive):
            raise ValueError("BM25 arrays do not match the vocabulary")
        return index
