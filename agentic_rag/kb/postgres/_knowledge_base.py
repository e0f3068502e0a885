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
exact_search_below rows. Every read (search's plan, fusion and rerank; graph and PageRank search)
is the engine's (kb/_engine), the same code as the embedded knowledge base's, over this store's
snapshot (_snapshot: one transaction, the SQL of _search). An option
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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ...core import Config, ConfigurationError, ConnectionLost, IndexConfig, RetrievalError, SearchConfig, as_config
from .._engine import Engine
from .._records import ADD_BATCH, AddResult, batches, check_built_with, chunk_records
from ..embedders import Embedder, EmbedProgress, embedder_trait, make_embedder
from ..indexes import LexicalReranker, Reranker
from ..ingestion import Document
from ._connections import Busy, NoConnection, Servers, split_url
from ._errors import data_error, first_line, foreign_schema, no_right, safe_url
from ._snapshot import PostgresStore
from ._sql import (
    Connection,
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
T = TypeVar("T")
BULK_ROWS = 5_000  # a batch this large (and larger than the rows held) rebuilds the HNSW index after it


def _psycopg() -> tuple[Any, Callable[[Connection], None]]:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the pools of connections, _connections)
        from pgvector.psycopg import register_vector
    except ImportError:
        raise ConfigurationError("a PostgreSQL knowledge base needs the postgres extra: "
                                 "pip install 'agentic-rag[postgres]'") from None
    return psycopg, register_vector


class PostgresKnowledgeBase(Engine):
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
        self.store = PostgresStore(self)

    # -- connections and the schema ----------------------------------------------------------------

    def _configure(self, db: Connection) -> None:
        """A new pooled connection: pgvector's type registered, left idle."""
        self._register(db)
        db.commit()

    def _meta(self, db: Connection) -> dict | None:
        exists = db.execute("SELECT to_regclass('ar_meta') IS NOT NULL").fetchone()[0]
        try:
            meta = dict(db.execute("SELECT key, value FROM ar_meta").fetchall()) if exists else {}
        except (self._psycopg.errors.UndefinedColumn, self._psycopg.errors.UndefinedFunction):
            db.rollback()
            raise foreign_schema(self.url, "its table ar_meta has other columns") from None
        db.commit()
        return meta or None

    def _check(self, db: Connection, meta: dict, embedder: Embedder | None,
               config: Config | IndexConfig | SearchConfig | None) -> Embedder:
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

    def _migrate(self, db: Connection, embedder: Embedder) -> None:
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

    def _read(self, work: Callable[[Connection], T],
              given: str = "the query, the filters and the document ids") -> T:
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
        raise AssertionError("not reached: the second attempt returns or raises")

    def _write(self, work: Callable[[Connection], T],
               given: str = "the documents (text, titles, metadata, ids)") -> T:
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
        raise AssertionError("not reached: the second attempt returns or raises")

    def _unreachable(self, exc: NoConnection, writing: bool) -> ConnectionLost:
        """No connection to the primary within the pool's timeout: it was reached before, and may come back
        (or every connection stayed busy: Busy says so)."""
        nothing = "nothing of the write was written: " if writing else ""
        if isinstance(exc, Busy):
            return ConnectionLost(f"{exc}; {nothing}raise pool_size or pool_timeout in the URL, or retry")
        return ConnectionLost(f"cannot connect to {safe_url(self.url)} again (the connection was lost): "
                              f"{first_line(exc)}; {nothing}check the server and retry")

    # -- writes ------------------------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], progress: bool = False,
                      reuse_from: Iterable[str | Path] | str | Path = ()) -> AddResult:
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

        def write(db: Connection) -> AddResult:
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

    # -- reads are the engine's (kb/_engine), over PostgresStore; what is left is this store's own ----

    def generation(self, directory: str | Path | None = None) -> str:
        """A counter every write moves on."""
        return f"pg-{self._read(lambda db: db.execute('SELECT generation FROM ar_stats').fetchone()[0]):06d}"

    def save(self, *args: object, **kwargs: object) -> None:
        """Nothing to do: every write was committed in its own transaction."""

    def close(self) -> None:
        """Close the pools' connections (and their threads)."""
        self._servers.close()

