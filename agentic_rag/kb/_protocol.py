"""What a run, the command line and the service need of a knowledge base: the embedded
KnowledgeBase and PostgresKnowledgeBase both implement it, and so may a backend of your own."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core import Config
from ._hit import Hit
from ._records import AddResult

if TYPE_CHECKING:
    from ._views import RestrictedView
from .embedders import Embedder
from .ingestion import Document


@runtime_checkable
class KnowledgeBaseBackend(Protocol):
    """Documents in (added, replaced by id, deleted; which ids are held), chunks out (hybrid, BM25 or vector search with
    filters; graph search), the term weights the judges use, its size, what it was built with (embedder,
    settings, graph), and how its changes last: saved to a folder, or committed as they are made."""

    # read-only here (a plain attribute satisfies a property), so that a restricted view is one too
    @property
    def config(self) -> Config:
        """The index layer it was chunked with, the search layer its searches take."""
    @property
    def embedder(self) -> Embedder:
        """The one it was built with."""
    @property
    def graph_method(self) -> str:
        """How its graph joins names: "names" (sharing a sentence) or "model:NAME"."""
    @property
    def saves_to_folder(self) -> bool:
        """True: changes last once save(folder) writes them, and a writer holds the folder's lock from
        load to save (the embedded one); False: every change is committed as it is made (a database)."""

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Any = ()) -> AddResult:
        """Index documents; a known id with changed content replaces that document's chunks (AddResult).
        `reuse_from`: saved folders whose vectors may be copied (Any: a backend may take more keywords,
        as KnowledgeBase's embedding_cache, which callers pass by name)."""

    def held_documents(self, doc_ids: Iterable[str], filters: dict | None = None,
                       every_member: bool = False) -> list[str]:
        """Which of these document ids it holds, in the order given, once each; with `filters`, only
        those with a chunk the filters keep (`every_member`: a list value only when each member matches)."""

    def list_documents(self, after: str = "", limit: int = 50, filters: Sequence[dict] = ()) -> list[dict]:
        """A page of the documents held, by id after `after`: {"doc_id", "title", "source", "chunks"}."""

    def document_chunks(self, doc_id: str, filters: Sequence[dict] = ()) -> list[Hit]:
        """A document's chunks in the order it was chunked (those the filters keep)."""

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove documents and their chunks; how many were found."""

    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]:
        """The k best chunks; each hit records its rank in each retriever."""

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """Chunks behind the graph edges near the names in the query."""

    def pagerank_search(self, query: str, k: int = 8, seeds: dict[str, float] | None = None,
                        hops: int = 2) -> list[Hit]:
        """Chunks ranked by personalized PageRank over the graph from the query's names and seed chunks."""

    def term_weights(self, text: str, filters: Sequence[dict] = ()) -> dict[str, float]:
        """BM25 idf of each distinct token of `text` that it holds; with `filters`, among the chunks they keep."""

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query`."""

    def vector_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine similarity of each given chunk's vector to the query's."""

    def restricted(self, filters: dict, scope: bool = False) -> RestrictedView:
        """A view whose searches keep to `filters`; with `scope`, its term weights too."""

    def save(self, directory: str | Path, compact: bool = False) -> Path | None:
        """Make its changes last in `directory` (the folder written), or nothing when they already have (None)."""

    def generation(self, directory: str | Path | None) -> str | None:
        """What it holds, as a name that changes with every saved change: of `directory` when it saves
        to a folder (None if never loaded from or saved there), its own otherwise (`directory` unused)."""

    def close(self) -> None:
        """Release what it holds open (a connection); nothing to do for one that holds nothing."""

    def __len__(self) -> int:
        """Live chunks."""

    @property
    def document_count(self) -> int:
        """Documents held."""

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""

    @property
    def pending_vectors(self) -> int:
        """Chunks held without a vector yet (filled in behind an index); searches rank them by BM25."""

    @property
    def fusion(self) -> tuple[str, float]:
        """Hybrid search's (fusion method, vector weight)."""
