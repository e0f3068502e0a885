"""The embedded knowledge base's persistence: a folder of segments (one full segment, then delta
segments, each written whole and switched to atomically by the manifest; see _store), read back with
every file checked before it is used (_integrity). KnowledgeBase takes these methods from
SegmentPersistence; everything else it does is in _knowledge_base."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ...core import Config, ConfigurationError, IndexConfig, RetrievalError, SearchConfig
from ...text import TOKENIZER_SETTINGS, tokenize
from .._records import built_embedder, check_built_with, check_tokenizer, index_text
from ..embedders import Embedder, content_key, embedder_trait
from ..indexes import (
    BM25,
    KnowledgeGraph,
    Reranker,
    TripleExtractor,
    check_bm25,
    check_bm25_arrays,
    check_graph,
    check_vocab,
    holds_vector,
    load_vectors,
    saved_arrays,
    vector_index,
    write_npz,
)
from . import _store as store
from ._integrity import LOAD_ERRORS, check_chunk, check_documents, reading

if TYPE_CHECKING:
    import threading

    from ..indexes import VectorIndex
    from ._rwlock import ReadWriteLock

# a save writes one full segment instead of a delta when the folder holds more delta segments than
# MAX_DELTAS, or more rows in them than MAX_DELTA_ROWS and a quarter of all (a load replays them)
MAX_DELTAS, MAX_DELTA_ROWS = 8, 1000


Loaded = TypeVar("Loaded", bound="SegmentPersistence")


class SegmentPersistence:
    """KnowledgeBase's save and load: what changed since the last save goes into a new delta segment,
    everything into one full segment now and then; a load replays them in order."""

    if TYPE_CHECKING:  # what KnowledgeBase holds and gives these methods (_knowledge_base)
        config: Config
        embedder: Embedder
        graph_method: str
        _saved: dict[str, dict]
        _writer: threading.Lock
        _lock: ReadWriteLock
        _chunks: list[dict | None]
        _docs: dict[str, dict]
        _changed_docs: list[str]
        _filled: list[int]
        _bm25: BM25
        _vectors: VectorIndex
        _graph: KnowledgeGraph
        _base_rows: int

        def __init__(self, embedder: Embedder | None = None, config: Config | IndexConfig | SearchConfig | None = None,
                     reranker: Reranker | None = None, extract_triples: TripleExtractor | None = None,
                     graph_method: str | None = None) -> None: ...
        def _new_vector_index(self) -> VectorIndex: ...
        def _delete_rows(self, rows: list[int]) -> None: ...
        def _unembedded(self) -> list[int]: ...

    def generation(self, directory: str | Path | None) -> str | None:
        """The generation this knowledge base was loaded from or last saved in `directory`, if any."""
        if directory is None:
            return None  # it names its generations by folder, so without one it has none
        saved = self._saved.get(os.path.realpath(directory))
        return saved["segments"][-1]["generation"] if saved else None

    def holds_saved(self, directory: str | Path) -> bool:
        """Whether `directory` still holds exactly what this knowledge base loaded or last saved there."""
        saved = self._saved.get(os.path.realpath(directory))
        return saved is not None and store.manifest_id(Path(directory)) == saved["manifest"]

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
                    (rows, len(self._changed_docs), len(self._filled)) == (saved["rows"], saved["changes"],
                                                                           saved["filled"]):
                return Path(directory) / saved["segments"][-1]["generation"]
            delta_rows = saved["delta_rows"] + rows - saved["rows"] if saved else 0
            full = compact or saved is None or len(saved["segments"]) > MAX_DELTAS or \
                delta_rows > max(MAX_DELTA_ROWS, rows // 4)
            manifest: dict[str, Any] = {
                "embedder": {"name": self.embedder.name, "dimension": self.embedder.dimension},
                "tokenizer": TOKENIZER_SETTINGS, "graph": self.graph_method,
                "chunking": {"size": self.config.index.chunk_size, "overlap": self.config.index.chunk_overlap},
                "counts": {"documents": len(self._docs), "chunks": self._bm25.size, "rows": rows,
                           "vectors": self._vectors.size, "graph_nodes": len(self._graph.adjacent),
                           "graph_edges": len(self._graph)},
            }
            if full or saved is None:  # (full when nothing was saved: said twice for the type checker)
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
                            "changes": len(self._changed_docs), "filled": len(self._filled),
                            "delta_rows": delta_rows, "manifest": manifest["manifest_sha256"]}
        done = min(saved["changes"] for saved in self._saved.values())  # changes every folder has: forgotten
        del self._changed_docs[:done]
        for saved in self._saved.values():
            saved["changes"] -= done

    def _full_writers(self) -> dict:
        """The files of a full segment: everything held."""
        arrays, vocab = self._bm25.to_arrays()
        live = [row for row, chunk in enumerate(self._chunks) if chunk is not None]
        embedded = sorted(set(live) - set(self._unembedded()))
        writers = {
            "chunks.jsonl": lambda p: _write_chunks(p, self._chunks, live),
            "documents.json": lambda p: p.write_text(json.dumps(self._docs, ensure_ascii=False), encoding="utf-8"),
            "bm25.npz": lambda p: write_npz(p, arrays),
            "vocab.json": lambda p: p.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8"),
            **self._vectors.files(embedded, whole=True),
            "graph.json": lambda p: p.write_text(json.dumps(self._graph.to_json(), ensure_ascii=False),
                                                 encoding="utf-8"),
        }
        return writers

    def _delta_writers(self, saved: dict) -> dict:
        """The files of a delta segment: the rows added since `saved`, the documents changed since, and
        the vectors of the rows added or filled since (fill_vectors)."""
        new = [row for row in range(saved["rows"], len(self._chunks)) if self._chunks[row] is not None]
        waiting = set(self._unembedded())
        embedded = sorted({row for row in [*new, *self._filled[saved["filled"]:]]
                           if self._chunks[row] is not None and row not in waiting})
        changed = dict.fromkeys(self._changed_docs[saved["changes"]:])
        changes = {"documents": {d: self._docs[d] for d in changed if d in self._docs},
                   "removed": [d for d in changed if d not in self._docs]}
        return {
            "chunks.jsonl": lambda p: _write_chunks(p, self._chunks, new),
            "changes.json": lambda p: p.write_text(json.dumps(changes, ensure_ascii=False), encoding="utf-8"),
            **self._vectors.files(embedded, whole=False),
            "graph.json": lambda p: p.write_text(json.dumps(self._graph.to_json(set(new)), ensure_ascii=False),
                                                 encoding="utf-8"),
        }

    @classmethod
    def load(cls: type[Loaded], directory: str | Path, embedder: Embedder | None = None,
             config: Config | IndexConfig | SearchConfig | None = None, reranker: Reranker | None = None,
             extract_triples: TripleExtractor | None = None) -> Loaded:
        """Open a saved knowledge base; the embedder must match the one it was built with, and the
        config's chunking the one it was chunked with (a SearchConfig or None takes the saved chunking)."""
        directory = Path(directory)
        manifest, folders = store.read_generation(directory)
        embedder, config = check_built_with(str(directory), manifest, embedder, config, "NEW_DIR")
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
        # a manifest written before vectors were counted says nothing of them
        if manifest["counts"].get("vectors", kb._vectors.size) != kb._vectors.size:
            raise RetrievalError(f"the vectors.npz files of {directory} hold {kb._vectors.size} vectors, its manifest "
                                 f"{manifest['counts']['vectors']}; rebuild it into a new folder with: agentic-rag "
                                 f"index PATH --kb NEW_DIR")
        delta_rows = manifest["counts"]["rows"] - (kb._base_rows if len(folders) > 1 else manifest["counts"]["rows"])
        kb._remember(os.path.realpath(directory), manifest, delta_rows)
        return kb

    def _restore(self, generation: Path, manifest: dict) -> None:
        """Read the full segment (the manifest's first), each file checked before it is used (_integrity)."""
        first = store.segments(manifest)[0]
        self._base_rows = first["rows"]
        with reading(generation / "chunks.jsonl"):
            held: dict[int, dict] = {}
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
            check_bm25(self._bm25, vocab, self._chunks, lambda chunk: tokenize(index_text(chunk)))
        with reading(generation / "graph.json"):
            graph = json.loads((generation / "graph.json").read_text(encoding="utf-8"))
            check_graph(graph, rows)
            self._graph = KnowledgeGraph.from_json(graph)
        self._vectors = self._new_vector_index()
        live = [row for row, chunk in enumerate(self._chunks) if chunk is not None]
        load_vectors(self._vectors, generation, first["files"], live, first["rows"], reading)  # verified files only

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
        self._bm25.add(rows, [tokenize(index_text(c)) for c in chunks])
        waiting = sorted(set(rows) | set(self._unembedded()))  # its own rows, and earlier ones it may have filled
        load_vectors(self._vectors, segment, saved["files"], waiting, len(self._chunks), reading)
        with reading(segment / "graph.json"):
            graph = json.loads((segment / "graph.json").read_text(encoding="utf-8"))
            check_graph(graph, len(self._chunks))
            self._graph.add_json(graph)


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


def saved_vectors(directory: Path, embedder: Embedder, wanted: set[bytes]) -> dict[bytes, np.ndarray]:
    """content_key -> vector of the wanted texts that a knowledge base saved in `directory` holds, if it
    was built with this embedder (and this tokenizer, for an embedder whose vectors depend on it);
    nothing from a folder that is not a readable knowledge base: reuse only saves time."""
    try:
        manifest, folders = store.read_generation(directory)
        built_embedder(str(directory), manifest, embedder, "NEW_DIR")  # another embedder's: an error, caught
        if embedder_trait(embedder, "tokenized"):
            check_tokenizer(str(directory), manifest, "NEW_DIR")
        out = {}
        for folder in folders:
            chunks = {chunk["row"]: chunk for chunk in _saved_chunks(folder)}
            rows = [row for row, chunk in chunks.items() if content_key(index_text(chunk)) in wanted]
            if rows:
                index = vector_index(embedder.dimension, embedder_trait(embedder, "sparse"),  # exact: no graph
                                     IndexConfig(exact_search_below=1 << 62), SearchConfig())
                index.add_arrays(saved_arrays(folder, sorted(chunks), manifest["counts"]["rows"]))
                rows = [row for row in rows if holds_vector(index, row)]  # not one waiting for its vector
                for row, vector in zip(rows, index.vectors_of(rows), strict=True):
                    out[content_key(index_text(chunks[row]))] = vector
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
