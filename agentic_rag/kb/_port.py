"""The store port: what the knowledge-base engine (_engine) asks of the place its chunks live. A
Store runs a piece of work on one consistent Snapshot of what it holds (read: the folder store
under its read lock, PostgreSQL in one REPEATABLE READ transaction, the memory store as it is);
a Snapshot answers the retrievers (BM25 and vector top k), the hits of rows, idf, scores of
given chunks, and the graph's nodes, neighbours and names. Rows are a store's own numbers for
its chunks, valid within one snapshot. The stores: folder (kb/folder), PostgreSQL (kb/postgres),
and memory (_memory, the reference the contract suite checks the others against)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

import numpy as np

from ._hit import Hit

Ranked = list[tuple[int, float]]                 # (row, score), best first
Fused = list[tuple[int, float, dict[str, int]]]  # (row, score, rank in each retriever), best first
Neighbours = Mapping[str, Sequence[tuple[str, Collection[int]]]]  # node -> [(other node, rows of the edge)]
T = TypeVar("T")


class Snapshot(ABC):
    """One consistent state of a store: every answer of one read comes from the same state."""

    # -- counts --------------------------------------------------------------------------------------

    @abstractmethod
    def size(self) -> int:
        """Live chunks."""

    @abstractmethod
    def document_count(self) -> int:
        """Documents held."""

    @abstractmethod
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""

    @abstractmethod
    def embedded_count(self) -> int:
        """Live chunks that have their vector (the others wait for one: KnowledgeBase.fill_vectors)."""

    @abstractmethod
    def unembedded(self, rows: list[int]) -> set[int]:
        """Those of the given rows that have no vector yet."""

    # -- retrievers and hits -----------------------------------------------------------------------

    @abstractmethod
    def bm25_top(self, tokens: list[str], k: int, filters: dict) -> Ranked:
        """The k best rows by BM25 for the query's tokens among the rows the (checked) filters keep."""

    @abstractmethod
    def vector_top(self, vector: np.ndarray, k: int, filters: dict) -> Ranked:
        """The k rows whose vectors are nearest the query's (cosine) among the rows the filters keep."""

    @abstractmethod
    def hits(self, fused: Fused) -> list[Hit]:
        """The hits of the given rows, in that order, each with its score and ranks."""

    @abstractmethod
    def idf(self, tokens: list[str], filters: Sequence[dict] = ()) -> dict[str, float]:
        """BM25 idf of each distinct token some chunk holds; with `filters` (each checked, every one
        must hold), counted among the chunks they keep only."""

    @abstractmethod
    def row_scores(self, tokens: list[str], rows: list[int]) -> Mapping[int, float]:
        """The BM25 score of given rows for the query's tokens (a row may be left out: it scores 0)."""

    @abstractmethod
    def bm25_scores(self, tokens: list[str], chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk (by id) for the query's tokens."""

    @abstractmethod
    def vector_scores(self, vector: np.ndarray, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine similarity of each given chunk's (by id) vector to `vector`."""

    @abstractmethod
    def held_documents(self, doc_ids: list[str], filters: dict | None, every_member: bool) -> list[str]:
        """Which of these (distinct) document ids are held, in the order given; with `filters`, only
        those with a chunk the filters keep (`every_member`: a list value only when each member matches)."""

    @abstractmethod
    def document_page(self, after: str, limit: int, filters: Sequence[dict]) -> list[dict]:
        """Up to `limit` held documents after `after` in code-point order of their ids, each with a
        chunk every (checked) filter keeps: {"doc_id", "title", "source", "chunks"}, the title and
        source of its first kept chunk and how many are kept."""

    @abstractmethod
    def document_chunks(self, doc_id: str, filters: Sequence[dict]) -> list[Hit]:
        """The document's chunks that every filter keeps, in the order it was chunked (score 0, no ranks)."""

    # -- the knowledge graph -----------------------------------------------------------------------

    @abstractmethod
    def start_nodes(self, query: str) -> dict[str, str]:
        """The graph's nodes the query names (node key -> name as the graph first wrote it), in the
        order KnowledgeGraph.find gives them."""

    @abstractmethod
    def neighbours(self, nodes: list[str]) -> Neighbours:
        """Each node's neighbours with the rows behind the edge to each (_graph.walk's `neighbours`)."""

    @abstractmethod
    def path_names(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The name each (node, other) step adds to a path, in order (_graph.walk's `steps`)."""

    @abstractmethod
    def rows_naming(self, nodes: list[str]) -> Mapping[str, Collection[int]]:
        """The rows each node's edges hold (_graph.pagerank's `rows_of`)."""

    @abstractmethod
    def nodes_in(self, rows: list[int]) -> Mapping[int, Collection[str]]:
        """The nodes each row's edges join (_graph.pagerank's `nodes_of`)."""

    @abstractmethod
    def passages(self, chunk_ids: list[str]) -> dict[str, tuple[int, str]]:
        """The row and text of each given chunk (by id) that is held."""


class Store(ABC):
    """Where a knowledge base's chunks live, as the engine reads them and deletes from them (adds
    are each store's own: how a batch is embedded and written differs by store)."""

    @abstractmethod
    def read(self, work: Callable[[Snapshot], T]) -> T:
        """`work` run on one consistent snapshot; its result."""

    @abstractmethod
    def delete(self, doc_ids: list[str]) -> int:
        """Remove the (distinct) documents and their chunks as one change, made as the store makes its
        changes (in memory under its write lock, or one committed transaction); how many were held."""
