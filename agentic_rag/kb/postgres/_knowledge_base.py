"""A knowledge base in PostgreSQL with pgvector, behind the same interface as the embedded one.

    kb = PostgresKnowledgeBase("postgresql://user@host/db")          # the schema is made if missing
    kb.add_documents(documents); kb.search("query", k=5, filters={...})

Tables (prefix `ar_`): meta (schema version, embedder, tokenizer, chunking, generation), documents,
chunks (text, title, source, JSONB metadata, token length, the vector), postings (term, chunk, tf,
over the same CJK-aware tokens as the embedded index), stats (chunk count and total length) and
edges (the knowledge graph). BM25 is computed in SQL with the embedded index's formula, k1 and b
(not ts_rank). Vectors: an HNSW index (cosine) where pgvector allows one (at most 2,000
dimensions: e5's 384 yes, the hashing embedder's 2,048 no: those are searched by an exact scan); a
filtered vector search always scans exactly the rows the filter keeps, so it returns k hits however
few rows pass (pgvector 0.6 has no iterative index scans), and so does any search of fewer than
exact_search_below rows. Search (plan, fusion, rerank) and graph ranking are the embedded knowledge
base's own code (kb/_search, _graph.walk); only the retrievers are SQL (postgres/_search). An option
pgvector cannot honour (a seed, reuse_from) is refused when set, not ignored.

This module is the class: its connections, the schema's checks and migrations, one transaction
per read or write, and the interface; the schema's text and the writes' SQL are in _sql,
the error messages in _errors. Every write is one transaction: readers never see half a
document, a crash mid-batch leaves nothing of it, and writers from several processes or hosts
serialise on the stats row. A dropped connection is a ConnectionLost (a RetrievalError) saying so; a read, and a write
that had not reached its commit, are retried once on a new connection.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ...core._config import Config, IndexConfig, SearchConfig, as_config
from ...core._errors import ConfigurationError, ConnectionLost, RetrievalError
from ...text._tokenize import tokenize
from .._hit import Hit
from .._records import ADD_BATCH, AddResult, batches, check_built_with, chunk_records
from .._search import Retrievers, check_graph_arguments, fusion_of, pagerank_seeds, search_with
from .._views import RestrictedView
from ..embedders._embedders import Embedder, EmbedProgress, embed_query, embedder_trait, make_embedder
from ..indexes._filters import check_filters
from ..indexes._rerank import LexicalReranker, Reranker
from ..ingestion._documents import Document
from ._connections import Busy, NoConnection, Servers, split_url
from ._errors import data_error, first_line, foreign_schema, no_right, safe_url
from ._search import (
    bm25_given,
    bm25_rows,
    graph_hits,
    hits_of,
    idf_of,
    idf_within,
    pagerank_hits,
    vector_rows,
    where_sql,
)
from ._sql import (
    check_index_settings,
    copy_batch,
    create_schema,
    hnsw_index,
    indexed,
    make_bound_index,
    meta_problem,
    remove,
    to_schema_3,
)

SCHEMA_VERSION = 3
# version -> the function (given a connection in a transaction, the embedder and the settings)
# that brings version - 1 up to it
MIGRATIONS: dict = {
    # 2: PageRank search reads the names of given rows (nodes_in), which needs edges by row
    2: lambda db, embedder, config: db.execute("CREATE INDEX IF NOT EXISTS ar_edges_row ON ar_edges (row)"),
    # 3: BM25 and sparse vectors are searched by a pruned top k, which reads postings in bound order
    3: to_schema_3,
}
BULK_ROWS = 5_000  # a batch this large (and larger than the rows held) rebuilds the HNSW index after it


def _psycopg():
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the pools of connections, _connections)
        from pgvector.psycopg import register_vector
    except ImportError:
        raise ConfigurationError("a PostgreSQL knowledge base needs the postgres extra: "
                                 "pip install 'agentic-rag[postgres]'") from None
    return psycopg, register_vector


class PostgresKnowledgeBase:
    """The knowledge base in PostgreSQL: the embedded KnowledgeBase's interface (add, replace and
    delete documents; hybrid, BM25 and vector search with filters; graph search; term weights),
    safe to use from several threads, processes and hosts at once."""
    saves_to_folder = False  # every write is committed as it is made (KnowledgeBaseBackend)

    def __init__(self, url: str, embedder: Embedder | None = None,
                 config: Config | IndexConfig | SearchConfig | None = None, reranker: Reranker | None = None):
        self._psycopg, self._register = _psycopg()
        self.url, options = split_url(url)  # the primary's URL; read replicas and pool settings ride in it
        self.config = as_config(config)  # a layer alone: the others take their defaults
        check_index_settings(self.config.index)
        self.reranker = reranker or LexicalReranker()
        try:
            first = self._psycopg.connect(self.url, autocommit=False)
        except (self._psycopg.OperationalError, self._psycopg.ProgrammingError) as exc:
            raise RetrievalError(f"cannot connect to {safe_url(self.url)}: {first_line(exc)}") from None
        with first as db:
            try:
                meta = self._meta(db)
                if meta is None:
                    self.embedder = embedder or make_embedder("hashing")
                    create_schema(db, self.embedder, self.config, SCHEMA_VERSION)
                else:
                    self.embedder = self._check(db, meta, embedder, config)
            except self._psycopg.errors.InsufficientPrivilege as exc:
                raise no_right(self.url, exc, "create or read") from None
            self._servers = Servers(self.url, options, self._configure)
            self._servers.wrote(db)  # the schema as made or migrated: replicas serve once they have it
        self.graph_method = "names"

    # -- connections and the schema ----------------------------------------------------------------

    def _configure(self, db) -> None:
        """A new pooled connection: pgvector's type registered, left idle."""
        self._register(db)
        db.commit()

    def _meta(self, db) -> dict | None:
        exists = db.execute("SELECT to_regclass('ar_meta') IS NOT NULL").fetchone()[0]
        try:
            meta = dict(db.execute("SELECT key, value FROM ar_meta").fetchall()) if exists else {}
        except (self._psycopg.errors.UndefinedColumn, self._psycopg.errors.UndefinedFunction):
            db.rollback()
            raise foreign_schema(self.url, "its table ar_meta has other columns") from None
        db.commit()
        return meta or None

    def _check(self, db, meta: dict, embedder: Embedder | None, config) -> Embedder:
        """The embedder the database was built with; a newer schema or other settings are clear errors."""
        version = meta.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise foreign_schema(self.url, f"schema_version is {version!r}")
        if version > SCHEMA_VERSION:
            raise RetrievalError(f"{safe_url(self.url)} holds knowledge-base schema {version!r}; this agentic-rag "
                                 f"reads schema {SCHEMA_VERSION} and older: upgrade agentic-rag")
        missing = meta_problem(meta)
        if missing:
            raise foreign_schema(self.url, missing)
        embedder, self.config = check_built_with(safe_url(self.url), meta, embedder, config, "NEW_DATABASE_URL")
        if version < SCHEMA_VERSION:
            self._migrate(db, embedder)
        return embedder

    def _migrate(self, db, embedder: Embedder) -> None:
        """Bring an older schema up to this version, one step at a time, in one transaction."""
        import psycopg

        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(8711)")
            found = db.execute("SELECT value FROM ar_meta WHERE key = 'schema_version' FOR UPDATE").fetchone()[0]
            for step in range(found + 1, SCHEMA_VERSION + 1):
                try:
                    MIGRATIONS[step](db, embedder, self.config)
                except psycopg.errors.UndefinedTable as exc:  # a table the schema must have is gone
                    raise foreign_schema(self.url, first_line(exc)) from None
            db.execute("UPDATE ar_meta SET value = %s WHERE key = 'schema_version'", (json.dumps(SCHEMA_VERSION),))

    @contextmanager
    def _refusals(self, given: str, doing: str) -> Iterator[None]:
        """A statement PostgreSQL refuses, as one line: a value its text cannot hold (a NUL character in
        `given`), a right the role lacks for `doing`, or an ar_ table dropped or altered after the schema
        was checked (a missing table or column, or one of another type: no operator for it)."""
        errors = self._psycopg.errors
        try:
            yield
        except self._psycopg.DataError as exc:
            raise data_error(exc, given) from None
        except errors.InsufficientPrivilege as exc:
            raise no_right(self.url, exc, doing) from None
        except (errors.UndefinedTable, errors.UndefinedColumn, errors.UndefinedFunction) as exc:
            raise foreign_schema(self.url, first_line(exc)) from None

    def _read(self, work, given: str = "the query, the filters and the document ids"):
        """Run `work(connection)` in one read-only snapshot (REPEATABLE READ: every statement of a
        search sees the same committed state, never one writer's change between two of them), on a
        read replica where one can serve it (Servers.reader); a dropped connection is retried once."""
        for attempt in (1, 2):
            try:
                with self._servers.reader() as db, self._refusals(given, "read"), db.transaction():
                    db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    return work(db)
            except NoConnection as exc:
                raise self._unreachable(exc, writing=False) from None
            except self._psycopg.OperationalError as exc:
                if attempt == 2:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped: {first_line(exc)}; "
                                         f"check the server and retry") from None

    def _write(self, work, given: str = "the documents (text, titles, metadata, ids)"):
        """Run `work(connection)` in one write transaction on the primary, serialised with every other
        writer on the stats row. A connection that dropped before the commit is retried once (nothing
        was written); one that dropped during the commit is reported: the write may or may not have
        been saved. A value PostgreSQL cannot hold is an error naming where it came from (`given`)."""
        for attempt in (1, 2):
            committing = False
            try:
                with self._servers.primary() as db:
                    with self._refusals(given, "write"), db.transaction():
                        db.execute("SELECT n FROM ar_stats WHERE id = 1 FOR UPDATE")  # one writer at a time
                        result = work(db)
                        if result != 0:  # a write that changed nothing (a delete of unknown ids) keeps the generation
                            db.execute("UPDATE ar_stats SET generation = generation + 1 WHERE id = 1")
                        committing = True
                    self._servers.wrote(db)
                return result
            except NoConnection as exc:
                raise self._unreachable(exc, writing=True) from None
            except self._psycopg.OperationalError as exc:
                if committing:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped during a write's commit: "
                                         f"{first_line(exc)}; it may or may not have been saved: check, then "
                                         f"retry") from None
                if attempt == 2:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped during a write, before "
                                         f"its commit: {first_line(exc)}; nothing of it was written: check the "
                                         f"server and retry") from None

    def _unreachable(self, exc: NoConnection, writing: bool) -> ConnectionLost:
        """No connection to the primary within the pool's timeout: it was reached before, and may come back
        (or every connection stayed busy: Busy says so)."""
        nothing = "nothing of the write was written: " if writing else ""
        if isinstance(exc, Busy):
            return ConnectionLost(f"{exc}; {nothing}raise pool_size or pool_timeout in the URL, or retry")
        return ConnectionLost(f"cannot connect to {safe_url(self.url)} again (the connection was lost): "
                              f"{first_line(exc)}; {nothing}check the server and retry")

    # -- writes ------------------------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], progress: bool = False, reuse_from=()) -> AddResult:
        """Index documents in one transaction; a known id with changed content replaces its chunks.
        Chunks are embedded and written ADD_BATCH at a time, so the add's memory is bounded by a batch."""
        if [reuse_from] if isinstance(reuse_from, (str, Path)) else list(reuse_from):
            raise ConfigurationError("PostgreSQL cannot reuse vectors from a saved folder (reuse_from); "
                                     "add without it: every chunk is embedded")
        latest = {doc.id: doc for doc in documents}
        hashes = self._read(lambda db: dict(db.execute("SELECT id, hash FROM ar_documents WHERE id = ANY(%s)",
                                                       (list(latest),)).fetchall()), "the documents' ids")
        todo = [d for d in latest.values() if hashes.get(d.id) != d.content_hash()]
        total = sum(1 for _ in chunk_records(todo, self.config.index))  # decides the index rebuild, before any write

        def write(db) -> AddResult:
            result = AddResult(unchanged=len(latest) - len(todo), chunks=total)
            # which ids exist is read again under the writers' lock: another writer may have added one since
            replaced = [r[0] for r in db.execute("SELECT id FROM ar_documents WHERE id = ANY(%s)",
                                                 ([d.id for d in todo],)).fetchall()]
            result.replaced, result.added = len(replaced), len(todo) - len(replaced)
            remove(db, replaced)
            held = db.execute("SELECT n FROM ar_stats").fetchone()[0]
            rebuild = total >= max(BULK_ROWS, held)
            if rebuild:  # an index is built over many rows far faster than rows are inserted into it one by one
                db.execute("DROP INDEX IF EXISTS ar_chunks_hnsw")
                db.execute("DROP INDEX IF EXISTS ar_postings_bound")
            with db.cursor() as cursor:
                cursor.executemany("INSERT INTO ar_documents VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET "
                                   "hash = EXCLUDED.hash", [(d.id, d.content_hash()) for d in todo])
                shown = EmbedProgress(total) if progress and total > embedder_trait(self.embedder, "batch_size") \
                    else False
                length = sum(copy_batch(cursor, batch, self.embedder, shown)
                             for batch in batches(chunk_records(todo, self.config.index), ADD_BATCH))
                if isinstance(shown, EmbedProgress):
                    shown.close()
                cursor.execute("UPDATE ar_stats SET n = n + %s, total_length = total_length + %s WHERE id = 1",
                               (total, length))
            if rebuild:  # the bounds are kept for the average length now, which keeps them tight
                if indexed(self.embedder):
                    db.execute(hnsw_index(self.config.index))
                make_bound_index(db, self.config.search)
            return result

        if not todo:
            return AddResult(unchanged=len(latest))
        result = self._write(write)
        if total >= BULK_ROWS:
            self._vacuum()
        return result

    def _vacuum(self) -> None:
        """VACUUM (ANALYZE) the tables a bulk add filled, on a connection of its own (VACUUM runs outside
        any transaction): the visibility map lets the pruned top k read its index alone, and the
        planner's statistics follow the new sizes. Autovacuum comes to it later if this fails: a warning."""
        try:
            with self._psycopg.connect(self.url, autocommit=True) as db:
                db.execute("VACUUM (ANALYZE) ar_postings, ar_sparse, ar_chunks")
        except self._psycopg.Error as exc:
            logging.getLogger(__name__).warning("could not VACUUM %s after a bulk add (%s): searches are slower "
                                                "until autovacuum does", safe_url(self.url), first_line(exc))

    def held_documents(self, doc_ids: Iterable[str], filters: dict | None = None,
                       every_member: bool = False) -> list[str]:
        """Which of these document ids the knowledge base holds, in the order given, once each; with
        `filters`, only those with a chunk the filters keep (with `every_member`, a list value only
        when each of its members matches: where_sql)."""
        wanted = list(dict.fromkeys(doc_ids))
        if filters:
            where, arguments = where_sql(check_filters(filters), every_member)
            query, values = f"SELECT DISTINCT c.doc_id FROM ar_chunks c WHERE c.doc_id = ANY(%s){where}", \
                [wanted, *arguments]
        else:
            query, values = "SELECT id FROM ar_documents WHERE id = ANY(%s)", [wanted]
        held = {row[0] for row in self._read(lambda db: db.execute(query, values).fetchall())}
        return [doc_id for doc_id in wanted if doc_id in held]

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove documents and all their chunks in one transaction; returns how many were found."""
        wanted = list(dict.fromkeys(doc_ids))
        return self._write(lambda db: remove(db, wanted), "the document ids")

    # -- reads -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._read(lambda db: db.execute("SELECT n FROM ar_stats").fetchone()[0]))

    @property
    def document_count(self) -> int:
        return int(self._read(lambda db: db.execute("SELECT count(*) FROM ar_documents").fetchone()[0]))

    def generation(self, directory=None) -> str:
        """A counter every write moves on."""
        return f"pg-{self._read(lambda db: db.execute('SELECT generation FROM ar_stats').fetchone()[0]):06d}"

    @property
    def fusion(self) -> tuple[str, float]:
        """Hybrid search's (fusion method, vector weight), as KnowledgeBase.fusion."""
        return fusion_of(self.embedder, self.config.search)

    def search(self, query: str, k: int = 5, mode: str = "hybrid", filters: dict | None = None,
               rerank: bool | None = None) -> list[Hit]:
        """The k best chunks for the query; each hit records its rank in each retriever."""
        return search_with(self, self._retrievers, query, k, mode, filters, rerank)

    @property
    def _retrievers(self) -> Retrievers:
        """BM25 and vectors in SQL, in one snapshot (search_with's plan, fusion and rerank are every backend's)."""
        def retrieve(db, plan, tokens, vector):
            where, arguments = where_sql(plan.filters)
            found = {}
            if "bm25" in plan.use:
                found["bm25"] = bm25_rows(db, tokens, plan.depth, where, arguments, self.config.search)
            if "vector" in plan.use:
                found["vector"] = vector_rows(db, vector, plan.depth, where, arguments, bool(plan.filters),
                                              self.embedder, self.config)
            return found

        return Retrievers(self._read, lambda db: db.execute("SELECT n FROM ar_stats").fetchone()[0], retrieve,
                          hits_of, idf_of)

    def term_weights(self, text: str, filters: Sequence[dict] = ()) -> dict[str, float]:
        """BM25 idf of each distinct token of `text` that the knowledge base holds; with `filters`
        (every one must hold), among the chunks they keep: a term only other chunks hold is absent."""
        terms = list(dict.fromkeys(tokenize(text)))
        if not terms:
            return {}
        if not filters:
            return self._read(lambda db: idf_of(db, terms))
        where, arguments = "", list[object]()
        for conditions in filters:
            more, values = where_sql(check_filters(conditions))
            where, arguments = where + more, arguments + values
        return self._read(lambda db: idf_within(db, terms, where, arguments))

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query`."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or not chunk_ids:
            return {}

        def run(db):
            ids = dict(db.execute("SELECT row, chunk_id FROM ar_chunks WHERE chunk_id = ANY(%s)",
                                  (list(chunk_ids),)).fetchall())
            scores = bm25_given(db, terms, list(ids), self.config.search)
            return {ids[row]: scores.get(row, 0.0) for row in ids}

        return self._read(run)

    def vector_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine similarity of each given chunk's vector to the query's."""
        if not chunk_ids:
            return {}
        vector = embed_query(self.embedder, query)
        return self._read(lambda db: {chunk_id: float(s) for chunk_id, s in db.execute(
            "SELECT chunk_id, 1 - (embedding <=> %s) FROM ar_chunks WHERE chunk_id = ANY(%s)",
            (vector, list(chunk_ids))).fetchall()})

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """Chunks behind the graph edges within `hops` of the names in the query, ranked as the
        embedded knowledge base ranks them (walk, graph_ranking), one query per hop."""
        check_graph_arguments(k, hops)
        return self._read(lambda db: graph_hits(db, query, k, hops, self.config.search))

    def pagerank_search(self, query: str, k: int = 8, seeds: dict[str, float] | None = None,
                        hops: int = 2) -> list[Hit]:
        """The k chunks personalized PageRank ranks first, as the embedded knowledge base ranks
        them (_graph.pagerank), the graph read a ring at a time (two queries a ring)."""
        check_graph_arguments(k, hops)
        seeds = pagerank_seeds(self, query, seeds)
        return self._read(lambda db: pagerank_hits(db, query, k, hops, seeds, self.config.search.rrf_k))

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return self._read(lambda db: db.execute(
            "SELECT (SELECT count(*) FROM (SELECT a FROM ar_edges UNION SELECT b FROM ar_edges) n), "
            "(SELECT count(*) FROM (SELECT DISTINCT a, b FROM ar_edges) e)").fetchone())

    def restricted(self, filters: dict, scope: bool = False) -> RestrictedView:
        """This knowledge base with every search kept to `filters` (as KnowledgeBase.restricted)."""
        checked = check_filters(filters)
        return RestrictedView(self, [checked], [checked] if scope else [])

    def save(self, *args, **kwargs) -> None:
        """Nothing to do: every write was committed in its own transaction."""

    def close(self) -> None:
        """Close the pools' connections (and their threads)."""
        self._servers.close()

