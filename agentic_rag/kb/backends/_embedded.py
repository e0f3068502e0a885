"""The embedded knowledge base: documents in, chunks out, hybrid and graph search, in memory;
saved to and loaded from a folder of segments by SegmentPersistence (_segments)."""
from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._config import SEARCH_MODES, Config, IndexConfig, SearchConfig, as_config
from ..._errors import ConfigurationError, RetrievalError
from ...text._tokenize import tokenize
from .._hit import Hit
from ..embedders._embedders import (
    SEMANTIC_FUSION,
    Embedder,
    EmbedProgress,
    content_key,
    embed_batches,
    embed_query,
    make_embedder,
)
from ..indexes._bm25 import BM25, batch_postings
from ..indexes._filters import MAX_FILTER_VALUES, check_filters, filter_mask, filter_values, matches
from ..indexes._fusion import reciprocal_rank_fusion, score_fusion
from ..indexes._graph import KnowledgeGraph
from ..indexes._rerank import LexicalReranker, Reranker
from ..indexes._vectors import VectorIndex, vector_index
from ..ingestion._chunking import document_chunks
from ..ingestion._documents import Document
from ._core import index_text
from ._rwlock import ReadWriteLock
from ._segments import SegmentPersistence, saved_vectors


@dataclass
class AddResult:
    """What an add did: documents new, replaced and unchanged (skipped), and chunks written."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    chunks: int = 0


ADD_BATCH = 2048  # chunks tokenized and embedded at a time by an add: its scratch memory is bounded by it


def _batches(items: Iterable, size: int) -> Iterator[list]:
    """Lists of `size` items (the last may be shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class KnowledgeBase(SegmentPersistence):
    """Chunks with a BM25 index and a vector index; thread-safe, one read-write lock for all."""
    saves_to_folder = True  # its changes last once save(folder) writes them (KnowledgeBaseBackend)

    def __init__(self, embedder: Embedder | None = None, config: Config | IndexConfig | SearchConfig | None = None,
                 reranker: Reranker | None = None, extract_triples=None, graph_method: str | None = None):
        self.config = as_config(config)  # a layer alone: the others take their defaults
        self.embedder = embedder or make_embedder("hashing")
        self.reranker = reranker or LexicalReranker()
        # (title, text) -> [(subject, relation, object)]: a language model's graph; None: names co-occurring
        self.extract_triples = extract_triples
        self.graph_method = graph_method or ("names" if extract_triples is None else "model")
        self._chunks: list[dict | None] = []  # by row; None once deleted
        self._docs: dict[str, dict] = {}      # doc id -> {"hash", "rows"}
        self._bm25 = BM25(self.config.search.bm25_k1, self.config.search.bm25_b)
        self._vectors = self._new_vector_index()
        self._graph = KnowledgeGraph()
        self._lock = ReadWriteLock()
        self._writer = threading.Lock()       # one add, delete or save at a time; searches go on meanwhile
        self._saved: dict[str, dict] = {}  # folder -> what it holds: see _remember
        self._changed_docs: list[str] = []  # every document added, replaced or deleted, in order
        self._rows_by_content: dict[bytes, int] | None = None  # see _content_rows

    def _new_vector_index(self) -> VectorIndex:
        return vector_index(self.embedder.dimension, getattr(self.embedder, "sparse", False), self.config.index,
                            self.config.search)

    def __len__(self) -> int:
        return self._bm25.size

    @property
    def document_count(self) -> int:
        """Number of documents held."""
        return len(self._docs)

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Iterable[str | Path] = ()) -> AddResult:
        """Index documents; a known id with changed content replaces that document's chunks.
        A chunk whose text this knowledge base (or a saved one in `reuse_from` built with the same
        embedder; other folders are skipped) already holds takes that vector instead of being embedded again."""
        latest = {doc.id: doc for doc in documents}
        result = AddResult()
        if self.graph_method != "names" and self.extract_triples is None:
            raise ConfigurationError(f"this knowledge base's graph was built by {self.graph_method}; pass the same "
                                     f"extractor (agentic-rag index --graph-model ...) to add to it")
        with self._writer:
            with self._lock.read():
                todo = [d for d in latest.values() if self._docs.get(d.id, {}).get("hash") != d.content_hash()]
            result.unchanged = len(latest) - len(todo)
            chunks, keys, postings, packed, triples, fresh = [], [], [], [], [], {}
            total = sum(1 for _ in self._chunks_of(todo)) if progress else 0
            shown = EmbedProgress(total) if total > getattr(self.embedder, "batch_size", 256) else False
            reused = 0
            for batch in _batches(self._chunks_of(todo), ADD_BATCH):  # a batch at a time: bounded memory
                texts = [index_text(c) for c in batch]
                batch_keys = [content_key(t) for t in texts]
                postings.append(batch_postings([tokenize(t) for t in texts], self._bm25.vocab, fresh))  # one writer
                parts, known = self._embed(texts, batch_keys, shown, reuse_from)
                packed += [([len(chunks) + i for i in indices], part) for indices, part in parts]
                reused += known
                if self.extract_triples:
                    triples += [self.extract_triples(c["title"], c["text"]) for c in batch]
                chunks.extend(batch)
                keys.extend(batch_keys)
            if shown:
                shown.close()
            if progress and reused:
                print(f"reused the vectors of {reused} of {len(chunks)} chunks", file=sys.stderr)
            with self._lock.write():
                for doc in todo:
                    if doc.id in self._docs:
                        result.replaced += 1
                        self._delete_rows(self._docs.pop(doc.id)["rows"])
                result.added = len(todo) - result.replaced
                rows = list(range(len(self._chunks), len(self._chunks) + len(chunks)))
                self._chunks.extend(chunks)
                for doc in todo:
                    self._docs[doc.id] = {"hash": doc.content_hash(), "rows": []}
                    self._changed_docs.append(doc.id)
                for row, chunk in zip(rows, chunks, strict=True):
                    self._docs[chunk["doc_id"]]["rows"].append(row)
                self._bm25.add_batches(rows, postings, fresh)
                self._vectors.add_packs([([rows[i] for i in indices], part) for indices, part in packed])
                self._content_rows().update(zip(keys, rows, strict=True))
                for i, (row, chunk) in enumerate(zip(rows, chunks, strict=True)):
                    if not self.extract_triples:
                        self._graph.add(row, chunk["title"], chunk["text"])
                    else:
                        self._graph.add_triples(row, triples[i])
        result.chunks = len(chunks)
        return result

    def _chunks_of(self, documents: list[Document]) -> Iterator[dict]:
        """The chunks of the documents, one at a time; a chunk never crosses a page or section."""
        index = self.config.index
        for doc in documents:
            for i, (text, metadata) in enumerate(document_chunks(doc, index.chunk_size, index.chunk_overlap)):
                yield dict(id=f"{doc.id}#{i}", doc_id=doc.id, text=text, title=doc.title, source=doc.source,
                           metadata=metadata)

    def _embed(self, texts: list[str], keys: list[bytes], progress: bool | EmbedProgress,
               reuse_from: Iterable[str | Path] | str | Path) -> tuple[list[tuple[list[int], object]], int]:
        """The texts' vectors, as (indices of the texts, their vectors packed by the vector index)
        batch by batch, so that all of them are never held unpacked: copied where the same text was
        embedded before (here, or in a saved knowledge base of `reuse_from`), embedded otherwise;
        and how many were copied."""
        with self._lock.read():
            held = self._content_rows()
            here = [key for key in dict.fromkeys(keys) if key in held]
            known = dict(zip(here, self._vectors.vectors_of([held[key] for key in here]), strict=True)) if here else {}
        wanted = set(keys) - known.keys()
        for folder in [reuse_from] if isinstance(reuse_from, (str, Path)) else reuse_from:
            if wanted:
                found = saved_vectors(Path(folder), self.embedder, wanted)
                known.update(found)
                wanted -= found.keys()
        reused = [i for i, key in enumerate(keys) if key in known]
        todo = [i for i, key in enumerate(keys) if key not in known]
        parts = [(reused, self._vectors.pack(np.array([known[keys[i]] for i in reused], np.float32)))] if reused else []
        if isinstance(progress, EmbedProgress) and reused:
            progress(len(reused))
        for start, batch in embed_batches(self.embedder, [texts[i] for i in todo], progress):
            parts.append((todo[start:start + len(batch)], self._vectors.pack(batch)))
        return parts, len(reused)

    def _content_rows(self) -> dict[bytes, int]:
        """content_key of its text -> a live row: built by the first add that asks, then kept by adds and deletes."""
        if self._rows_by_content is None:
            self._rows_by_content = {content_key(index_text(c)): row for row, c in enumerate(self._chunks)
                                     if c is not None}
        return self._rows_by_content

    def held_documents(self, doc_ids: Iterable[str]) -> list[str]:
        """Which of these document ids the knowledge base holds, in the order given, once each."""
        with self._lock.read():
            return [doc_id for doc_id in dict.fromkeys(doc_ids) if doc_id in self._docs]

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove documents and all their chunks; returns how many were found."""
        with self._writer, self._lock.write():
            found = [doc_id for doc_id in dict.fromkeys(doc_ids) if doc_id in self._docs]
            for doc_id in found:
                self._delete_rows(self._docs.pop(doc_id)["rows"])
            self._changed_docs += found
            return len(found)

    def _delete_rows(self, rows: list[int]) -> None:
        self._bm25.delete(rows)
        self._vectors.delete(rows)
        self._graph.delete(set(rows))
        held = self._content_rows()
        for row in rows:
            if held.get(key := content_key(index_text(self._chunks[row]))) == row:
                del held[key]
            self._chunks[row] = None

    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]:
        """The k best chunks for the query; each hit records its rank in each retriever."""
        c = self.config.search
        plan = SearchPlan.make(query, k, mode, filters, c, self.fusion)
        filters, use, depth = plan.filters, plan.use, plan.depth
        query_vector = embed_query(self.embedder, query) if "vector" in use else None
        with self._lock.read():
            if len(self) == 0:
                raise RetrievalError("the knowledge base is empty; add documents first "
                                     "(agentic-rag index PATH --kb DIR)")
            allowed = filter_mask(self._chunks, filters) if filters else None
            found = {}
            if "bm25" in use:
                found["bm25"] = self._bm25.top(tokenize(query), depth, allowed)
            if "vector" in use:
                found["vector"] = self._vectors.search(query_vector, depth, allowed)
            fused = plan.fuse(found, c.rrf_k)
            rerank = c.rerank if rerank is None else rerank
            hits = [self._hit(row, score, ranks) for row, score, ranks in fused[:depth if rerank else k]]
            term_weights = self._bm25.idf(tokenize(query)) if rerank else {}
        if rerank:
            hits = self.reranker.rerank(query, hits, term_weights)
        return hits[:k]

    @property
    def fusion(self) -> tuple[str, float]:
        """Hybrid search's (fusion method, vector weight): the config's where set, else the embedder's
        measured defaults (its `fusion` attribute; SEMANTIC_FUSION for an embedder without one)."""
        return fusion_of(self.embedder, self.config.search)

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """Chunks behind the graph edges within `hops` of the names in the query, nearest first
        (ties by BM25 for the query); each hit's `path` is the chain of names that reached it."""
        with self._lock.read():
            found = self._graph.walk(self._graph.find(query), hops)
            scores = self._bm25.scores(tokenize(query))
            order = sorted(found, key=lambda row: (found[row][0], -scores[row], row))[:k]
            return [self._hit(row, 1.0 / found[row][0], {"graph": rank}).model_copy(update={"path": found[row][1]})
                    for rank, row in enumerate(order, 1)]

    def restricted(self, filters: dict) -> RestrictedView:
        """This knowledge base as a run sees it when only chunks matching `filters` may be used: every
        search keeps to them (and a route's own filters narrow further). For a service request's filters."""
        return RestrictedView(self, [check_filters(filters)])

    def close(self) -> None:
        """Nothing to release: it holds no connection or file open between calls (the protocol asks for it)."""

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return len(self._graph.adjacent), len(self._graph)

    def term_weights(self, text: str) -> dict[str, float]:
        """BM25 idf of each distinct token of `text` that the knowledge base holds."""
        with self._lock.read():
            return self._bm25.idf(tokenize(text))

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query`: comparable across chunks found by other queries."""
        with self._lock.read():
            scores = self._bm25.scores(tokenize(query))
            out = {}
            for chunk_id in chunk_ids:
                for row in self._docs.get(chunk_id.rsplit("#", 1)[0], {}).get("rows", []):
                    if self._chunks[row]["id"] == chunk_id:
                        out[chunk_id] = float(scores[row])
            return out

    def _hit(self, row: int, score: float, ranks: dict[str, int]) -> Hit:
        chunk = self._chunks[row]
        return Hit(id=chunk["id"], doc_id=chunk["doc_id"], source=chunk["source"], title=chunk["title"],
                   text=chunk["text"], score=score, ranks=ranks, metadata=chunk["metadata"])



def fusion_of(embedder: Embedder, search: SearchConfig) -> tuple[str, float]:
    """(fusion method, vector weight): the settings' where set, else the embedder's (KnowledgeBase.fusion)."""
    method, weight = getattr(embedder, "fusion", SEMANTIC_FUSION)
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
        if not isinstance(k, int) or k < 1:
            raise ConfigurationError(f"k = {k!r}; ask for at least one hit (k >= 1)")
        method, vector_weight = fusion
        weights = {"bm25": search.bm25_weight if mode == "hybrid" else 1.0,
                   "vector": vector_weight if mode == "hybrid" else 1.0}
        use = [name for name in ("bm25", "vector") if mode in (name, "hybrid") and weights[name] > 0]
        return cls(check_filters(filters), use, weights, max(k, search.candidates), method)

    def fuse(self, found: dict[str, list[tuple[int, float]]], rrf_k: int) -> list[tuple[int, float, dict]]:
        """The retrievers' (row, score) lists fused, best first; a single retriever keeps its own score."""
        if self.fusion == "score":
            fused = score_fusion(found, self.weights)
        else:
            fused = reciprocal_rank_fusion({n: [row for row, _ in f] for n, f in found.items()}, self.weights, rrf_k)
        if len(self.use) == 1:
            raw = dict(found[self.use[0]])
            fused = [(row, raw[row], ranks) for row, _, ranks in fused]
        return fused


class RestrictedView:
    """A knowledge base whose searches keep to chunks matching every one of a list of filters
    (KnowledgeBase.restricted); what else a run asks of it goes to the knowledge base."""

    def __init__(self, kb: KnowledgeBase, filters: list[dict]):
        self._kb, self._filters = kb, filters

    def __getattr__(self, name):  # term weights, graph size, BM25 scores: as the knowledge base has them
        return getattr(self._kb, name)

    def __len__(self) -> int:
        return len(self._kb)

    def restricted(self, filters: dict) -> RestrictedView:
        """A view that keeps to these filters as well."""
        return RestrictedView(self._kb, [*self._filters, check_filters(filters)])

    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]:
        """As KnowledgeBase.search, keeping to the view's filters and the given ones: the first
        condition on each field goes to the search, a second one on the same field is checked on a
        ranking four times deeper."""
        every = [*self._filters, check_filters(filters) if filters else {}]
        first: dict = {}
        for conditions in every:  # each is within the filter limit, not always all of them together:
            more = {f: c for f, c in conditions.items() if f not in first}  # past it, a later one is checked
            if filter_values({**first, **more}) <= MAX_FILTER_VALUES:        # on the hits instead
                first.update(more)
        later = [{f: c for f, c in conditions.items() if first.get(f) is not c} for conditions in every]
        if not any(later):
            return self._kb.search(query, k, mode, first, rerank)
        hits = self._kb.search(query, k * 4, mode, first, rerank)
        return [h for h in hits if all(matches(_fields(h), c) for c in later)][:k]

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """As KnowledgeBase.graph_search, keeping the hits that match the filters (at most k)."""
        hits = self._kb.graph_search(query, k=max(k, 1) * 4, hops=hops)
        return [h for h in hits if all(matches(_fields(h), c) for c in self._filters)][:k]


def _fields(hit: Hit) -> dict:
    """A hit's fields as filters see them."""
    return {**hit.metadata, "doc_id": hit.doc_id, "source": hit.source, "title": hit.title}


