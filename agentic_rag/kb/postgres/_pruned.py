"""Top k by a sum over posting lists, pruned in SQL: BM25 (a list per query term) and the hashing
embedder's sparse vectors (a list per non-zero dimension of the query) in PostgreSQL.

No-random-access threshold algorithm (Fagin, Lotem & Naor, "Optimal aggregation algorithms for
middleware", 2003), in rounds: each round reads the first `block` postings of every list in
bound order (an index on (list, bound) serves it), in one statement. A posting read gives its
row's exact contribution from that list; a row not yet read in a list can gain at most that
list's last bound from it (nothing, once the list is read to its end), and a row read in no list
at most the sum of those. When that sum is below a lower bound of the k-th best score, no unread
row can make the top k: the rows read whose most-possible score reaches the bound are the only
candidates, and their exact scores (the exhaustive sum's own SQL, for those rows alone) give the
ranking, the same as the exhaustive one. Otherwise the next round reads four times deeper; past
`deepest` the caller sums every posting instead.

Bounds may be loose but never low: BM25's are kept in the index for the average length it was
built with and scaled at query time (_sql.bound_sql), so writes never make a ranking wrong.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._sql import Connection

FIRST_BLOCK = 64
DEEPEST = 16_384  # postings read from one list, at most; deeper, the exhaustive sum is as cheap
# the hashing embedder's weights carry no idf and vary little from row to row, so its bounds fall
# slowly: at 100,000 chunks, reading to 16,384 took twice the exhaustive sum's time (docs/benchmarks.md)
SPARSE_DEEPEST = 1_024
SLACK = 1e-5      # bounds and exact scores are summed in different orders and precisions: _slack


def pruned_top(db: Connection, lists: list[tuple[str, list]], k: int, exact: Callable[[list[int]], dict[int, float]],
               nonnegative: bool, deepest: int = DEEPEST) -> list[tuple[int, float]] | None:
    """The k rows of best positive score (ties: lower row first), or None past `deepest`. Each list
    is (SQL, arguments): a SELECT of (row, contribution, bound) in descending bound order, which
    takes its LIMIT as one more argument; a bound is the most any posting after it contributes.
    `exact(rows)` scores rows exactly. With `nonnegative`, contributions are never negative, so the
    sum of those read is a lower bound too."""
    block, scored = min(max(FIRST_BLOCK, 4 * k), deepest), {}
    while lists:
        which, rows, gained, bounds = _read(db, lists, block)
        frontier = np.zeros(len(lists))
        for i in range(len(lists)):
            in_list = bounds[which == i]
            if len(in_list) == block:  # not read to its end: what comes after gives at most the last bound
                frontier[i] = max(0.0, float(in_list.min()))
        unique, at = np.unique(rows, return_inverse=True)
        known = np.bincount(at, gained, len(unique))
        most = known + frontier.sum() - np.bincount(at, frontier[which], len(unique))  # lists not read it in
        order = np.argsort(-most, kind="stable")
        unique, most = unique[order], most[order]  # the most-possible score, descending
        scored.update(exact([int(r) for r in unique[:k] if int(r) not in scored]))  # a bound of the k-th best
        kth = max(_kth(np.fromiter(scored.values(), float, len(scored)), k), _kth(known, k) if nonnegative else 0.0)
        if not frontier.any() or (kth > 0 and frontier.sum() < kth - _slack(kth)):
            return _ranked(unique, most, scored, kth, k, exact, nonnegative)
        if block >= deepest:
            return None
        block = min(4 * block, deepest)
    return None


def _ranked(rows: np.ndarray, most: np.ndarray, scored: dict[int, float], kth: float, k: int,
            exact: Callable[[list[int]], dict[int, float]], nonnegative: bool) -> list[tuple[int, float]] | None:
    """The k best of the candidate rows (most-possible score `most`, descending), scored exactly a
    chunk at a time, best-possible first, until no row left can reach the k-th best score found."""
    at, step = 0, max(2 * k, 128)
    while at < len(rows) and most[at] >= kth - _slack(kth):
        chunk = [int(r) for r in rows[at:at + step] if int(r) not in scored]
        scored.update(exact(chunk))
        kth, at = max(kth, _kth(np.fromiter(scored.values(), float, len(scored)), k)), at + step
    ranked = sorted(((row, score) for row, score in scored.items() if score > 0), key=lambda item: (-item[1], item[0]))
    return ranked[:k] if nonnegative or len(ranked) >= k else None  # fewer: rows at 0 and below rank next


def _read(db: Connection, lists: list[tuple[str, list]], block: int) -> tuple[np.ndarray, ...]:
    """The first `block` postings of every list, in one statement: (list index, row, contribution, bound)."""
    sql = " UNION ALL ".join(f"(SELECT {i}, r.* FROM ({query} LIMIT %s) r)" for i, (query, _) in enumerate(lists))
    with db.cursor(binary=True) as cursor:  # numbers in binary: parsing text is most of the cost
        found = cursor.execute(sql, [a for _, arguments in lists for a in (*arguments, block)]).fetchall()
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    which, rows, gained, bounds = zip(*found, strict=True)
    return (np.asarray(which, np.int64), np.asarray(rows, np.int64), np.asarray(gained, float),
            np.asarray(bounds, float))


def _slack(score: float) -> float:
    """How far a bound may fall short of an exact score of this size: they are summed in other orders
    and precisions (exact scores are rounded to float4, a step of 6e-8 of the score)."""
    return SLACK * max(1.0, abs(score))


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest positive value, or 0 when fewer than k are positive."""
    positive = values[values > 0]
    return float(np.partition(positive, len(positive) - k)[len(positive) - k]) if len(positive) >= k else 0.0
