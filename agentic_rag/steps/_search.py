"""vector_search: run the round's queries (independent ones in parallel), grow the evidence pool,
and re-rank the whole pool against the original question."""
from __future__ import annotations

import contextvars
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..core import ConfigurationError, Evidence, SubQuery, new_evidence
from ..kb import Hit, KnowledgeBaseBackend
from ..kb.indexes import MAX_FILTER_VALUES, check_filters
from ..text import bridge_entities


@dataclass
class SearchOutcome:
    """The new pool (best first), which ids are new, and the queries as actually run."""

    pool: list[Evidence]
    new_ids: list[str] = field(default_factory=list)
    round_ids: list[str] = field(default_factory=list)
    queries_run: list[str] = field(default_factory=list)


def usable_filters(filters: dict | None) -> tuple[dict, list[str]]:
    """The conditions the knowledge base can apply, and why each other one was dropped (a model
    may invent an operator: the search then runs without that condition rather than failing)."""
    if not filters:
        return {}, []
    if not isinstance(filters, dict):
        return {}, [f"filters must be an object, not {type(filters).__name__}"]
    try:  # too many values in all: none is kept (which to keep would be a guess)
        return check_filters(filters), []
    except ConfigurationError as exc:
        if len(filters) > MAX_FILTER_VALUES:
            return {}, [str(exc)]
    kept, dropped = {}, []
    for name, condition in filters.items():
        try:
            check_filters({name: condition})
        except ConfigurationError as exc:
            dropped.append(str(exc))
        else:
            kept[name] = condition
    try:
        return check_filters(kept), dropped
    except ConfigurationError as exc:
        return {}, [*dropped, str(exc)]


def hit_evidence(hit: Hit, *, query: str | None = None, rank: int | None = None) -> Evidence:
    """A hit as evidence, with the page (a number) and its printed label, section or media its
    chunk's metadata names, and the query that found it and its rank there when given."""
    kinds = {"page": int, "page_label": str, "section": str,  # a document's own `page: intro` is not a location
             "media": str}
    where = {key: hit.metadata[key] for key, kind in kinds.items()
             if isinstance(hit.metadata.get(key), kind) and not isinstance(hit.metadata[key], bool)}
    return new_evidence(**hit.model_dump(exclude={"score", "metadata"}), **where, query=query, rank=rank)


def _passages(hits: list[Hit], query: str) -> list[Evidence]:
    """The hits of one search as evidence, each with the query that found it and its rank there."""
    return [hit_evidence(h, query=query, rank=rank) for rank, h in enumerate(hits, 1)]


def _search(kb: KnowledgeBaseBackend, query: str, k: int, filters: dict) -> list[Evidence]:
    hits = kb.search(query, k=k, filters=filters) if filters else []
    if len(hits) < k:  # a filter narrows, it never empties a search: fill from the unfiltered ranking
        seen = {h.id for h in hits}
        hits += [h for h in kb.search(query, k=k) if h.id not in seen][:k - len(hits)]
    return _passages(hits, query)


def _run_all(kb: KnowledgeBaseBackend, queries: list[SubQuery], k: int, filters: dict,
             workers: int) -> tuple[list[list[Evidence]], list[str]]:
    """Each wave runs every query whose dependencies are done; a dependent query gains the bridge
    names found by the queries it depends on."""
    results: dict[int, list[Evidence]] = {}
    texts = [q.query for q in queries]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        while len(results) < len(queries):
            ready = [i for i, q in enumerate(queries) if i not in results
                     and all(d in results for d in q.depends_on)] or \
                    [i for i in range(len(queries)) if i not in results]  # a cycle: run the rest as they are
            for i in ready:
                found = [hit for d in queries[i].depends_on for hit in results.get(d, ())]  # a cycle's: not run yet
                if found:
                    texts[i] = " ".join([queries[i].query] + bridge_entities(queries[i].query, found, 2))
            searches = [pool.submit(contextvars.copy_context().run, _search, kb, texts[i], k, filters)
                        for i in ready]  # each in a copy of this context: the run's deadline goes with it
            for i, hits in zip(ready, (s.result() for s in searches), strict=True):
                results[i] = hits
    return [results[i] for i in range(len(queries))], texts


def relevance(content: float, rank: int) -> float:
    """Comparable across queries: half how well the passage matches the original question (0-1,
    pool_match), half the rank it had in the search that found it, so a bridge passage found by a
    later hop keeps its place though it shares little with the question."""
    return round(0.5 * content + 0.5 / rank, 6)


def pool_match(kb: KnowledgeBaseBackend, question: str, ids: list[str]) -> dict[str, float]:
    """How well each passage of the pool matches the question, 0-1: its BM25 score scaled to the
    pool's best, blended with its vector similarity scaled to the pool's range, in the proportion
    hybrid search gives the two (the knowledge base's fusion weights: a dense embedder's
    similarity counts for more than a hashing embedder's)."""
    bm25 = kb.bm25_scores(question, ids)
    best = max(bm25.values(), default=0.0) or 1.0
    lexical = {i: bm25.get(i, 0.0) / best for i in ids}
    vector_weight = kb.fusion[1]
    share = vector_weight / (kb.config.search.bm25_weight + vector_weight) if vector_weight > 0 else 0.0
    if share == 0.0 or not ids:
        return lexical
    similar = kb.vector_scores(question, ids)
    low, high = min(similar.values(), default=0.0), max(similar.values(), default=0.0)
    semantic = {i: (similar.get(i, low) - low) / (high - low) if high > low else 1.0 for i in ids}
    return {i: (1 - share) * lexical[i] + share * semantic[i] for i in ids}


def merge_into_pool(results: list[list[Evidence]], kb: KnowledgeBaseBackend, question: str, pool: Sequence[Evidence],
                    queries_run: list[str]) -> SearchOutcome:
    """New passages join the pool (de-duplicated by chunk id), and the whole pool is ranked against the question."""
    merged = {item["id"]: item for item in pool}
    new_ids, round_ids = [], []
    for hits in results:
        for hit in hits:
            round_ids.append(hit["id"])
            if hit["id"] not in merged:
                merged[hit["id"]] = hit
                new_ids.append(hit["id"])
            elif hit["rank"] < merged[hit["id"]]["rank"]:
                merged[hit["id"]] = {**merged[hit["id"]], "rank": hit["rank"]}
    passages = [i for i, item in merged.items() if item["kind"] == "passage"]
    match = pool_match(kb, question, passages)
    for i in passages:
        merged[i] = {**merged[i], "relevance": relevance(match[i], merged[i]["rank"])}
    ranked = sorted(merged.values(), key=lambda item: (-item.get("relevance", 0), item["id"]))
    round_ids = sorted(dict.fromkeys(round_ids), key=lambda i: -merged[i].get("relevance", 0))  # ties: found first
    return SearchOutcome(pool=ranked, new_ids=new_ids, round_ids=round_ids, queries_run=queries_run)


def vector_search(queries: list[SubQuery], kb: KnowledgeBaseBackend, question: str, pool: Sequence[Evidence] = (),
                  k: int = 5, filters: dict | None = None, workers: int = 4) -> SearchOutcome:
    """Search every query; new passages join the pool (de-duplicated by chunk id), ranked against the question."""
    results, texts = _run_all(kb, queries, k, filters or {}, workers)
    return merge_into_pool(results, kb, question, list(pool), texts)


def graph_search(question: str, kb: KnowledgeBaseBackend, pool: Sequence[Evidence] = (), k: int = 8,
                 hops: int = 2) -> SearchOutcome:
    """Walk the knowledge graph from the names in the question (one or two hops); the chunks behind
    the edges used join the pool, each with the path of names that reached it."""
    hits = _passages(kb.graph_search(question, k=k, hops=hops), f"graph: {question}")
    return merge_into_pool([hits], kb, question, list(pool), [f"graph: {question}"])


def pagerank_search(question: str, kb: KnowledgeBaseBackend, pool: Sequence[Evidence] = (), k: int = 8,
                    seeds: int = 8) -> SearchOutcome:
    """Personalized PageRank over the knowledge graph (kb.pagerank_search), seeded by the question's
    names and the pool's best `seeds` passages weighted by their relevance (by the question's own
    search when the pool is empty): up to k passages beyond the seeds, what the passages found so
    far lead to, join the pool."""
    passages = [e for e in pool if e["kind"] == "passage"][:seeds]   # not a tool's or the web's results
    best = {e["id"]: max(float(e.get("relevance", 0.0)), 1e-6) for e in passages}
    hits = _passages(kb.pagerank_search(question, k=k + len(best), seeds=best or None), f"pagerank: {question}")
    return merge_into_pool([hits], kb, question, list(pool), [f"pagerank: {question}"])
