"""Retrieval metrics at corpus-entry level: an entry counts when any of its chunks is retrieved."""
from __future__ import annotations

import numpy as np


def entries(doc_ids: list[str]) -> list[str]:
    """Retrieved corpus entries in order of first appearance."""
    return list(dict.fromkeys(doc_ids))


def recall_at_k(doc_ids: list[str], relevant: list[str], k: int) -> float:
    """Share of relevant entries among the entries of the first k hits."""
    found = set(doc_ids[:k]) & set(relevant)
    return len(found) / len(set(relevant))


def all_relevant_at_k(doc_ids: list[str], relevant: list[str], k: int) -> float:
    """1.0 when every relevant entry is among the first k hits (multi-hop needs them all)."""
    return float(set(relevant) <= set(doc_ids[:k]))


def mrr_at_k(doc_ids: list[str], relevant: list[str], k: int) -> float:
    """Reciprocal rank of the first hit from a relevant entry within the first k hits
    (Voorhees, "The TREC-8 Question Answering Track Report", 1999)."""
    wanted = set(relevant)
    for rank, doc_id in enumerate(doc_ids[:k], 1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def bootstrap_ci(values: list[float], samples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean (Efron & Tibshirani 1993), fixed seed."""
    data = np.asarray(values, float)
    if len(data) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(samples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (linear interpolation); NaN for no values."""
    return float(np.percentile(values, q)) if values else float("nan")


def precision_at_k(doc_ids: list[str], relevant: list[str], k: int) -> float:
    """Share of the first k retrieved entries that are relevant (fewer than k retrieved count as misses)."""
    return len(set(entries(doc_ids)[:k]) & set(relevant)) / k


def ndcg_at_k(doc_ids: list[str], relevant: list[str], k: int) -> float:
    """Binary-relevance NDCG over the first k entries (Järvelin & Kekäläinen, 2002):
    DCG = sum of 1 / log2(rank + 1) over relevant ranks, divided by the ideal DCG."""
    wanted = set(relevant)
    dcg = sum(1 / np.log2(rank + 1) for rank, d in enumerate(entries(doc_ids)[:k], 1) if d in wanted)
    ideal = sum(1 / np.log2(rank + 1) for rank in range(1, min(k, len(wanted)) + 1))
    return float(dcg / ideal) if ideal else 0.0
