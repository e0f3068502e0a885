"""The knowledge-base engine: every read a knowledge base offers (hybrid, BM25 and vector search;
graph and PageRank search; term weights; scores of given chunks; which documents are held; its
sizes; restricted views) and deletes, written once over the store port (_port). KnowledgeBase
(kb/folder), PostgresKnowledgeBase (kb/postgres) and MemoryKnowledgeBase (_memory) are this engine
over their store, each adding its own adds and how its changes last."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core import Config, RetrievalError
from ..text import tokenize
from ._hit import Hit
from ._port import Fused, Snapshot, Store
from ._search import (
    SearchPlan,
    check_graph_arguments,
    fusion_of,
    graph_ranking,
    pagerank_ranking,
    pagerank_seeds,
)
from ._views import RestrictedView
from .embedders import Embedder, embed_query
from .indexes import Reranker, check_filters, walk


class Engine(ABC):
    """A knowledge base's reads over a store: `store` (its snapshot, consistent for one read) and
    the settings, embedder and reranker it was built with; the class that holds it writes."""

    config: Config
    embedder: Embedder
    reranker: Reranker
    graph_method: str
    saves_to_folder: bool
    store: Store

    @abstractmethod
    def generation(self, directory: str | Path | None) -> str | None:
        """What it holds, as a name that changes with every saved change (KnowledgeBaseBackend.generation)."""

    # These counts take the store's read lock: not for use inside a store.read() callback.
    def __len__(self) -> int:
        return self.store.read(lambda s: s.size())

    @property
    def document_count(self) -> int:
        """Documents held."""
        return self.store.read(lambda s: s.document_count())

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return self.store.read(lambda s: s.graph_size())

    @property
    def pending_vectors(self) -> int:
        """Chunks held without a vector yet (KnowledgeBase.fill_vectors gives them theirs): while any
        wait, hybrid search ranks them by BM25 alone, neither up nor down (search)."""
        return self.store.read(lambda s: s.size() - s.embedded_count())

    @property
    def fusion(self) -> tuple[str, float]:
        """Hybrid search's (fusion method, vector weight): the config's where set, else the embedder's
        measured defaults (its `fusion` trait; SEMANTIC_FUSION for an embedder that declares none)."""
        return fusion_of(self.embedder, self.config.search)

    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]:
        """The k best chunks for the query; each hit records its rank in each retriever. Plan,
        retrieve in one snapshot, fuse, then rerank the fused candidates (the config's rerank unless
        `rerank` says) by the query's idf. A chunk still waiting for its vector (pending_vectors) is
        fused with its BM25 standing in for the vector search it cannot be found by (SearchPlan.fuse)."""
        c = self.config.search
        plan = SearchPlan.make(query, k, mode, filters, c, self.fusion)
        vector = embed_query(self.embedder, query) if "vector" in plan.use else None
        reranking = c.rerank if rerank is None else rerank

        def work(s: Snapshot) -> tuple[list[Hit], dict[str, float]]:
            if s.size() == 0:
                raise RetrievalError("the knowledge base is empty; add documents first "
                                     "(agentic-rag index PATH --kb DIR)")
            tokens = tokenize(query)
            found = {}
            if "bm25" in plan.use:
                found["bm25"] = s.bm25_top(tokens, plan.depth, plan.filters)
            if vector is not None:
                found["vector"] = s.vector_top(vector, plan.depth, plan.filters)
            waiting = s.unembedded([row for row, _ in found["bm25"]]) if len(found) == 2 else set()
            hits = s.hits(plan.fuse(found, c.rrf_k, waiting)[:plan.depth if reranking else k])
            return hits, s.idf(tokens) if reranking else {}

        hits, weights = self.store.read(work)
        if reranking:
            hits = self.reranker.rerank(query, hits, weights)
        return hits[:k]

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """Chunks behind the graph edges within `hops` of the names in the query, nearest first
        (ties by BM25 for the query); each hit's `path` is the chain of names that reached it."""
        check_graph_arguments(k, hops)
        tokens = tokenize(query)

        def work(s: Snapshot) -> list[Hit]:
            found = walk(s.neighbours, s.path_names, s.start_nodes(query), hops)
            scores = dict.fromkeys(found, 0.0)
            scores.update(s.row_scores(tokens, list(found)))
            ranked = graph_ranking(found, scores, k)
            hits = s.hits([(row, score, ranks) for row, score, ranks, _ in ranked])
            return [h.model_copy(update={"path": path}) for h, (_, _, _, path) in zip(hits, ranked, strict=True)]

        return self.store.read(work)

    def pagerank_search(self, query: str, k: int = 8, seeds: dict[str, float] | None = None,
                        hops: int = 2) -> list[Hit]:
        """The k chunks personalized PageRank ranks first, over passages and the names they share
        (the knowledge graph), walked from the query's names and seed chunks (chunk id -> weight;
        by default the query's best hybrid-search hits): what a chain of shared names leads to.
        The walk's ranking is fused with the seeds' (pagerank_ranking): `ranks` gives both."""
        check_graph_arguments(k, hops)
        weights = pagerank_seeds(self, query, seeds)

        def work(s: Snapshot) -> list[Hit]:
            held = {row: (text, weights[c]) for c, (row, text) in s.passages(list(weights)).items()}
            ranked: Fused = pagerank_ranking(query, s.start_nodes(query), held, s.rows_naming, s.nodes_in, hops, k,
                                             self.config.search.rrf_k)
            return s.hits(ranked)

        return self.store.read(work)

    def term_weights(self, text: str, filters: Sequence[dict] = ()) -> dict[str, float]:
        """BM25 idf of each distinct token of `text` that the knowledge base holds; with `filters`
        (every one must hold), among the chunks they keep: a term only other chunks hold is absent."""
        checked, tokens = [check_filters(f) for f in filters], tokenize(text)
        return self.store.read(lambda s: s.idf(tokens, checked)) if tokens else {}

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query`: comparable across chunks found by other queries."""
        tokens = tokenize(query)
        return self.store.read(lambda s: s.bm25_scores(tokens, chunk_ids)) if tokens and chunk_ids else {}

    def vector_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine similarity of each given chunk's vector to the query's (both are unit vectors)."""
        if not chunk_ids:
            return {}
        vector = embed_query(self.embedder, query)
        return self.store.read(lambda s: s.vector_scores(vector, chunk_ids))

    def held_documents(self, doc_ids: Iterable[str], filters: dict | None = None,
                       every_member: bool = False) -> list[str]:
        """Which of these document ids the knowledge base holds, in the order given, once each; with
        `filters`, only those with a chunk the filters keep (with `every_member`, a list value only
        when each of its members matches)."""
        checked = check_filters(filters) if filters else None
        wanted = list(dict.fromkeys(doc_ids))
        return self.store.read(lambda s: s.held_documents(wanted, checked, every_member))

    def list_documents(self, after: str = "", limit: int = 50, filters: Sequence[dict] = ()) -> list[dict]:
        """A page of the documents held, by id in code-point order after `after`: each {"doc_id",
        "title", "source", "chunks"}, counting only the chunks every filter keeps (a document with
        none is left out). The next page starts after the last id."""
        checked = [check_filters(f) for f in filters if f]
        return self.store.read(lambda s: s.document_page(after, max(limit, 0), checked))

    def document_chunks(self, doc_id: str, filters: Sequence[dict] = ()) -> list[Hit]:
        """A document's chunks in the order it was chunked, those every filter keeps ([] when it is not
        held, or none is kept)."""
        checked = [check_filters(f) for f in filters if f]
        return self.store.read(lambda s: s.document_chunks(doc_id, checked))

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove documents and all their chunks; returns how many were found."""
        return self.store.delete(list(dict.fromkeys(doc_ids)))

    def restricted(self, filters: dict, scope: bool = False) -> RestrictedView:
        """This knowledge base as a run sees it when only chunks matching `filters` may be used: every
        search keeps to them (and a route's own filters narrow further). For a service request's
        filters; with `scope` (an API key's filter), its term weights count only those chunks too."""
        checked = check_filters(filters)
        return RestrictedView(self, [checked], [checked] if scope else [])
