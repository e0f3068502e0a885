"""The knowledge base: documents in, chunks out, hybrid search, atomic saves."""
from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._config import SEARCH_MODES, Config, IndexConfig, SearchConfig, as_config
from ..._errors import ConfigurationError, RetrievalError
from ...text._tokenize import TOKENIZER_SETTINGS, tokenize
from .._hit import Hit
from ..embedders._embedders import (
    REMOVED,
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
from ..indexes._vectors import DenseIndex, SparseIndex, VectorIndex
from ..ingestion._chunking import document_chunks
from ..ingestion._documents import Document
from . import _store as store
from ._integrity import (
    LOAD_ERRORS,
    check_bm25,
    check_bm25_arrays,
    check_chunk,
    check_documents,
    check_graph,
    check_hnsw,
    check_vectors,
    check_vocab,
    reading,
)
from ._rwlock import ReadWriteLock


@dataclass
class AddResult:
    """What an add did: documents new, replaced and unchanged (skipped), and chunks written."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    chunks: int = 0


def _index_text(chunk: dict) -> str:
    """What both retrievers see: the title (often the entity's name) above the chunk."""
    return f"{chunk['title']}\n{chunk['text']}" if chunk["title"] else chunk["text"]


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


class KnowledgeBase:
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
        return _vector_index(self.embedder, self.config.index, self.config.search)

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
                texts = [_index_text(c) for c in batch]
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
                found = _saved_vectors(Path(folder), self.embedder, wanted)
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
            self._rows_by_content = {content_key(_index_text(c)): row for row, c in enumerate(self._chunks)
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
            if held.get(key := content_key(_index_text(self._chunks[row]))) == row:
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

    def generation(self, directory: str | Path) -> str | None:
        """The generation this knowledge base was loaded from or last saved in `directory`, if any."""
        saved = self._saved.get(os.path.realpath(directory))
        return saved["segments"][-1]["generation"] if saved else None

    def holds_saved(self, directory: str | Path) -> bool:
        """Whether `directory` still holds exactly what this knowledge base loaded or last saved there."""
        saved = self._saved.get(os.path.realpath(directory))
        return saved is not None and store.manifest_id(Path(directory)) == saved["manifest"]

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

    def save(self, directory: str | Path, compact: bool = False) -> Path:
        """Write what changed since this knowledge base was loaded from or last saved to `directory`
        as a new delta segment (everything, as one full segment, the first time, when `compact`, when
        the folder already holds MAX_DELTAS deltas or more than MAX_DELTA_ROWS rows and a quarter of
        all in them, or when the folder was emptied), and switch to it atomically; returns its folder
        (the one it holds, with nothing written, when nothing changed). Refused when the folder holds
        a state this knowledge base did not load or save (another writer's, or a knowledge base
        built there since)."""
        with self._writer, self._lock.read():
            key = os.path.realpath(directory)
            saved = self._saved.get(key)
            on_disk = store.manifest_id(Path(directory))
            if saved is not None and on_disk is None:
                saved = None  # the folder was emptied: what it held is gone, so everything is written anew
            rows = len(self._chunks)
            if not compact and saved and on_disk == saved["manifest"] and \
                    (rows, len(self._changed_docs)) == (saved["rows"], saved["changes"]):
                return Path(directory) / saved["segments"][-1]["generation"]
            delta_rows = saved["delta_rows"] + rows - saved["rows"] if saved else 0
            full = compact or saved is None or len(saved["segments"]) > MAX_DELTAS or \
                delta_rows > max(MAX_DELTA_ROWS, rows // 4)
            manifest = {
                "embedder": {"name": self.embedder.name, "dimension": self.embedder.dimension},
                "tokenizer": TOKENIZER_SETTINGS, "graph": self.graph_method,
                "chunking": {"size": self.config.index.chunk_size, "overlap": self.config.index.chunk_overlap},
                "counts": {"documents": len(self._docs), "chunks": len(self), "rows": rows,
                           "graph_nodes": self.graph_size[0], "graph_edges": self.graph_size[1]},
            }
            if full:
                writers = self._full_writers()
            else:
                writers = self._delta_writers(saved)
                manifest.update(delta=True, earlier=saved["segments"])
            expected = {"generation": saved["segments"][-1]["generation"], "manifest": saved["manifest"]} \
                if saved else None
            written, body = store.save_generation(Path(directory), writers, manifest, expected)
            self._remember(key, body, 0 if full else delta_rows)
            return written

    def _remember(self, key: str, manifest: dict, delta_rows: int) -> None:
        """What the folder now holds: its segments, and this knowledge base's rows and changed
        documents at that moment (a later save writes only what came after)."""
        self._saved[key] = {"segments": store.segments(manifest), "rows": len(self._chunks),
                            "changes": len(self._changed_docs), "delta_rows": delta_rows,
                            "manifest": manifest["manifest_sha256"]}
        done = min(saved["changes"] for saved in self._saved.values())  # changes every folder has: forgotten
        del self._changed_docs[:done]
        for saved in self._saved.values():
            saved["changes"] -= done

    def _full_writers(self) -> dict:
        if self._vectors.kind == "dense":
            self._vectors.compact()
        arrays, vocab = self._bm25.to_arrays()
        live = [row for row, chunk in enumerate(self._chunks) if chunk is not None]
        writers = {
            "chunks.jsonl": lambda p: _write_chunks(p, self._chunks, live),
            "documents.json": lambda p: p.write_text(json.dumps(self._docs, ensure_ascii=False), encoding="utf-8"),
            "bm25.npz": lambda p: store.write_npz(p, arrays),
            "vocab.json": lambda p: p.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8"),
            "vectors.npz": lambda p: store.write_npz(p, self._vectors.arrays(live)),
            "graph.json": lambda p: p.write_text(json.dumps(self._graph.to_json(), ensure_ascii=False),
                                                 encoding="utf-8"),
        }
        if self._vectors.kind == "dense" and self._vectors.hnsw is not None:
            writers["hnsw.bin"] = lambda p: self._vectors.hnsw.save_index(str(p))
        return writers

    def _delta_writers(self, saved: dict) -> dict:
        """The files of a delta segment: the rows added since `saved`, and the documents changed since."""
        new = [row for row in range(saved["rows"], len(self._chunks)) if self._chunks[row] is not None]
        changed = dict.fromkeys(self._changed_docs[saved["changes"]:])
        changes = {"documents": {d: self._docs[d] for d in changed if d in self._docs},
                   "removed": [d for d in changed if d not in self._docs]}
        return {
            "chunks.jsonl": lambda p: _write_chunks(p, self._chunks, new),
            "changes.json": lambda p: p.write_text(json.dumps(changes, ensure_ascii=False), encoding="utf-8"),
            "vectors.npz": lambda p: store.write_npz(p, self._vectors.arrays(new)),
            "graph.json": lambda p: p.write_text(json.dumps(self._graph.to_json(set(new)), ensure_ascii=False),
                                                 encoding="utf-8"),
        }

    @classmethod
    def load(cls, directory: str | Path, embedder: Embedder | None = None,
             config: Config | IndexConfig | SearchConfig | None = None, reranker: Reranker | None = None,
             extract_triples=None) -> KnowledgeBase:
        """Open a saved knowledge base; the embedder must match the one it was built with, and the
        config's chunking the one it was chunked with (a SearchConfig or None takes the saved chunking)."""
        directory = Path(directory)
        manifest, folders = store.read_generation(directory)
        built = manifest["embedder"]
        if built["name"] in REMOVED:
            raise ConfigurationError(f"{directory} was built with {REMOVED[built['name']]}; rebuild it with "
                                     f"e5: agentic-rag index PATH --kb NEW_DIR --embedder e5")
        try:
            embedder = embedder or make_embedder(built["name"], built["dimension"])
        except ConfigurationError as exc:  # a name this version does not know: say which folder asked for it
            raise ConfigurationError(f"{directory} was built with embedder {built['name']!r} "
                                     f"({built['dimension']}-dim), which cannot be made here: {exc}") from None
        if (embedder.name, embedder.dimension) != (built["name"], built["dimension"]):
            raise ConfigurationError(
                f"{directory} was built with embedder {built['name']!r} ({built['dimension']}-dim) but "
                f"{embedder.name!r} ({embedder.dimension}-dim) was given; use --embedder {built['name']} "
                f"or rebuild into a new --kb directory")
        config = saved_chunking(config, manifest["chunking"], str(directory),
                                "keep its settings or build a new --kb directory")
        if manifest["tokenizer"] != TOKENIZER_SETTINGS:
            raise RetrievalError(f"{directory} was tokenized with {manifest['tokenizer']}; rebuild it "
                                 f"with this version: agentic-rag index PATH --kb NEW_DIR")
        kb = cls(embedder, config, reranker, extract_triples, manifest.get("graph", "names"))
        kb._restore(folders[0], manifest)  # each file's damage is an error naming it (_integrity)
        for folder, segment in zip(folders[1:], store.segments(manifest)[1:], strict=True):
            kb._apply_delta(folder, segment)
        if len(folders) > 1:
            kb._bm25.merge()
        # rows past the last one a file names were deleted before they were saved: none is allocated, so
        # a manifest's row count (up to MAX_ROWS) costs no memory the files do not account for
        try:
            _check_rows(kb._docs, kb._chunks, manifest["counts"])
        except ValueError as exc:  # no one file says which is damaged: the documents' files and the chunks'
            files = ", ".join(f"{f}/{'changes.json' if i else 'documents.json'}" for i, f in enumerate(folders))
            raise RetrievalError(f"{files} and the chunks.jsonl beside {'each' if len(folders) > 1 else 'it'} "
                                 f"disagree ({exc}); rebuild it into a new folder with: agentic-rag index PATH "
                                 f"--kb NEW_DIR") from None
        delta_rows = manifest["counts"]["rows"] - (kb._base_rows if len(folders) > 1 else manifest["counts"]["rows"])
        kb._remember(os.path.realpath(directory), manifest, delta_rows)
        return kb

    def _restore(self, generation: Path, manifest: dict) -> None:
        """Read the full segment (the manifest's first), each file checked before it is used (_integrity)."""
        first = store.segments(manifest)[0]
        self._base_rows = first["rows"]
        with reading(generation / "chunks.jsonl"):
            held = {}
            for chunk in _saved_chunks(generation):
                row = check_chunk(chunk, 0, first["rows"])
                if held.setdefault(row, chunk) is not chunk:
                    raise ValueError(f"row {row} is there twice")
        self._chunks = [None] * (max(held, default=-1) + 1)  # as many rows as chunks.jsonl names, not more
        for row, chunk in held.items():
            self._chunks[row] = chunk
        rows = len(self._chunks)
        with reading(generation / "documents.json"):
            self._docs = check_documents(json.loads((generation / "documents.json").read_text(encoding="utf-8")))
        with reading(generation / "vocab.json"):
            vocab = check_vocab(json.loads((generation / "vocab.json").read_text(encoding="utf-8")))
        with reading(generation / "bm25.npz"), np.load(generation / "bm25.npz", allow_pickle=False) as saved:
            arrays = dict(saved)
        with reading(f"{generation / 'bm25.npz'} (or the vocab.json or chunks.jsonl beside it)"):
            check_bm25_arrays(arrays, len(vocab), rows)
            self._bm25 = BM25.from_arrays(arrays, vocab, self.config.search.bm25_k1, self.config.search.bm25_b)
            check_bm25(self._bm25, vocab, self._chunks, lambda chunk: tokenize(_index_text(chunk)))
        with reading(generation / "graph.json"):
            graph = json.loads((generation / "graph.json").read_text(encoding="utf-8"))
            check_graph(graph, rows)
            self._graph = KnowledgeGraph.from_json(graph)
        self._vectors = self._new_vector_index()
        hnsw = generation / "hnsw.bin" if "hnsw.bin" in first["files"] else None  # only verified files are read
        live = [row for row, chunk in enumerate(self._chunks) if chunk is not None]
        vectors = generation / ("vectors.npy" if "vectors.npy" in first["files"] else "vectors.npz")
        with reading(vectors):
            arrays = _saved_vector_arrays(generation, live, first["rows"])
        with reading(f"{vectors} (or the chunks.jsonl beside it)"):
            check_vectors(arrays, self.embedder.dimension, live)
        with reading(f"{hnsw} (or the vectors.npz beside it)" if hnsw else generation / "vectors.npz"):
            if hnsw is not None:
                check_hnsw(hnsw, self.embedder.dimension, live, arrays["vectors"])
            self._vectors.add_arrays(arrays, hnsw)

    def _apply_delta(self, segment: Path, saved: dict) -> None:
        """Replay one delta segment (`saved`: its entry in the manifest): documents it replaced or
        removed lose their rows, then its chunks join."""
        with reading(segment / "changes.json"):
            changes = json.loads((segment / "changes.json").read_text(encoding="utf-8"))
            if not isinstance(changes, dict) or not isinstance(changes.get("removed"), list):
                raise ValueError("changes.json is not documents and removed ids")
            check_documents(changes.get("documents"), "its documents")
        for doc_id in [*changes["removed"], *changes["documents"]]:
            if doc_id in self._docs:
                self._delete_rows(self._docs.pop(doc_id)["rows"])
        with reading(segment / "chunks.jsonl"):
            chunks = list(_saved_chunks(segment))
            rows = [check_chunk(chunk, len(self._chunks), saved["rows"]) for chunk in chunks]
            if len(set(rows)) != len(rows):
                raise ValueError("a row is there twice")
        self._chunks.extend([None] * (max(rows, default=-1) + 1 - len(self._chunks)))
        for row, chunk in zip(rows, chunks, strict=True):
            self._chunks[row] = chunk
        self._docs.update(changes["documents"])
        self._bm25.add(rows, [tokenize(_index_text(c)) for c in chunks])
        with reading(segment / "vectors.npz"):
            arrays = _saved_vector_arrays(segment, rows, len(self._chunks))
        with reading(f"{segment / 'vectors.npz'} (or the chunks.jsonl beside it)"):
            check_vectors(arrays, self.embedder.dimension, sorted(rows))
            self._vectors.add_arrays(arrays)
        with reading(segment / "graph.json"):
            graph = json.loads((segment / "graph.json").read_text(encoding="utf-8"))
            check_graph(graph, len(self._chunks))
            self._graph.add_json(graph)


def fusion_of(embedder: Embedder, search: SearchConfig) -> tuple[str, float]:
    """(fusion method, vector weight): the settings' where set, else the embedder's (KnowledgeBase.fusion)."""
    method, weight = getattr(embedder, "fusion", SEMANTIC_FUSION)
    return search.fusion or method, weight if search.vector_weight is None else search.vector_weight


def saved_chunking(config, chunking: dict, where: str, fix: str) -> Config:
    """The settings a saved knowledge base opens with: the given ones (a Config, a layer or None, as
    KnowledgeBase takes them), with its saved chunking (`chunking`, as the manifest has it) when they
    give none (no index layer), or after checking that theirs is the same (else an error)."""
    front = as_config(config)
    if not isinstance(config, (Config, IndexConfig)):
        saved = IndexConfig(chunk_size=chunking["size"], chunk_overlap=chunking["overlap"])
        return Config.from_layers(saved, front.search, front.run)
    if (front.chunk_size, front.chunk_overlap) != (chunking["size"], chunking["overlap"]):
        raise ConfigurationError(f"{where} was chunked with size {chunking['size']} and overlap {chunking['overlap']}, "
                                 f"not {front.chunk_size} and {front.chunk_overlap}; {fix}")
    return front


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


# a save writes one full segment instead of a delta when the folder holds more delta segments than
# MAX_DELTAS, or more rows in them than MAX_DELTA_ROWS and a quarter of all (a load replays them)
MAX_DELTAS, MAX_DELTA_ROWS = 8, 1000


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


def _vector_index(embedder: Embedder, index: IndexConfig, search: SearchConfig) -> VectorIndex:
    """A sparse index for an embedder whose vectors have few non-zero dimensions (`sparse`), else a dense one."""
    if getattr(embedder, "sparse", False):
        return SparseIndex(embedder.dimension)
    return DenseIndex(embedder.dimension, index.hnsw_m, index.hnsw_ef_construction, search.hnsw_ef,
                      index.exact_search_below, index.seed)


def _write_chunks(path: Path, chunks: list, rows: list[int]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(dict(chunks[row], row=row), ensure_ascii=False) + "\n")


def _saved_chunks(generation: Path) -> Iterator[dict]:
    """The live chunks a saved segment holds (chunks.jsonl), each with its row."""
    with (generation / "chunks.jsonl").open(encoding="utf-8", newline="\n") as lines:  # only \n ends a line:
        for line in lines:  # U+2028 and its kind may stand in a chunk's text, written as is
            if line.strip():
                yield json.loads(line)


def _saved_vector_arrays(segment: Path, live: list[int], rows: int) -> dict:
    """A segment's vectors as its index saved them (vectors.npz), or, written by format 2, the
    `live` rows of its float32 matrix of `rows` rows (vectors.npy)."""
    if (segment / "vectors.npz").is_file():
        with np.load(segment / "vectors.npz", allow_pickle=False) as arrays:
            return dict(arrays)
    vectors = np.load(segment / "vectors.npy", mmap_mode="r", allow_pickle=False)
    if len(vectors) != rows:
        raise ValueError(f"vectors.npy has {len(vectors)} rows, expected {rows}")
    return {"rows": np.array(live, np.int64), "vectors": np.asarray(vectors[live], np.float32)}


def _saved_vectors(directory: Path, embedder: Embedder, wanted: set[bytes]) -> dict[bytes, np.ndarray]:
    """content_key -> vector of the wanted texts that a knowledge base saved in `directory` holds, if it
    was built with this embedder (and this tokenizer, for an embedder whose vectors depend on it);
    nothing from a folder that is not a readable knowledge base: reuse only saves time."""
    try:
        manifest, folders = store.read_generation(directory)
        if (manifest["embedder"]["name"], manifest["embedder"]["dimension"]) != (embedder.name, embedder.dimension) \
                or getattr(embedder, "tokenized", False) and manifest["tokenizer"] != TOKENIZER_SETTINGS:
            return {}
        out = {}
        for folder in folders:
            chunks = {chunk["row"]: chunk for chunk in _saved_chunks(folder)}
            rows = [row for row, chunk in chunks.items() if content_key(_index_text(chunk)) in wanted]
            if rows:
                index = _vector_index(embedder, IndexConfig(exact_search_below=1 << 62), SearchConfig())  # no graph
                index.add_arrays(_saved_vector_arrays(folder, sorted(chunks), manifest["counts"]["rows"]))
                for row, vector in zip(rows, index.vectors_of(rows), strict=True):
                    out[content_key(_index_text(chunks[row]))] = vector
        return out
    except (RetrievalError, ConfigurationError, *LOAD_ERRORS):
        return {}


def _check_rows(docs: dict, chunks: list, counts: dict) -> None:
    """Every document's rows hold its live chunks, and the counts agree with the manifest."""
    rows = [row for doc in docs.values() for row in doc["rows"]]
    if any(not 0 <= row < len(chunks) or chunks[row] is None or chunks[row]["doc_id"] != doc_id
           for doc_id, doc in docs.items() for row in doc["rows"]) or len(set(rows)) != len(rows):
        raise ValueError("documents.json names chunks that chunks.jsonl does not hold")
    ids = [chunk["id"] for chunk in chunks if chunk is not None]
    if len(set(ids)) != len(ids):
        raise ValueError("two chunks have the same id")
    if (len(docs), len(rows), sum(c is not None for c in chunks)) != (counts["documents"], counts["chunks"], len(rows)):
        raise ValueError("documents.json, chunks.jsonl and the manifest's counts disagree")
