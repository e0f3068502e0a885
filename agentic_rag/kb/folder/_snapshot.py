"""The folder store as the engine reads it (the store port, kb/_port): KnowledgeBase's indexes in
memory (chunks by row, documents, BM25, vectors and the graph), read under its read lock."""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from .._hit import Hit, chunk_hit
from .._port import Fused, Neighbours, Ranked, Snapshot, Store
from ..indexes import chunk_fields, compile_filters, document_page, filter_mask, holds_vector, kept_chunks

if TYPE_CHECKING:
    from ._knowledge_base import KnowledgeBase

T = TypeVar("T")


class FolderStore(Store):
    """A KnowledgeBase's indexes, each read under its read lock (writers wait; searches go on together)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._kb = kb

    def read(self, work: Callable[[Snapshot], T]) -> T:
        """`work` on the indexes as they are, the read lock held."""
        kb = self._kb
        with kb._lock.read():
            return work(IndexSnapshot(kb))

    def delete(self, doc_ids: list[str]) -> int:
        """Drop the documents' rows from every index, the writer's lock and the write lock held; the
        next save writes the change."""
        kb = self._kb
        with kb._writer, kb._lock.write():
            found = [doc_id for doc_id in doc_ids if doc_id in kb._docs]
            for doc_id in found:
                kb._delete_rows(kb._docs.pop(doc_id)["rows"])
            kb._changed_docs += found
            return len(found)


class IndexSnapshot(Snapshot):
    """A KnowledgeBase's indexes while its read lock is held (rows are its chunk list's indexes)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._chunks, self._docs = kb._chunks, kb._docs
        self._bm25, self._vectors, self._graph = kb._bm25, kb._vectors, kb._graph
        self._mask: tuple[dict, np.ndarray] | None = None  # the last filters' mask: a hybrid search asks twice

    def size(self) -> int:
        """Live chunks."""
        return self._bm25.size

    def document_count(self) -> int:
        """Documents held."""
        return len(self._docs)

    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return len(self._graph.adjacent), len(self._graph)

    def embedded_count(self) -> int:
        """Live vectors."""
        return self._vectors.size

    def unembedded(self, rows: list[int]) -> set[int]:
        """The rows the vector index holds no live vector for."""
        return {row for row in rows if not holds_vector(self._vectors, row)}

    def _allowed(self, filters: dict) -> np.ndarray | None:
        """The rows the filters keep, as a mask (None: no filters)."""
        if not filters:
            return None
        if self._mask is None or self._mask[0] is not filters:
            self._mask = (filters, filter_mask(self._chunks, filters))
        return self._mask[1]

    def bm25_top(self, tokens: list[str], k: int, filters: dict) -> Ranked:
        """BM25's pruned top k (indexes/_bm25)."""
        return self._bm25.top(tokens, k, self._allowed(filters))

    def vector_top(self, vector: np.ndarray, k: int, filters: dict) -> Ranked:
        """The vector index's top k: exact, or HNSW when large and unfiltered (indexes/_vectors)."""
        return self._vectors.search(vector, k, self._allowed(filters))

    def hits(self, fused: Fused) -> list[Hit]:
        """The hits of the rows, from the chunk list."""
        return [self._hit(row, score, ranks) for row, score, ranks in fused]

    def _hit(self, row: int, score: float, ranks: dict[str, int]) -> Hit:
        chunk = cast(dict, self._chunks[row])  # a row a search found: live
        return chunk_hit(chunk, score, ranks)

    def idf(self, tokens: list[str], filters: Sequence[dict] = ()) -> dict[str, float]:
        """BM25 idf, over every live row or those every filter keeps."""
        if not filters:
            return self._bm25.idf(tokens)
        allowed = np.logical_and.reduce([filter_mask(self._chunks, f) for f in filters])
        return self._bm25.idf_within(tokens, allowed)

    def row_scores(self, tokens: list[str], rows: list[int]) -> Mapping[int, float]:
        """BM25 scores of the rows (every row scored at once)."""
        scores = self._bm25.scores(tokens)
        return {row: scores[row] for row in rows}

    def rows_of(self, chunk_ids: list[str]) -> dict[str, int]:
        """The live rows of the given chunk ids, in the order given."""
        out = {}
        for chunk_id in chunk_ids:
            for row in self._docs.get(chunk_id.rsplit("#", 1)[0], {}).get("rows", []):
                if cast(dict, self._chunks[row])["id"] == chunk_id:
                    out[chunk_id] = row
        return out

    def bm25_scores(self, tokens: list[str], chunk_ids: list[str]) -> dict[str, float]:
        """BM25 scores of the held chunks among those given."""
        scores = self._bm25.scores(tokens)
        return {chunk_id: float(scores[row]) for chunk_id, row in self.rows_of(chunk_ids).items()}

    def vector_scores(self, vector: np.ndarray, chunk_ids: list[str]) -> dict[str, float]:
        """Dot products (cosine: unit vectors) of the held chunks among those given that have a vector."""
        rows = self.rows_of(chunk_ids)
        waiting = self.unembedded(list(rows.values()))
        rows = {chunk_id: row for chunk_id, row in rows.items() if row not in waiting}
        if not rows:
            return {}
        similar = self._vectors.vectors_of(list(rows.values())) @ vector.astype(np.float32)
        return {chunk_id: float(s) for chunk_id, s in zip(rows, similar, strict=True)}

    def held_documents(self, doc_ids: list[str], filters: dict | None, every_member: bool) -> list[str]:
        """The held ones, with a chunk the filters keep when there are filters (compile_filters)."""
        test = compile_filters(filters, every_member) if filters else None
        return [doc_id for doc_id in doc_ids if doc_id in self._docs and (test is None or any(
            test(chunk_fields(cast(dict, self._chunks[row]))) for row in self._docs[doc_id]["rows"]))]

    def document_page(self, after: str, limit: int, filters: Sequence[dict]) -> list[dict]:
        """The held ones in code-point order with a chunk every filter keeps."""
        return document_page(self._docs, self._chunks, after, limit, filters)

    def document_chunks(self, doc_id: str, filters: Sequence[dict]) -> list[Hit]:
        """Its kept chunks, in row order."""
        rows = self._docs[doc_id]["rows"] if doc_id in self._docs else []
        return [chunk_hit(chunk) for chunk in kept_chunks(self._chunks, rows, filters)]

    def start_nodes(self, query: str) -> dict[str, str]:
        """KnowledgeGraph.find's nodes, with their names."""
        return {key: self._graph.labels[key] for key in self._graph.find(query)}

    def neighbours(self, nodes: list[str]) -> Neighbours:
        """The graph's adjacency (KnowledgeGraph.neighbours)."""
        return self._graph.neighbours(nodes)

    def path_names(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The graph's step names (with a relation, from triples, where there is one)."""
        return self._graph.steps(pairs)

    def rows_naming(self, nodes: list[str]) -> Mapping[str, Collection[int]]:
        """KnowledgeGraph.rows_of."""
        return self._graph.rows_of(nodes)

    def nodes_in(self, rows: list[int]) -> Mapping[int, Collection[str]]:
        """KnowledgeGraph.nodes_of."""
        return self._graph.nodes_of(rows)

    def passages(self, chunk_ids: list[str]) -> dict[str, tuple[int, str]]:
        """Rows and texts of the held chunks among those given."""
        return {c: (row, cast(dict, self._chunks[row])["text"]) for c, row in self.rows_of(chunk_ids).items()}
