"""Okapi BM25 over an inverted index held in numpy arrays.

score(q, d) = sum over terms t of q:  idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

The ranking function is Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond" (2009), eq. 3.13 with the Robertson/Sparck Jones idf; the `1 +` inside the log is Lucene's
guard against negative idf for terms in more than half the documents.

Postings live in a compressed base (CSR: one run of rows per term, rows ascending) plus a small
tail of recent additions that is merged into the base when it grows, so adding one document does
not rebuild the index. Deleted rows are masked at once and their postings dropped at the next merge.

Queries read impact scores: each posting's whole term score, idf included, computed for the
index as it is (for all postings at a merge, else per term at its first use) and thrown away by
any add or delete, since N, df and the average length change. `top` prunes with MaxScore (Turtle
& Flood 1995): terms are taken highest impact (rarest) first. Once the most a row could still
gain from the terms left is below a lower bound of the k-th best score (the k-th best score so
far), only rows already reached whose score so far plus that gain reaches the bound remain
candidates, and the terms left are looked up for them alone. The ranking is exactly the
exhaustive one (a property test checks it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._csr import group
from ._filters import fit_mask

_TAIL_LIMIT = 50_000  # tail postings kept unmerged; a query scans the tail once per term
_ADD_SLICE = 8_192    # rows turned into postings at a time
_IMPACT_TERMS = 4_096  # terms whose impacts are computed at a time


def bm25_idf(n: int, df: np.ndarray | int) -> np.ndarray:
    """idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)) for N rows, in float64: every backend's idf."""
    df = np.asarray(df, np.float64)
    return np.log1p((n - df + 0.5) / (df + 0.5))


def _union(parts: list[np.ndarray], size: int) -> np.ndarray:
    """The rows in any of the ascending row arrays, ascending."""
    if len(parts) == 1:
        return parts[0]
    if sum(map(len, parts)) * 16 < size:
        return np.unique(np.concatenate([np.zeros(0, np.int32), *parts]))
    marked = np.zeros(size, bool)
    for part in parts:
        marked[part] = True
    return np.flatnonzero(marked)


@dataclass(frozen=True)
class Batch:
    """Postings of a batch of rows, made before they join the index: for each (term, row) pair,
    term-major, the term's id (in the index's vocabulary, or among the add's new terms after it), the
    row's index in the batch and the term frequency."""

    term_ids: np.ndarray
    rows: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray  # tokens per row


def batch_postings(token_lists: list[list[str]], vocab: dict[str, int], fresh: dict[str, int]) -> Batch:
    """A batch's postings. `vocab` (the index's) is only read, so this runs outside the index's lock
    while no other add runs; terms it lacks get ids after it in `fresh`, which add_batches adds to it.
    No term string is kept per batch: the vocabulary holds each once."""
    flat = [token for tokens in token_lists for token in tokens]
    local = {term: i for i, term in enumerate(dict.fromkeys(flat))}
    ids_of = np.fromiter((vocab[term] if term in vocab else fresh.setdefault(term, len(vocab) + len(fresh))
                          for term in local), np.int64, len(local))
    ids = np.fromiter(map(local.__getitem__, flat), np.int64, len(flat))
    lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists))
    span = len(token_lists) + 1
    pairs, tfs = np.unique(ids * span + np.repeat(np.arange(len(token_lists)), lengths), return_counts=True)
    return Batch(ids_of[pairs // span].astype(np.int32), (pairs % span).astype(np.int32), tfs.astype(np.float32),
                 lengths.astype(np.float32))


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
        self._impacts: dict[int, tuple] = {}  # term -> rows, impacts, max, term id
        self._orders: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # term -> _by_impact
        self._base_impacts: np.ndarray | None = None  # every base posting's impact, while the index is unchanged

    @property
    def size(self) -> int:
        """Number of live (not deleted) rows."""
        return int(self.alive.sum())

    def add(self, rows: list[int], token_lists: list[list[str]]) -> None:
        """Index each row's tokens; a row must be new (delete it first to replace it)."""
        fresh: dict[str, int] = {}
        self.add_batches(rows, [batch_postings(token_lists[i:i + _ADD_SLICE], self.vocab, fresh)
                                for i in range(0, len(rows), _ADD_SLICE)], fresh)  # a slice at a time

    def add_batches(self, rows: list[int], batches: list[Batch], fresh: dict[str, int]) -> None:
        """Index batches made by batch_postings against this vocabulary (unchanged since), in order,
        as the given rows (one per batch row), with the new terms they gave ids to. The batches are
        used up: their arrays are rewritten in place."""
        if any(i != len(self.vocab) + n for n, i in enumerate(fresh.values())):
            raise ValueError("the vocabulary changed since these batches were made")
        self.vocab.update(fresh)
        rows_of = np.asarray(rows, np.int64)
        parts, offset = [], 0
        for batch in batches:
            batch.rows[:] = rows_of[offset + batch.rows]  # in place: the batch's arrays become the index's
            parts.append((batch.term_ids, batch.rows, batch.tfs))
            offset += len(batch.lengths)
        span = max(rows, default=0) + 1
        if rows and span > len(self.alive):  # grow by half at least, so many small adds stay cheap
            grow = max(span, len(self.alive) * 3 // 2) - len(self.alive)
            self.lengths = np.concatenate([self.lengths, np.zeros(grow, np.float32)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
        self.lengths[rows_of] = np.concatenate([np.zeros(0, np.float32)] + [b.lengths for b in batches])
        self.alive[rows_of] = True
        self._changed()
        if not len(self.post_rows) and not len(self._tail[0]) and bool(np.all(np.diff(rows_of) > 0)):
            self.indptr, self.post_rows, self.post_tf = group(parts, len(self.vocab), (np.int32, np.float32))
            self._fill_impacts()
            return
        terms, post_rows, tfs = (np.concatenate([np.zeros(0, t)] + [p[n] for p in parts])
                                 for n, t in enumerate((np.int32, np.int32, np.float32)))
        tail_terms, tail_rows, tail_tf = self._tail
        self._tail = (np.concatenate([tail_terms, terms]), np.concatenate([tail_rows, post_rows]),
                      np.concatenate([tail_tf, tfs]))
        if len(self._tail[0]) > _TAIL_LIMIT:
            self.merge()

    def delete(self, rows: list[int]) -> None:
        """Remove rows from every ranking at once."""
        self.alive[np.asarray(rows, np.int64)] = False
        self._changed()

    def _changed(self) -> None:
        """N, df and the average length may have moved: every impact is recomputed when next needed."""
        self._impacts, self._orders, self._base_impacts = {}, {}, None

    def merge(self) -> None:
        """Fold the tail into the base, drop postings of deleted rows and compute every impact."""
        self.indptr, self.post_rows, self.post_tf = self._merged()
        self._tail = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))
        self._fill_impacts()

    def _fill_impacts(self) -> None:
        """Every base posting's impact at once (the tail must be empty and every base row live)."""
        self._changed()
        df = np.diff(self.indptr)
        idf = self._df_idf(df)
        impacts = np.empty(len(self.post_rows), np.float32)
        for start in range(0, len(self.indptr) - 1, _IMPACT_TERMS):  # a slice of terms at a time: bounded scratch
            end = min(start + _IMPACT_TERMS, len(self.indptr) - 1)
            at = slice(self.indptr[start], self.indptr[end])
            impacts[at] = self._impact(np.repeat(idf[start:end], df[start:end]), self.post_rows[at], self.post_tf[at])
        self._base_impacts = impacts

    def _merged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        base_terms = np.repeat(np.arange(len(self.indptr) - 1, dtype=np.int32), np.diff(self.indptr))
        terms = np.concatenate([base_terms, self._tail[0]])
        rows = np.concatenate([self.post_rows, self._tail[1]])
        tfs = np.concatenate([self.post_tf, self._tail[2]])
        keep = self.alive[rows]
        terms, rows, tfs = terms[keep], rows[keep], tfs[keep]
        order = np.argsort(terms, kind="stable")
        step = np.diff(rows[order])
        if (step[np.diff(terms[order]) == 0] <= 0).any():  # rows added out of order: sort them within terms
            order = np.lexsort((rows, terms))
        indptr = np.zeros(len(self.vocab) + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocab)), out=indptr[1:])
        return indptr, rows[order], tfs[order]

    def _postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A term's live postings (rows ascending, with their term frequencies)."""
        rows, tfs = self.post_rows[:0], self.post_tf[:0]
        if term_id < len(self.indptr) - 1:
            start, end = self.indptr[term_id], self.indptr[term_id + 1]
            rows, tfs = self.post_rows[start:end], self.post_tf[start:end]
        in_tail = self._tail[0] == term_id
        if in_tail.any():
            rows = np.concatenate([rows, self._tail[1][in_tail]])
            tfs = np.concatenate([tfs, self._tail[2][in_tail]])
            order = np.argsort(rows, kind="stable")
            rows, tfs = rows[order], tfs[order]
        keep = self.alive[rows]
        return rows[keep], tfs[keep]

    def _df_idf(self, df: np.ndarray | int) -> np.ndarray:
        return bm25_idf(self.size, df)

    def _impact(self, idf: np.ndarray, rows: np.ndarray, tfs: np.ndarray) -> np.ndarray:
        """Each posting's term score: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))."""
        avgdl = max(float(self.lengths[self.alive].mean()), 1e-9) if self.size else 1.0
        norm = self.k1 * (1 - self.b + self.b * self.lengths[rows] / avgdl)
        return (idf * tfs * (self.k1 + 1) / (tfs + norm)).astype(np.float32)

    def _term(self, term: str) -> tuple[np.ndarray, np.ndarray, float] | None:
        """A known term's live rows (ascending), their impacts and the largest; None if no live row holds it."""
        term_id = self.vocab.get(term)
        if term_id is None:
            return None
        found = self._impacts.get(term_id)
        if found is None:
            base = self._base_impacts  # read once: a merge may replace it meanwhile
            if base is not None and term_id < len(self.indptr) - 1:
                start, end = self.indptr[term_id], self.indptr[term_id + 1]
                rows, impacts = self.post_rows[start:end], base[start:end]
            else:
                rows, tfs = self._postings(term_id)
                impacts = self._impact(self._df_idf(len(rows)), rows, tfs)
            found = (rows, impacts, float(impacts.max()) if len(rows) else 0.0, term_id)
            self._impacts[term_id] = found
        return found if len(found[0]) else None

    def _by_impact(self, term: tuple) -> tuple[np.ndarray, np.ndarray]:
        """A term's posting positions, highest impact first, and those impacts (kept until the index changes)."""
        found = self._orders.get(term[3])
        if found is None:
            order = np.argsort(-term[1], kind="stable")
            found = self._orders[term[3]] = (order, term[1][order])
        return found

    def _terms(self, tokens: list[str]) -> list[tuple]:
        """The query's distinct known terms, highest impact first (the order both rankings add them in)."""
        terms = [t for t in map(self._term, dict.fromkeys(tokens)) if t is not None]
        return sorted(terms, key=lambda t: (-t[2], len(t[0])))

    def idf(self, tokens: list[str]) -> dict[str, float]:
        """Each distinct known term's idf (0 for terms no live row holds)."""
        weights = {}
        for term in dict.fromkeys(tokens):
            if term in self.vocab:
                found = self._term(term)
                weights[term] = float(self._df_idf(len(found[0]))) if found else 0.0
        return weights

    def idf_within(self, tokens: list[str], allowed: np.ndarray) -> dict[str, float]:
        """Each distinct term's idf among the rows `allowed` keeps (a mask by row): N and df counted
        there only; a term none of those rows holds is left out, as a term no row holds is."""
        allowed = allowed[:len(self.alive)] & self.alive[:len(allowed)]
        n, weights = int(allowed.sum()), {}
        for term in dict.fromkeys(tokens):
            found = self._term(term) if term in self.vocab else None
            df = int(allowed[found[0][found[0] < len(allowed)]].sum()) if found else 0
            if df:
                weights[term] = float(bm25_idf(n, df))
        return weights

    def scores(self, tokens: list[str]) -> np.ndarray:
        """BM25 score of every row for the query tokens (each distinct term counted once)."""
        out = np.zeros(len(self.alive), np.float32)
        for rows, impacts, *_ in self._terms(tokens):
            out[rows] += impacts
        return out

    def top(self, tokens: list[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best rows with a score above zero, best first (ties: lower row first), among
        `allowed` rows if given (a mask of any length: rows past its end are not allowed)."""
        terms = self._terms(tokens)
        allowed = None if allowed is None else fit_mask(allowed, len(self.alive))
        out = np.zeros(len(self.alive), np.float32)
        candidates, seen, kth = None, [], 0.0  # candidates: the only rows that can still make the top k, once known
        first = self._first(terms, k, out) if allowed is None else None
        if first is not None:
            candidates, kth = first
        for i, (rows, impacts, *_) in enumerate(terms):
            gain = sum(t[2] for t in terms[i + 1:])  # the most a row can still gain from the terms left
            if i == 0 and first is not None:
                continue
            if candidates is None or 8 * len(candidates) > len(rows):  # adding every posting is cheaper
                out[rows] += impacts
                scored = rows if allowed is None else rows[allowed[rows]]
                if len(scored) >= k:  # any k rows' scores so far bound the k-th best final score from below
                    kth = max(kth, float(np.partition(out[scored], len(scored) - k)[len(scored) - k]) * (1 - 1e-6))
            else:
                at = np.minimum(np.searchsorted(rows, candidates), len(rows) - 1)
                held = rows[at] == candidates
                out[candidates[held]] += impacts[at[held]]
            if candidates is None:
                seen.append(rows)
                if 0 < kth and gain < kth:  # a row not reached yet can gain at most `gain`: it cannot make it
                    candidates = self._allowed(_union([r[out[r] + gain >= kth] for r in seen], len(out)), allowed)
            else:
                candidates = candidates[out[candidates] + gain >= kth]
        if candidates is None:  # fewer than k rows reached
            candidates = self._allowed(_union(seen, len(out)), allowed)
        found = candidates[out[candidates] > 0]
        if len(found) > k:  # the k best and every row tied with the k-th, so that ties go to the lower row
            found = found[out[found] >= np.partition(out[found], len(found) - k)[len(found) - k]]
        found = found[np.lexsort((found, -out[found]))][:k]
        return [(int(row), float(out[row])) for row in found]

    def _first(self, terms: list[tuple], k: int, out: np.ndarray) -> tuple[np.ndarray, float] | None:
        """When the highest-impact term has many postings: its k-th best impact bounds the k-th best
        score; if the other terms together cannot lift a row outside its postings to that bound, the
        candidates are its postings whose impact plus that gain reaches it, read from its postings in
        impact order, with no pass over the rest. (candidates, bound), their scores put in `out`; or None."""
        if not terms or len(terms[0][0]) <= 8 * k:
            return None
        rows, impacts = terms[0][0], terms[0][1]
        gain = sum(t[2] for t in terms[1:])
        order, ranked = self._by_impact(terms[0])
        kth = float(ranked[k - 1]) * (1 - 1e-6)
        if not 0 < kth or gain >= kth:
            return None
        count = int(np.searchsorted(-ranked, -(kth - gain), side="right"))  # impacts >= kth - gain
        chosen = np.sort(order[:count])
        out[rows[chosen]] = impacts[chosen]
        return rows[chosen], kth

    @staticmethod
    def _allowed(rows: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
        return rows if allowed is None else rows[allowed[rows]]

    def to_arrays(self) -> tuple[dict[str, np.ndarray], list[str]]:
        """The index as arrays plus its vocabulary, for saving; the index itself is not changed. Rows
        are written as the gap to the term's row before (the first as itself), term frequencies as
        16-bit counts where they fit: both compress several times over."""
        merged = not len(self._tail[0]) and self._base_impacts is not None  # as merge() left it: no copy
        indptr, post_rows, post_tf = (self.indptr, self.post_rows, self.post_tf) if merged else self._merged()
        gaps = np.diff(post_rows, prepend=np.int32(0)).astype(np.int32)
        starts = indptr[:-1][np.diff(indptr) > 0]
        gaps[starts] = post_rows[starts]
        counts = post_tf.astype(np.uint16)
        arrays = {"indptr": indptr, "post_gaps": gaps,
                  "post_tf": counts if np.array_equal(counts, post_tf) else post_tf,
                  "lengths": self.lengths, "alive": self.alive}
        return arrays, sorted(self.vocab, key=self.vocab.__getitem__)

    @classmethod
    def from_arrays(cls, arrays: dict, vocab: list[str], k1: float, b: float) -> BM25:
        """Rebuild an index saved by to_arrays."""
        index = cls(k1, b)
        index.vocab = {term: i for i, term in enumerate(vocab)}
        for name in ("indptr", "lengths", "alive"):
            setattr(index, name, np.asarray(arrays[name]))
        index.post_tf = np.asarray(arrays["post_tf"], np.float32)
        if "post_gaps" in arrays:  # format 4: each term's rows as gaps
            total = np.cumsum(arrays["post_gaps"], dtype=np.int64)
            starts = index.indptr[:-1]
            before = (total - arrays["post_gaps"])[starts[starts < len(total)]]
            index.post_rows = (total - np.repeat(before, np.diff(index.indptr)[starts < len(total)])).astype(np.int32)
        else:
            index.post_rows = np.asarray(arrays["post_rows"], np.int32)
        if len(index.indptr) != len(vocab) + 1 or len(index.lengths) != len(index.alive):
            raise ValueError("BM25 arrays do not match the vocabulary")
        if index.alive[index.post_rows].all():  # as saved: deleted rows' postings were dropped
            index._fill_impacts()
        return index
