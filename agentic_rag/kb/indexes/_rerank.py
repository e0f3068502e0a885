"""Rerankers reorder fused hits against the query; the offline one is lexical."""
from __future__ import annotations

from typing import Protocol

from ...text import split_sentences, tokenize
from .._hit import Hit


class Reranker(Protocol):
    """Reorders hits; `term_weights` gives each query term's weight (BM25 idf) for those that use it."""

    name: str

    def rerank(self, query: str, hits: list[Hit], term_weights: dict[str, float]) -> list[Hit]:
        """Return the same hits, best first."""


class LexicalReranker:
    """Coverage and proximity of the query's terms within a passage.

    coverage(span) = idf-weighted share of the query's terms found in the span. A hit's lexical
    score averages its whole-passage coverage and its best two-sentence window (terms close
    together count more); the fused score, scaled to [0, 1], breaks near-ties.
    """

    name = "lexical"

    def __init__(self, fused_weight: float = 0.5):
        self.fused_weight = fused_weight

    def rerank(self, query: str, hits: list[Hit], term_weights: dict[str, float]) -> list[Hit]:
        """Sort hits by lexical score plus the weighted fused score."""
        total = sum(term_weights.values())
        if not hits or total <= 0:
            return list(hits)
        top_fused = max(hit.score for hit in hits) or 1.0

        def coverage(text: str) -> float:
            present = set(tokenize(text))
            return sum(w for term, w in term_weights.items() if term in present) / total

        def score(hit: Hit) -> float:
            sentences = split_sentences(hit.text) or [hit.text]
            windows = [" ".join(sentences[i:i + 2]) for i in range(max(1, len(sentences) - 1))]
            lexical = 0.5 * coverage(hit.title + "\n" + hit.text) + 0.5 * max(map(coverage, windows))
            return lexical + self.fused_weight * hit.score / top_fused

        return sorted(hits, key=score, reverse=True)
