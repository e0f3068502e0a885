"""The pieces of every search that are the same in every store: the plan (checked arguments) and
its fusion (SearchPlan), the checks of k and hops, graph search's ranking (graph_ranking), and
PageRank's seeds and ranking. The engine (_engine) runs them over a store's snapshot (_port)."""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..core import SEARCH_MODES, ConfigurationError, SearchConfig
from ._hit import Hit
from ._port import Ranked
from .embedders import Embedder, embedder_trait
from .indexes import check_filters, pagerank, reciprocal_rank_fusion, score_fusion, seed_names


class Searchable(Protocol):
    """What seeding a PageRank walk asks of a knowledge base or a view of one: its size and its search."""

    def __len__(self) -> int: ...
    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]: ...


def fusion_of(embedder: Embedder, search: SearchConfig) -> tuple[str, float]:
    """(fusion method, vector weight): the settings' where set, else the embedder's `fusion`."""
    method, weight = embedder_trait(embedder, "fusion")
    return search.fusion or method, weight if search.vector_weight is None else search.vector_weight


@dataclass
class SearchPlan:
    """A search's checked arguments: which retrievers run, with which weights and depth, and how
    their rankings are fused. Every backend searches by one."""

    filters: dict
    use: list[str]
    weights: dict[str, float]
    depth: int
    fusion: str

    @classmethod
    def make(cls, query: str, k: int, mode: str, filters: dict | None, search: SearchConfig,
             fusion: tuple[str, float]) -> SearchPlan:
        if not isinstance(query, str) or not query.strip():
            raise ConfigurationError("the search query is empty; give some words to search for")
        if mode not in SEARCH_MODES:
            raise ConfigurationError(f"unknown search mode {mode!r}; choose one of: {', '.join(SEARCH_MODES)}")
        check_k(k)
        method, vector_weight = fusion
        weights = {"bm25": search.bm25_weight if mode == "hybrid" else 1.0,
                   "vector": vector_weight if mode == "hybrid" else 1.0}
        use = [name for name in ("bm25", "vector") if mode in (name, "hybrid") and weights[name] > 0]
        return cls(check_filters(filters), use, weights, max(k, search.candidates), method)

    def fuse(self, found: dict[str, Ranked], rrf_k: int,
             waiting: Collection[int] = ()) -> list[tuple[int, float, dict]]:
        """The retrievers' (row, score) lists fused, best first; a single retriever keeps its own score.
        A `waiting` row (one BM25 found that has no vector yet) takes, for the vector search, what BM25
        gave it (its normalised score, or its reciprocal rank), so that it ranks as if the vector
        search agreed with BM25: neither lowered for lacking a vector nor raised."""
        if self.fusion == "score":
            fused = score_fusion(found, self.weights)
        else:
            fused = reciprocal_rank_fusion({n: [row for row, _ in f] for n, f in found.items()}, self.weights, rrf_k)
        if waiting:
            fused = _stand_in(fused, self.fusion, found["bm25"], waiting, self.weights["vector"], rrf_k)
        if len(self.use) == 1:
            raw = dict(found[self.use[0]])
            fused = [(row, raw[row], ranks) for row, _, ranks in fused]
        return fused


def _stand_in(fused: list[tuple[int, float, dict]], fusion: str, bm25: Ranked, waiting: Collection[int],
              weight: float, rrf_k: int) -> list[tuple[int, float, dict]]:
    """`fused` with each waiting row's vector share added as BM25 gave it (SearchPlan.fuse), best first."""
    scores = [score for _, score in bm25]
    low, span = min(scores, default=0.0), max(scores, default=0.0) - min(scores, default=0.0)
    share = {row: weight * (((score - low) / span if span > 0 else 1.0) if fusion == "score" else 1 / (rrf_k + rank))
             for rank, (row, score) in enumerate(bm25, 1) if row in waiting}
    added = [(row, score + share.get(row, 0.0), ranks) for row, score, ranks in fused]
    return sorted(added, key=lambda item: (-item[1], item[0]))


def check_k(k: object) -> None:
    """Refuse a search's k that is not a whole number of hits (>= 1); True is not one."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigurationError(f"k = {k!r}; ask for at least one hit (k, a whole number >= 1)")


def check_graph_arguments(k: object, hops: object) -> None:
    """Refuse a graph search's k that is not a whole number of hits (>= 1), or hops not a whole number (>= 0)."""
    check_k(k)
    if not isinstance(hops, int) or isinstance(hops, bool) or hops < 0:
        raise ConfigurationError(f"hops = {hops!r}; give how many edges to walk from the query's names "
                                 f"(hops, a whole number >= 0)")


PASSAGE_SEEDS = 8  # the query's best hybrid-search hits that seed a PageRank walk given no seeds


def pagerank_seeds(kb: Searchable, query: str, seeds: dict[str, float] | None) -> dict[str, float]:
    """A PageRank walk's seed chunks (chunk id -> weight): those given, checked and scaled to the
    largest, else the query's PASSAGE_SEEDS best hybrid-search hits of `kb`, weighted one over their
    rank (none when it is empty)."""
    if seeds is None:
        return {hit.id: 1.0 / rank for rank, hit in enumerate(kb.search(query, k=PASSAGE_SEEDS), 1)} if len(kb) else {}
    try:
        weights = {c: float(w) for c, w in seeds.items() if isinstance(c, str) and not isinstance(w, (bool, str))}
    except (AttributeError, TypeError, ValueError, OverflowError):
        weights = {}
    if not isinstance(seeds, dict) or len(weights) != len(seeds) or \
            not all(math.isfinite(w) and w >= 0 for w in weights.values()):
        raise ConfigurationError("seeds must map chunk ids to weights (finite numbers >= 0), e.g. {'doc#0': 1.0}")
    top = max(weights.values(), default=0.0)
    return {c: w / top if top > 0 else 0.0 for c, w in weights.items()}


def pagerank_ranking(query: str, starts: dict[str, str], held: dict[int, tuple[str, float]],
                     rows_of: Callable[[list[str]], Mapping[str, Collection[int]]],
                     nodes_of: Callable[[list[int]], Mapping[int, Collection[str]]], hops: int, k: int,
                     rrf_k: int) -> list[tuple[int, float, dict[str, int]]]:
    """How every backend ranks by PageRank: the k best rows of the walk (_graph.pagerank) from the
    query's nodes (`starts`, key -> name as the graph first wrote it), the seed rows (`held`, row ->
    (text, weight)) and their names (_graph.seed_names), fused by reciprocal rank with the ranking of
    the seed rows, as (row, score, ranks); the backend gives `rows_of` and `nodes_of` from its store.
    The walk alone lets passages that merely share names with the seeds outrank the seeds themselves
    (on the multi-hop sets its recall@5 was below that of the hybrid search seeding it); fused, it
    adds what the seeds lead to."""
    weights = {row: weight for row, (_, weight) in held.items()}
    names = seed_names(query, starts, [held[row] for row in sorted(held)])
    ranked = pagerank(rows_of, nodes_of, names, weights, hops)
    order = sorted(weights, key=lambda row: (-weights[row], row))
    return reciprocal_rank_fusion({"pagerank": [row for row, _ in ranked], "seeds": order}, {}, rrf_k)[:k]


def graph_ranking(found: dict[int, tuple[int, list[str]]], scores: Mapping[int, float],
                  k: int) -> list[tuple[int, float, dict[str, int], list[str]]]:
    """The k best rows a graph walk found (row -> (hop, path)): nearest first, then by BM25 score
    for the query (`scores[row]`), then by row; as (row, score 1/hop, ranks, path)."""
    order = sorted(found, key=lambda row: (found[row][0], -scores[row], row))[:k]
    return [(row, 1.0 / found[row][0], {"graph": rank}, found[row][1]) for rank, row in enumerate(order, 1)]
