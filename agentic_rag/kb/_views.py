"""A knowledge base seen through filters (KnowledgeBase.restricted): every member a run, the command
line or the service may ask of it is declared here, each either filtered or forwarded as safe (a
setting, a count, a score of chunks the caller names), and a write is refused. Anything else is an
AttributeError naming the fix: nothing passes through unseen."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol

from ..core import Config, ConfigurationError
from ._hit import Hit
from ._search import check_graph_arguments, pagerank_seeds
from .embedders import Embedder
from .indexes import MAX_FILTER_VALUES, check_filters, filter_values, matches
from .ingestion import Document

if TYPE_CHECKING:
    from ._records import AddResult


class Viewed(Protocol):
    """What a view reads of the knowledge base it views (every KnowledgeBaseBackend has it)."""

    @property
    def config(self) -> Config: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def graph_method(self) -> str: ...
    @property
    def saves_to_folder(self) -> bool: ...
    @property
    def fusion(self) -> tuple[str, float]: ...
    @property
    def document_count(self) -> int: ...
    @property
    def graph_size(self) -> tuple[int, int]: ...
    @property
    def pending_vectors(self) -> int: ...
    def __len__(self) -> int: ...
    def generation(self, directory: str | Path | None) -> str | None: ...
    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]: ...
    def vector_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]: ...
    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]: ...
    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]: ...
    def pagerank_search(self, query: str, k: int = 8, seeds: dict[str, float] | None = None,
                        hops: int = 2) -> list[Hit]: ...
    def held_documents(self, doc_ids: Iterable[str], filters: dict | None = None,
                       every_member: bool = False) -> list[str]: ...
    def term_weights(self, text: str, filters: Sequence[dict] = ()) -> dict[str, float]: ...
    def list_documents(self, after: str = "", limit: int = 50, filters: Sequence[dict] = ()) -> list[dict]: ...
    def document_chunks(self, doc_id: str, filters: Sequence[dict] = ()) -> list[Hit]: ...

# what the view forwards as the knowledge base has it, and why that is safe: settings and counts
# say nothing of a chunk's text; scores are of chunk ids the caller already holds (the view's hits)
FORWARDED = {
    "config": "the settings it searches with",
    "embedder": "the embedder it was built with",
    "graph_method": "how its graph joins names",
    "saves_to_folder": "how its changes last",
    "fusion": "hybrid search's fusion settings",
    "document_count": "a count of the whole knowledge base, not of the view",
    "graph_size": "a count of the whole graph, not of the view",
    "pending_vectors": "a count of the whole knowledge base's chunks still without a vector",
    "__len__": "a count of the whole knowledge base, not of the view",
    "generation": "a name of what it holds, which changes with every saved change",
    "bm25_scores": "the BM25 scores of chunk ids the caller names",
    "vector_scores": "the cosine similarities of chunk ids the caller names",
}
FILTERED = ("search", "graph_search", "pagerank_search", "held_documents", "term_weights", "list_documents",
            "document_chunks", "restricted")
REFUSED = ("add_documents", "delete_documents", "save")  # writes: through the knowledge base itself
OFFERED = (*FORWARDED, *FILTERED, *REFUSED, "close")


class RestrictedView:
    """A knowledge base whose searches keep to chunks matching every one of a list of filters
    (KnowledgeBase.restricted). Filters that are a scope (`scopes`: an API key's) keep its term
    weights to their chunks as well. What it offers is OFFERED, no more."""

    def __init__(self, kb: Viewed, filters: list[dict], scopes: list[dict] | None = None) -> None:
        self._kb, self._filters, self._scopes = kb, filters, scopes or []

    def __getattr__(self, name: str) -> NoReturn:
        """Refuse any member not declared here (only reached for those: declared ones are found first)."""
        raise AttributeError(f"a restricted view has no {name!r}: it offers {', '.join(sorted(OFFERED))}; "
                             f"declare {name!r} in agentic_rag/kb/_views.py (filtered, or forwarded as safe) "
                             f"or use the knowledge base itself")

    # -- forwarded as the knowledge base has them (FORWARDED says why each is safe) --------------------

    @property
    def config(self) -> Config:
        """The knowledge base's settings."""
        return self._kb.config

    @property
    def embedder(self) -> Embedder:
        """The embedder the knowledge base was built with."""
        return self._kb.embedder

    @property
    def graph_method(self) -> str:
        """How the knowledge base's graph joins names."""
        return self._kb.graph_method

    @property
    def saves_to_folder(self) -> bool:
        """How the knowledge base's changes last (KnowledgeBaseBackend)."""
        return self._kb.saves_to_folder

    @property
    def fusion(self) -> tuple[str, float]:
        """Hybrid search's (fusion method, vector weight)."""
        return self._kb.fusion

    @property
    def document_count(self) -> int:
        """Documents the whole knowledge base holds (not only those the view keeps)."""
        return self._kb.document_count

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the whole knowledge graph."""
        return self._kb.graph_size

    @property
    def pending_vectors(self) -> int:
        """Chunks of the whole knowledge base still without a vector."""
        return self._kb.pending_vectors

    def __len__(self) -> int:
        return len(self._kb)

    def generation(self, directory: str | Path | None) -> str | None:
        """The knowledge base's generation (KnowledgeBaseBackend.generation)."""
        return self._kb.generation(directory)

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query` (chunks the caller names: the view's hits)."""
        return self._kb.bm25_scores(query, chunk_ids)

    def vector_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine similarity of each given chunk's vector to the query's (chunks the caller names)."""
        return self._kb.vector_scores(query, chunk_ids)

    def close(self) -> None:
        """Nothing to release: the view holds nothing open, and the knowledge base's owner closes it."""

    # -- refused: a view reads ----------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Iterable[str | Path] = ()) -> AddResult:
        """Refused: add to the knowledge base itself."""
        self._refuse("add_documents")

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Refused: delete from the knowledge base itself."""
        self._refuse("delete_documents")

    def save(self, directory: str | Path, compact: bool = False) -> Path | None:
        """Refused: save the knowledge base itself."""
        self._refuse("save")

    @staticmethod
    def _refuse(name: str) -> NoReturn:
        raise ConfigurationError(f"a restricted view only reads; call {name} on the knowledge base itself, "
                                 f"not on kb.restricted(...)")

    # -- filtered -----------------------------------------------------------------------------------

    def restricted(self, filters: dict, scope: bool = False) -> RestrictedView:
        """A view that keeps to these filters as well (as a scope: see KnowledgeBase.restricted)."""
        checked = check_filters(filters)
        return RestrictedView(self._kb, [*self._filters, checked], [*self._scopes, *([checked] if scope else [])])

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

    def term_weights(self, text: str, filters: Sequence[dict] = ()) -> dict[str, float]:
        """As KnowledgeBase.term_weights, among the chunks the view's scopes keep (and `filters`): how
        rare a term is, and whether it is held at all, says nothing of the chunks a scope keeps out.
        A request's own filters narrow searches, not the weights (a question may name what the
        filtered chunks do not hold)."""
        return self._kb.term_weights(text, [*self._scopes, *filters])

    def held_documents(self, doc_ids: Iterable[str], filters: dict | None = None,
                       every_member: bool = False) -> list[str]:
        """As KnowledgeBase.held_documents, keeping to the view's filters and the given ones (to
        which `every_member` applies)."""
        held = list(doc_ids)
        for conditions in self._filters:
            held = self._kb.held_documents(held, conditions)
        return self._kb.held_documents(held, filters, every_member) if filters else held

    def list_documents(self, after: str = "", limit: int = 50, filters: Sequence[dict] = ()) -> list[dict]:
        """As KnowledgeBase.list_documents, counting only the chunks the view's filters keep (and `filters`)."""
        return self._kb.list_documents(after, limit, [*self._filters, *filters])

    def document_chunks(self, doc_id: str, filters: Sequence[dict] = ()) -> list[Hit]:
        """As KnowledgeBase.document_chunks, keeping to the view's filters (and `filters`)."""
        return self._kb.document_chunks(doc_id, [*self._filters, *filters])

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """As KnowledgeBase.graph_search, keeping the hits that match the filters (at most k), each
        path keeping only the names its hit's text or the query holds."""
        check_graph_arguments(k, hops)
        hits = self._kb.graph_search(query, k=k * 4, hops=hops)
        kept = [h for h in hits if all(matches(_fields(h), c) for c in self._filters)][:k]
        # a path's names may come from passages the view keeps out: only those its hit or query says stay
        return [h.model_copy(update={"path": [n for n in h.path if n.casefold() in f"{h.text} {query}".casefold()]})
                for h in kept]

    def pagerank_search(self, query: str, k: int = 8, seeds: dict[str, float] | None = None,
                        hops: int = 2) -> list[Hit]:
        """As KnowledgeBase.pagerank_search, seeded by the view's own search (seeds given are used as
        given), keeping the hits that match the filters (at most k)."""
        check_graph_arguments(k, hops)
        hits = self._kb.pagerank_search(query, k * 4, pagerank_seeds(self, query, seeds), hops)
        return [h for h in hits if all(matches(_fields(h), c) for c in self._filters)][:k]


def _fields(hit: Hit) -> dict:
    """A hit's fields as filters see them."""
    return {**hit.metadata, "doc_id": hit.doc_id, "source": hit.source, "title": hit.title}
