"""The PostgreSQL store as the engine reads it (the store port, kb/_port): one read-only REPEATABLE
READ transaction (PostgresKnowledgeBase._read) and the SQL of _search run on its connection."""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .._hit import Hit
from .._port import Fused, Neighbours, Ranked, Snapshot, Store
from ._search import (
    bm25_given,
    bm25_rows,
    hits_of,
    idf_of,
    idf_within,
    neighbours,
    nodes_in,
    path_names,
    rows_naming,
    start_nodes,
    vector_rows,
    where_sql,
)
from ._sql import remove

_C = ' COLLATE "C"'  # code-point order, as Python compares and sorts strings

if TYPE_CHECKING:
    from ...core import Config
    from ..embedders import Embedder
    from ._knowledge_base import PostgresKnowledgeBase

T = TypeVar("T")


class PostgresStore(Store):
    """A PostgresKnowledgeBase's tables, each read in one snapshot on a replica or the primary."""

    def __init__(self, kb: PostgresKnowledgeBase) -> None:
        self._kb = kb

    def read(self, work: Callable[[Snapshot], T]) -> T:
        """`work` in one read-only transaction (a dropped connection is retried once: _read)."""
        kb = self._kb
        return kb._read(lambda db: work(SqlSnapshot(db, kb.config, kb.embedder)))

    def delete(self, doc_ids: list[str]) -> int:
        """The documents' rows removed in one write transaction (_sql.remove)."""
        return self._kb._write(lambda db: remove(db, doc_ids), "the document ids")


class SqlSnapshot(Snapshot):
    """One read-only transaction's connection (rows are ar_chunks.row)."""

    def __init__(self, db: Any, config: Config, embedder: Embedder) -> None:
        self._db, self._config, self._embedder = db, config, embedder

    def size(self) -> int:
        """ar_stats' chunk count."""
        return int(self._db.execute("SELECT n FROM ar_stats").fetchone()[0])

    def document_count(self) -> int:
        """ar_documents' rows."""
        return int(self._db.execute("SELECT count(*) FROM ar_documents").fetchone()[0])

    def graph_size(self) -> tuple[int, int]:
        """Distinct nodes and edges of ar_edges."""
        return self._db.execute(
            "SELECT (SELECT count(*) FROM (SELECT a FROM ar_edges UNION SELECT b FROM ar_edges) n), "
            "(SELECT count(*) FROM (SELECT DISTINCT a, b FROM ar_edges) e)").fetchone()

    def embedded_count(self) -> int:
        """Every chunk: ar_chunks.embedding is NOT NULL, each add embeds before its one transaction."""
        return self.size()

    def unembedded(self, rows: list[int]) -> set[int]:
        """None (see embedded_count)."""
        return set()

    def bm25_top(self, tokens: list[str], k: int, filters: dict) -> Ranked:
        """BM25 in SQL (_search.bm25_rows)."""
        where, arguments = where_sql(filters)
        return bm25_rows(self._db, tokens, k, where, arguments, self._config.search)

    def vector_top(self, vector: np.ndarray, k: int, filters: dict) -> Ranked:
        """Cosine similarity in SQL (_search.vector_rows)."""
        where, arguments = where_sql(filters)
        return vector_rows(self._db, vector, k, where, arguments, bool(filters), self._embedder, self._config)

    def hits(self, fused: Fused) -> list[Hit]:
        """The rows read from ar_chunks."""
        return hits_of(self._db, fused)

    def idf(self, tokens: list[str], filters: Sequence[dict] = ()) -> dict[str, float]:
        """idf from ar_terms, or counted among the chunks every filter keeps."""
        terms = list(dict.fromkeys(tokens))
        if not terms:
            return {}
        if not filters:
            return idf_of(self._db, terms)
        return idf_within(self._db, terms, *_where_all(filters))

    def row_scores(self, tokens: list[str], rows: list[int]) -> Mapping[int, float]:
        """BM25 of the given rows for the stats held now."""
        return bm25_given(self._db, tokens, rows, self._config.search)

    def bm25_scores(self, tokens: list[str], chunk_ids: list[str]) -> dict[str, float]:
        """BM25 of the held chunks among those given (nothing for a query with no token)."""
        terms = list(dict.fromkeys(tokens))
        if not terms or not chunk_ids:
            return {}
        ids = dict(self._db.execute("SELECT row, chunk_id FROM ar_chunks WHERE chunk_id = ANY(%s)",
                                    (list(chunk_ids),)).fetchall())
        scores = bm25_given(self._db, terms, list(ids), self._config.search)
        return {ids[row]: scores.get(row, 0.0) for row in ids}

    def vector_scores(self, vector: np.ndarray, chunk_ids: list[str]) -> dict[str, float]:
        """pgvector's cosine distance, as a similarity, of the held chunks among those given."""
        return {chunk_id: float(s) for chunk_id, s in self._db.execute(
            "SELECT chunk_id, 1 - (embedding <=> %s) FROM ar_chunks WHERE chunk_id = ANY(%s)",
            (vector, list(chunk_ids))).fetchall()}

    def held_documents(self, doc_ids: list[str], filters: dict | None, every_member: bool) -> list[str]:
        """ar_documents' ids among those given, or those with a chunk the filters keep (where_sql)."""
        if filters:
            where, arguments = where_sql(filters, every_member)
            query, values = f"SELECT DISTINCT c.doc_id FROM ar_chunks c WHERE c.doc_id = ANY(%s){where}", \
                [doc_ids, *arguments]
        else:
            query, values = "SELECT id FROM ar_documents WHERE id = ANY(%s)", [doc_ids]
        held = {row[0] for row in self._db.execute(query, values).fetchall()}
        return [doc_id for doc_id in doc_ids if doc_id in held]

    def document_page(self, after: str, limit: int, filters: Sequence[dict]) -> list[dict]:
        """One query over ar_chunks (a document with no chunk is not listed), grouped by document."""
        where, arguments = _where_all(filters)
        return [{"doc_id": doc_id, "title": title, "source": source, "chunks": chunks}
                for doc_id, title, source, chunks in self._db.execute(
                    f"SELECT c.doc_id{_C}, (array_agg(c.title ORDER BY c.row))[1], "
                    f"(array_agg(c.source ORDER BY c.row))[1], count(*) FROM ar_chunks c "
                    f"WHERE c.doc_id{_C} > %s{where} GROUP BY 1 ORDER BY 1 LIMIT %s",
                    [after, *arguments, limit]).fetchall()]

    def document_chunks(self, doc_id: str, filters: Sequence[dict]) -> list[Hit]:
        """The document's kept chunks, by row."""
        where, arguments = _where_all(filters)
        return [Hit(id=c, doc_id=doc_id, source=source, title=title, text=text, score=0.0, metadata=metadata)
                for c, source, title, text, metadata in self._db.execute(
                    f"SELECT chunk_id, source, title, text, metadata FROM ar_chunks c WHERE c.doc_id = %s{where} "
                    f"ORDER BY row", [doc_id, *arguments]).fetchall()]

    def start_nodes(self, query: str) -> dict[str, str]:
        """The nodes the query names, with their names as first written."""
        starts = start_nodes(self._db, query)
        return dict(zip(starts, path_names(self._db, [(None, key) for key in starts]), strict=True))

    def neighbours(self, nodes: list[str]) -> Neighbours:
        """ar_edges from the nodes, one query."""
        return neighbours(self._db, nodes)

    def path_names(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The others' names as first written, one query."""
        return path_names(self._db, list(pairs))

    def rows_naming(self, nodes: list[str]) -> Mapping[str, Collection[int]]:
        """Each node's rows, hubs left out."""
        return rows_naming(self._db, nodes)

    def nodes_in(self, rows: list[int]) -> Mapping[int, Collection[str]]:
        """The nodes each row's edges join."""
        return nodes_in(self._db, rows)

    def passages(self, chunk_ids: list[str]) -> dict[str, tuple[int, str]]:
        """Rows and texts of the held chunks among those given."""
        return {c: (row, text) for c, row, text in self._db.execute(
            "SELECT chunk_id, row, text FROM ar_chunks WHERE chunk_id = ANY(%s)", (list(chunk_ids),)).fetchall()}


def _where_all(filters: Sequence[dict]) -> tuple[str, list]:
    """Conditions on ar_chunks c (AND ...) that every filter holds, with their arguments."""
    where, arguments = "", list[object]()
    for conditions in filters:
        more, values = where_sql(conditions)
        where, arguments = where + more, arguments + values
    return where, arguments
