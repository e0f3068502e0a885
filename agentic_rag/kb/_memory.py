"""The memory store: the store port (_port) in the plainest code that answers it, every answer
worked out from the chunks by brute force (BM25 summed over each row's tokens, cosine against
every vector), and MemoryKnowledgeBase, the engine over it with the simplest writes. Nothing it
holds lasts past the process. It is the reference the contract suite (tests/test_backend_contract.py)
checks the folder and PostgreSQL stores against, and a knowledge base for tests: one thread at a
time (it takes no lock)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..core import Config, ConfigurationError, IndexConfig, SearchConfig, as_config
from ..text import tokenize
from ._engine import Engine
from ._hit import Hit, chunk_hit
from ._port import Fused, Neighbours, Ranked, Snapshot, Store
from ._records import AddResult, chunk_records, index_text
from .embedders import Embedder, embed_batches, make_embedder
from .indexes import (
    KnowledgeGraph,
    LexicalReranker,
    Reranker,
    bm25_idf,
    chunk_fields,
    compile_filters,
    document_page,
    kept_chunks,
)
from .ingestion import Document

T = TypeVar("T")


class MemoryStore(Store):
    """Chunks by row (None once deleted) with their tokens and vectors, documents, and the graph."""

    def __init__(self, search: SearchConfig) -> None:
        self.search = search
        self.chunks: list[dict | None] = []
        self.tokens: list[list[str]] = []
        self.vectors: list[np.ndarray] = []
        self.docs: dict[str, dict] = {}  # doc id -> {"hash", "rows"}
        self.graph = KnowledgeGraph()
        self.changes = 0                 # writes that changed something: its generation

    def read(self, work: Callable[[Snapshot], T]) -> T:
        """`work` on what it holds (one thread at a time is the caller's business: it takes no lock)."""
        return work(MemorySnapshot(self))

    def put(self, doc_id: str, content_hash: str, chunks: list[dict], vectors: np.ndarray) -> None:
        """Hold a document's chunks (it holds no chunk of that id: delete first) under new rows."""
        rows = list(range(len(self.chunks), len(self.chunks) + len(chunks)))
        self.docs[doc_id] = {"hash": content_hash, "rows": rows}
        for row, chunk, vector in zip(rows, chunks, vectors, strict=True):
            self.chunks.append(chunk)
            self.tokens.append(tokenize(index_text(chunk)))
            self.vectors.append(vector)
            self.graph.add(row, chunk["title"], chunk["text"])
        self.changes += 1

    def delete(self, doc_ids: list[str]) -> int:
        """Drop documents and their chunks; how many were held."""
        found = [doc_id for doc_id in dict.fromkeys(doc_ids) if doc_id in self.docs]
        for doc_id in found:
            rows = self.docs.pop(doc_id)["rows"]
            self.graph.delete(set(rows))
            for row in rows:
                self.chunks[row] = None
        self.changes += bool(found)
        return len(found)


class MemorySnapshot(Snapshot):
    """A MemoryStore as it is (rows are its chunk list's indexes)."""

    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    def _live(self, filters: Sequence[dict] = ()) -> list[int]:
        """The live rows every filter keeps."""
        tests = [compile_filters(f) for f in filters if f]
        return [row for row, chunk in enumerate(self._s.chunks)
                if chunk is not None and all(test(chunk_fields(chunk)) for test in tests)]

    def size(self) -> int:
        """Live chunks."""
        return len(self._live())

    def document_count(self) -> int:
        """Documents held."""
        return len(self._s.docs)

    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return len(self._s.graph.adjacent), len(self._s.graph)

    def embedded_count(self) -> int:
        """Every live chunk: its add embeds it."""
        return self.size()

    def unembedded(self, rows: list[int]) -> set[int]:
        """None: every chunk is added with its vector."""
        return set()

    def _bm25(self, tokens: list[str], rows: list[int]) -> dict[int, float]:
        """BM25 (Lucene's, the settings' k1 and b) of each given row holding a query term, by brute force."""
        live = self._live()
        average = sum(len(self._s.tokens[row]) for row in live) / max(len(live), 1)
        idf = self.idf(tokens)
        k1, b = self._s.search.bm25_k1, self._s.search.bm25_b
        out = {}
        for row in rows:
            counts, length = Counter(self._s.tokens[row]), len(self._s.tokens[row])
            score = sum(weight * counts[term] * (k1 + 1) / (counts[term] + k1 * (1 - b + b * length / average))
                        for term, weight in idf.items() if counts[term])
            if score:
                out[row] = float(score)
        return out

    def bm25_top(self, tokens: list[str], k: int, filters: dict) -> Ranked:
        """Every kept row scored; the k best above zero (ties: lower row first)."""
        scores = self._bm25(tokens, self._live([filters]))
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]

    def vector_top(self, vector: np.ndarray, k: int, filters: dict) -> Ranked:
        """Every kept row's cosine similarity; the k best (ties: lower row first)."""
        query = vector.astype(np.float32)
        scores = [(row, float(self._s.vectors[row] @ query)) for row in self._live([filters])]
        return sorted(scores, key=lambda item: (-item[1], item[0]))[:k]

    def hits(self, fused: Fused) -> list[Hit]:
        """The hits of the rows."""
        out = []
        for row, score, ranks in fused:
            chunk = self._s.chunks[row]
            assert chunk is not None  # a row a search found is live
            out.append(chunk_hit(chunk, score, ranks))
        return out

    def idf(self, tokens: list[str], filters: Sequence[dict] = ()) -> dict[str, float]:
        """N and df counted over the live rows every filter keeps; a term none of them holds is left out."""
        rows = self._live(filters)
        held = [set(self._s.tokens[row]) for row in rows]
        df = {term: sum(term in terms for terms in held) for term in dict.fromkeys(tokens)}
        return {term: float(bm25_idf(len(rows), n)) for term, n in df.items() if n}

    def row_scores(self, tokens: list[str], rows: list[int]) -> Mapping[int, float]:
        """BM25 of the given rows."""
        return self._bm25(tokens, rows)

    def _rows_of(self, chunk_ids: list[str]) -> dict[str, int]:
        """The live rows of the given chunk ids."""
        rows = {chunk["id"]: row for row, chunk in enumerate(self._s.chunks) if chunk is not None}
        return {c: rows[c] for c in chunk_ids if c in rows}

    def bm25_scores(self, tokens: list[str], chunk_ids: list[str]) -> dict[str, float]:
        """BM25 of the held chunks among those given (0 for one holding no query term)."""
        rows = self._rows_of(chunk_ids)
        scores = self._bm25(tokens, list(rows.values()))
        return {c: scores.get(row, 0.0) for c, row in rows.items()}

    def vector_scores(self, vector: np.ndarray, chunk_ids: list[str]) -> dict[str, float]:
        """Cosine similarities of the held chunks among those given."""
        query = vector.astype(np.float32)
        return {c: float(self._s.vectors[row] @ query) for c, row in self._rows_of(chunk_ids).items()}

    def held_documents(self, doc_ids: list[str], filters: dict | None, every_member: bool) -> list[str]:
        """The held ones, with a chunk the filters keep when there are filters."""
        test = compile_filters(filters, every_member) if filters else None
        return [d for d in doc_ids if d in self._s.docs and (test is None or any(
            test(chunk_fields(chunk)) for row in self._s.docs[d]["rows"] if (chunk := self._s.chunks[row])))]

    def document_page(self, after: str, limit: int, filters: Sequence[dict]) -> list[dict]:
        """The held ones in code-point order with a chunk every filter keeps."""
        return document_page(self._s.docs, self._s.chunks, after, limit, filters)

    def document_chunks(self, doc_id: str, filters: Sequence[dict]) -> list[Hit]:
        """Its kept chunks, in row order."""
        rows = self._s.docs[doc_id]["rows"] if doc_id in self._s.docs else []
        return [chunk_hit(chunk) for chunk in kept_chunks(self._s.chunks, rows, filters)]

    def start_nodes(self, query: str) -> dict[str, str]:
        """The graph's nodes the query names."""
        return {key: self._s.graph.labels[key] for key in self._s.graph.find(query)}

    def neighbours(self, nodes: list[str]) -> Neighbours:
        """The graph's adjacency."""
        return self._s.graph.neighbours(nodes)

    def path_names(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The graph's step names."""
        return self._s.graph.steps(pairs)

    def rows_naming(self, nodes: list[str]) -> Mapping[str, Collection[int]]:
        """The rows each node's edges hold."""
        return self._s.graph.rows_of(nodes)

    def nodes_in(self, rows: list[int]) -> Mapping[int, Collection[str]]:
        """The nodes each row's edges join."""
        return self._s.graph.nodes_of(rows)

    def passages(self, chunk_ids: list[str]) -> dict[str, tuple[int, str]]:
        """Rows and texts of the held chunks among those given."""
        return {c: (row, (self._s.chunks[row] or {})["text"]) for c, row in self._rows_of(chunk_ids).items()}


class MemoryKnowledgeBase(Engine):
    """A knowledge base held in memory only: the engine over a MemoryStore (for tests, and the
    reference of what a store must answer). One thread at a time; nothing lasts past the process."""

    saves_to_folder = False  # nothing to save: its changes last as long as the process

    def __init__(self, embedder: Embedder | None = None, config: Config | IndexConfig | SearchConfig | None = None,
                 reranker: Reranker | None = None) -> None:
        self.config = as_config(config)
        self.embedder = embedder or make_embedder("hashing")
        self.reranker = reranker or LexicalReranker()
        self.graph_method = "names"
        self.store: MemoryStore = MemoryStore(self.config.search)

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Iterable[str | Path] = ()) -> AddResult:
        """Index documents; a known id with changed content replaces that document's chunks."""
        if [reuse_from] if isinstance(reuse_from, (str, Path)) else list(reuse_from):
            raise ConfigurationError("the memory store cannot reuse vectors from a saved folder (reuse_from)")
        latest = {doc.id: doc for doc in documents}
        todo = [d for d in latest.values() if self.store.docs.get(d.id, {}).get("hash") != d.content_hash()]
        result = AddResult(unchanged=len(latest) - len(todo))
        result.replaced = self.store.delete([d.id for d in todo])
        result.added = len(todo) - result.replaced
        for doc in todo:
            chunks = list(chunk_records([doc], self.config.index))
            vectors = [batch for _, batch in embed_batches(self.embedder, [index_text(c) for c in chunks], False)]
            self.store.put(doc.id, doc.content_hash(), chunks,
                           np.concatenate(vectors) if vectors else np.zeros((0, self.embedder.dimension), np.float32))
            result.chunks += len(chunks)
        return result

    def generation(self, directory: str | Path | None = None) -> str:
        """A counter every write that changes something moves on (`directory` unused)."""
        return f"memory-{self.store.changes:06d}"

    def save(self, directory: str | Path, compact: bool = False) -> None:
        """Nothing to do: it keeps nothing beyond the process."""

    def close(self) -> None:
        """Nothing to release."""
