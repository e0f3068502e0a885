"""The embedded knowledge base: documents in, chunks out, hybrid and graph search, in memory;
saved to and loaded from a folder of segments by SegmentPersistence (_segments)."""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ...core import Config, ConfigurationError, IndexConfig, SearchConfig, as_config
from ...text import tokenize
from .._engine import Engine
from .._records import ADD_BATCH, AddResult, batches, chunk_records, index_text
from ..embedders import (
    Embedder,
    EmbeddingCache,
    EmbedProgress,
    content_key,
    embed_batches,
    embedder_trait,
    make_embedder,
)
from ..indexes import (
    BM25,
    KnowledgeGraph,
    LexicalReranker,
    Reranker,
    TripleExtractor,
    VectorIndex,
    batch_postings,
    holds_vector,
    vector_index,
)
from ..ingestion import Document
from ._rwlock import ReadWriteLock
from ._segments import SegmentPersistence, saved_vectors
from ._snapshot import FolderStore

FILL_BATCH = 512  # chunks fill_vectors embeds, then writes (and saves) as one change: about 40 s of e5 here


@dataclass
class _Prepared:
    """An add's chunks with their content keys, BM25 postings (and the terms new to the vocabulary),
    vectors as the vector index packs them (dense or sparse), and model triples, before they are written."""

    chunks: list[dict] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    postings: list = field(default_factory=list)
    fresh: dict[str, int] = field(default_factory=dict)
    packed: list[tuple[list[int], Any]] = field(default_factory=list)
    triples: list = field(default_factory=list)


class KnowledgeBase(SegmentPersistence, Engine):
    """Chunks with a BM25 index and a vector index, searched by the engine (_engine) over the folder
    store (_snapshot); thread-safe, one read-write lock for all."""
    saves_to_folder = True  # its changes last once save(folder) writes them (KnowledgeBaseBackend)

    def __init__(self, embedder: Embedder | None = None, config: Config | IndexConfig | SearchConfig | None = None,
                 reranker: Reranker | None = None, extract_triples: TripleExtractor | None = None,
                 graph_method: str | None = None) -> None:
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
        self._filled: list[int] = []  # rows given their vector by fill_vectors, in order (a save writes the new ones)
        self._filling = threading.Lock()  # one fill at a time: a row is never given two vectors
        self._rows_by_content: dict[bytes, int] | None = None  # see _content_rows
        self.store = FolderStore(self)

    def _new_vector_index(self) -> VectorIndex:
        return vector_index(self.embedder.dimension, embedder_trait(self.embedder, "sparse"), self.config.index,
                            self.config.search)

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Iterable[str | Path] = (),
                      embedding_cache: str | Path | EmbeddingCache | None = None,
                      defer_vectors: bool = False) -> AddResult:
        """Index documents; a known id with changed content replaces that document's chunks.
        A chunk whose text (up to whitespace: content_key) this knowledge base (or a saved one in
        `reuse_from` built with the same embedder; other folders are skipped) already holds takes that
        vector instead of being embedded again, and chunks of one text are embedded once.
        With `embedding_cache` (a folder, or an EmbeddingCache) every embedded batch is also written
        there as it is made, and vectors found there are taken: an add interrupted and run again, or
        another knowledge base given the same texts, embeds only what it had not.
        With `defer_vectors`, no chunk is embedded: they are searchable by BM25 and the graph at once,
        and fill_vectors gives them their vectors later (hybrid search meanwhile: Engine.search)."""
        cache = _cache_of(embedding_cache, self.embedder)
        latest = {doc.id: doc for doc in documents}
        result = AddResult()
        if self.graph_method != "names" and self.extract_triples is None:
            raise ConfigurationError(f"this knowledge base's graph was built by {self.graph_method}; pass the same "
                                     f"extractor (agentic-rag index --graph-model ...) to add to it")
        with self._writer:
            with self._lock.read():
                todo = [d for d in latest.values() if self._docs.get(d.id, {}).get("hash") != d.content_hash()]
            result.unchanged = len(latest) - len(todo)
            prepared = self._prepare(todo, progress, reuse_from, cache, defer_vectors)
            with self._lock.write():
                for doc in todo:
                    if doc.id in self._docs:
                        result.replaced += 1
                        self._delete_rows(self._docs.pop(doc.id)["rows"])
                result.added = len(todo) - result.replaced
                self._put(todo, prepared)
        result.chunks = len(prepared.chunks)
        return result

    def _prepare(self, todo: list[Document], progress: bool, reuse_from: Iterable[str | Path],
                 cache: EmbeddingCache | None = None, defer_vectors: bool = False) -> _Prepared:
        """Everything an add writes, worked out before the write lock is taken (searches go on
        meanwhile), a batch of ADD_BATCH chunks at a time so that its scratch memory is bounded;
        with `defer_vectors`, no vector."""
        out = _Prepared()
        total = sum(1 for _ in chunk_records(todo, self.config.index)) if progress and not defer_vectors else 0
        shown = EmbedProgress(total) if total > embedder_trait(self.embedder, "batch_size") else False
        reused = 0
        for batch in batches(chunk_records(todo, self.config.index), ADD_BATCH):
            texts = [index_text(c) for c in batch]
            batch_keys = [content_key(t) for t in texts]
            out.postings.append(batch_postings([tokenize(t) for t in texts], self._bm25.vocab, out.fresh))  # one writer
            parts, known = ([], 0) if defer_vectors else self._embed(texts, batch_keys, shown, reuse_from, cache)
            out.packed += [([len(out.chunks) + i for i in indices], part) for indices, part in parts]
            reused += known
            if self.extract_triples:
                out.triples += [self.extract_triples(c["title"], c["text"]) for c in batch]
            out.chunks.extend(batch)
            out.keys.extend(batch_keys)
        if isinstance(shown, EmbedProgress):
            shown.close()
        if progress and reused:
            print(f"reused the vectors of {reused} of {len(out.chunks)} chunks", file=sys.stderr)
        return out

    def _put(self, todo: list[Document], prepared: _Prepared) -> None:
        """Write an add's prepared chunks under new rows, into every index (the write lock held)."""
        chunks = prepared.chunks
        rows = list(range(len(self._chunks), len(self._chunks) + len(chunks)))
        self._chunks.extend(chunks)
        for doc in todo:
            self._docs[doc.id] = {"hash": doc.content_hash(), "rows": []}
            self._changed_docs.append(doc.id)
        for row, chunk in zip(rows, chunks, strict=True):
            self._docs[chunk["doc_id"]]["rows"].append(row)
        self._bm25.add_batches(rows, prepared.postings, prepared.fresh)
        self._vectors.add_packs([([rows[i] for i in indices], part) for indices, part in prepared.packed])
        self._note_contents(prepared.keys, rows)
        for i, (row, chunk) in enumerate(zip(rows, chunks, strict=True)):
            if not self.extract_triples:
                self._graph.add(row, chunk["title"], chunk["text"])
            else:
                self._graph.add_triples(row, prepared.triples[i])

    def _embed(self, texts: list[str], keys: list[bytes], progress: bool | EmbedProgress,
               reuse_from: Iterable[str | Path] | str | Path,
               cache: EmbeddingCache | None = None) -> tuple[list[tuple[list[int], Any]], int]:
        """The texts' vectors, as (indices of the texts, their vectors packed by the vector index)
        batch by batch, so that all of them are never held unpacked: copied where the same text was
        embedded before (here, in a saved knowledge base of `reuse_from`, or in the cache), embedded
        otherwise (and written to the cache batch by batch); and how many were copied."""
        with self._lock.read():
            held = self._content_rows()
            here = [key for key in dict.fromkeys(keys) if key in held and holds_vector(self._vectors, held[key])]
            known = dict(zip(here, self._vectors.vectors_of([held[key] for key in here]), strict=True)) if here else {}
        wanted = set(keys) - known.keys()
        for folder in [reuse_from] if isinstance(reuse_from, (str, Path)) else reuse_from:
            if wanted:
                found = saved_vectors(Path(folder), self.embedder, wanted)
                known.update(found)
                wanted -= found.keys()
        if cache is not None and wanted:
            known.update(cache.lookup(wanted))
        reused = [i for i, key in enumerate(keys) if key in known]
        todo: dict[bytes, list[int]] = {}  # each text left, once, with every index holding it
        for i, key in enumerate(keys):
            if key not in known:
                todo.setdefault(key, []).append(i)
        parts = [(reused, self._vectors.pack(np.array([known[keys[i]] for i in reused], np.float32)))] if reused else []
        if isinstance(progress, EmbedProgress) and len(keys) > len(todo):
            progress(len(keys) - len(todo))  # copied, or the same text as one embedded below
        distinct = list(todo)
        for start, batch in embed_batches(self.embedder, [texts[todo[key][0]] for key in distinct], progress):
            made = distinct[start:start + len(batch)]
            if cache is not None:
                cache.put(made, batch)
            times = [len(todo[key]) for key in made]
            parts.append(([i for key in made for i in todo[key]], self._vectors.pack(np.repeat(batch, times, axis=0))))
        return parts, len(reused)

    def fill_vectors(self, batch: int | None = None, stop: threading.Event | None = None,
                     save_to: str | Path | None = None, limit: int | None = None,
                     embedding_cache: str | Path | EmbeddingCache | None = None, progress: bool = False,
                     on_batch: Callable[[int, int], None] | None = None) -> int:
        """Give the chunks held without a vector (added with defer_vectors, or left by a fill that was
        stopped) their vectors, `batch` chunks at a time (FILL_BATCH unless told), each batch written
        into the indexes as one change (searches see all of it or none of it) and, with `save_to`,
        saved there (a delta segment): stopped or killed, what was filled stays filled. Deduplicated
        and reused as an add is (copied where the text has a vector, one vector a text,
        `embedding_cache` read and written). Stops between batches once `stop` is set, or once `limit`
        chunks are filled; calls `on_batch(filled, left)` after each batch; with `progress`, the
        stderr line of embed_batches. Thread-safe: searches and adds go on meanwhile, one fill at a
        time. Returns how many chunks it gave a vector."""
        cache, batch = _cache_of(embedding_cache, self.embedder), batch or FILL_BATCH
        filled = 0
        with self._filling:
            shown = EmbedProgress(self.pending_vectors) if progress else False
            while not (stop is not None and stop.is_set()) and (limit is None or filled < limit):
                with self._lock.read():
                    rows = self._unembedded()[:batch if limit is None else min(batch, limit - filled)]
                    texts = [index_text(cast(dict, self._chunks[row])) for row in rows]
                if not rows:
                    break
                keys = [content_key(t) for t in texts]
                parts, _ = self._embed(texts, keys, shown, (), cache)
                with self._writer, self._lock.write():
                    self._vectors.add_packs([([rows[i] for i in indices], part) for indices, part in parts])
                    gone = [row for row in rows if self._chunks[row] is None]  # deleted while it was embedded
                    self._vectors.delete(gone)
                    self._note_contents(keys, rows)
                    self._filled += rows
                filled += len(rows)
                if save_to is not None:
                    self.save(save_to)
                if on_batch is not None:
                    on_batch(filled, self.pending_vectors)
            if isinstance(shown, EmbedProgress):
                shown.close()
        return filled

    def _unembedded(self) -> list[int]:
        """The live rows without a vector, in order (the lock held)."""
        return [row for row, chunk in enumerate(self._chunks)
                if chunk is not None and not holds_vector(self._vectors, row)]

    def _content_rows(self) -> dict[bytes, int]:
        """content_key of its text -> a live row: built by the first add that asks, then kept by adds and deletes."""
        if self._rows_by_content is None:
            self._rows_by_content = {content_key(index_text(c)): row for row, c in enumerate(self._chunks)
                                     if c is not None}
        return self._rows_by_content

    def _note_contents(self, keys: list[bytes], rows: list[int]) -> None:
        """Remember the rows by their texts' keys, where no row with a vector holds that text yet: a
        later add or fill copies from a row that has one (the write lock held)."""
        held = self._content_rows()
        for key, row in zip(keys, rows, strict=True):
            if self._chunks[row] is not None and not (key in held and holds_vector(self._vectors, held[key])):
                held[key] = row

    def _delete_rows(self, rows: list[int]) -> None:
        self._bm25.delete(rows)
        self._vectors.delete(rows)
        self._graph.delete(set(rows))
        held = self._content_rows()
        for row in rows:
            if held.get(key := content_key(index_text(cast(dict, self._chunks[row])))) == row:
                del held[key]
            self._chunks[row] = None

    def close(self) -> None:
        """Nothing to release: it holds no connection or file open between calls (the protocol asks for it)."""


def _cache_of(cache: str | Path | EmbeddingCache | None, embedder: Embedder) -> EmbeddingCache | None:
    """An embedding cache given as a folder opened for this embedder; an EmbeddingCache or None as it is."""
    return EmbeddingCache(cache, embedder) if isinstance(cache, (str, Path)) else cache
