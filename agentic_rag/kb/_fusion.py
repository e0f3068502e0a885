"""Reciprocal-rank fusion of several rankings.

RRF(d) = sum over retrievers r of  w_r / (k + rank_r(d)),  ranks starting at 1
(Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
Rank Learning Methods", SIGIR 2009; k = 60 there). A weight per retriever lets one count more.
"""
from __future__ import annotations


def reciprocal_rank_fusion(rankings: dict[str, list[int]], weights: dict[str, float],
                           k: int = 60) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse ranked lists of ids: (id, score, {retriever: 1-based rank}) best first, ties by id."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, ranking in rankings.items():
        weight = weights.get(name, 1.0)
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            ranks.setdefault(item, {})[name] = rank
    order = sorted(scores, key=lambda item: (-scores[item], item))
    return [(item, scores[item], ranks[item]) for item in order]
