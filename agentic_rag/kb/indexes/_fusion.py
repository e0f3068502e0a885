"""Fusing the rankings of several retrievers into one.

Reciprocal-rank fusion (Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR 2009; k = 60 there):

    RRF(d) = sum over retrievers r of  w_r / (k + rank_r(d)),  ranks starting at 1

Score fusion (a convex combination of min-max normalised scores, as in Bruch, Gai & Ingber,
"An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023):

    score(d) = sum over retrievers r of  w_r * (s_r(d) - min_r) / (max_r - min_r)

where min_r and max_r are taken over r's candidate list and a document r did not return counts 0
for r. Unlike RRF it keeps how far apart the scores are, so a retriever that is sure leads.
"""
from __future__ import annotations

FUSIONS = ("rrf", "score")


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
    return _best_first(scores, ranks)


def score_fusion(results: dict[str, list[tuple[int, float]]],
                 weights: dict[str, float]) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse (id, score) lists, each best first, by weighted min-max normalised score: (id, fused
    score, {retriever: 1-based rank}) best first, ties by id. A list whose scores are all equal
    gives each of its ids 1."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, found in results.items():
        weight = weights.get(name, 1.0)
        values = [score for _, score in found]
        low, span = min(values, default=0.0), max(values, default=0.0) - min(values, default=0.0)
        for rank, (item, score) in enumerate(found, 1):
            scores[item] = scores.get(item, 0.0) + weight * ((score - low) / span if span > 0 else 1.0)
            ranks.setdefault(item, {})[name] = rank
    return _best_first(scores, ranks)


def _best_first(scores: dict[int, float], ranks: dict[int, dict[str, int]]) -> list[tuple[int, float, dict[str, int]]]:
    order = sorted(scores, key=lambda item: (-scores[item], item))
    return [(item, scores[item], ranks[item]) for item in order]
