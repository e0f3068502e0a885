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
base's own code (_search, _graph.walk); only the retrievers are SQL. An option pgvector cannot honour
(a seed, reuse_from) is refused when set, not ignored.

Every write is one transaction: readers never see half a document, a crash mid-batch leaves
nothing of it, and writers from several processes or hosts serialise on the stats row. A dropped
connection is a RetrievalError saying so; reads are retried once on a new connection.
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..._config import Config, IndexConfig, SearchConfig, as_config
from ..._errors import ConfigurationError, ConnectionLost, RetrievalError
from ...text._names import names
from ...text._tokenize import TOKENIZER_SETTINGS, tokenize
from .._hit import Hit
from ..embedders._embedders import Embedder, EmbedProgress, embed_batches, embedder_trait, make_embedder
from ..indexes._bm25 import bm25_idf
from ..indexes._filters import check_filters
from ..indexes._graph import KnowledgeGraph, _key, walk
from ..indexes._rerank import LexicalReranker, Reranker
from ..ingestion._documents import Document
from ._core import ADD_BATCH, AddResult, batches, check_built_with, chunk_records, index_text
from ._search import RestrictedView, Retrievers, check_graph_arguments, fusion_of, graph_ranking, search_with

SCHEMA_VERSION = 1
# version -> the function (given a connection in a transaction) that brings version - 1 up to it
MIGRATIONS: dict = {}


MAX_HNSW_DIMENSIONS = 2000  # pgvector 0.6


def _psycopg():
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError:
        raise ConfigurationError("a PostgreSQL knowledge base needs the postgres extra: "
                                 "pip install 'agentic-rag[postgres]'") from None
    return psycopg, register_vector


def _hnsw(index: IndexConfig) -> str:
    """The HNSW index's definition, with the settings' m and ef_construction (a database that has one keeps it)."""
    return (f"CREATE INDEX IF NOT EXISTS ar_chunks_hnsw ON ar_chunks USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {int(index.hnsw_m)}, ef_construction = {int(index.hnsw_ef_construction)})")


def _check_index_settings(index: IndexConfig) -> None:
    """Refuse the index settings pgvector cannot honour (a seed; m and ef_construction out of its
    range), rather than ignore them or fail inside the schema's transaction."""
    if index.seed != IndexConfig.seed:
        raise ConfigurationError(f"seed = {index.seed}: PostgreSQL's HNSW index (pgvector) takes no seed; "
                                 f"leave seed at its default ({IndexConfig.seed})")
    if not 2 <= index.hnsw_m <= 100:
        raise ConfigurationError(f"hnsw_m = {index.hnsw_m}: pgvector's HNSW index takes m from 2 to 100")
    if not max(4, 2 * index.hnsw_m) <= index.hnsw_ef_construction <= 1000:
        raise ConfigurationError(f"hnsw_ef_construction = {index.hnsw_ef_construction}: pgvector's HNSW index takes "
                                 f"ef_construction from {max(4, 2 * index.hnsw_m)} (twice m) to 1000")


BULK_ROWS = 5_000  # a batch this large (and larger than the rows held) rebuilds the HNSW index after it
_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS ar_meta (key text PRIMARY KEY, value jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS ar_documents (id text PRIMARY KEY, hash text NOT NULL);
CREATE TABLE IF NOT EXISTS ar_chunks (
    row bigserial PRIMARY KEY, chunk_id text UNIQUE NOT NULL,
    doc_id text NOT NULL REFERENCES ar_documents(id) ON DELETE CASCADE,
    text text NOT NULL, title text NOT NULL, source text NOT NULL, metadata jsonb NOT NULL,
    length integer NOT NULL, embedding vector({dimension}) NOT NULL);
CREATE INDEX IF NOT EXISTS ar_chunks_doc ON ar_chunks (doc_id);
CREATE TABLE IF NOT EXISTS ar_postings (
    term text NOT NULL, row bigint NOT NULL REFERENCES ar_chunks(row) ON DELETE CASCADE, tf real NOT NULL,
    length integer NOT NULL, PRIMARY KEY (term, row));
CREATE INDEX IF NOT EXISTS ar_postings_row ON ar_postings (row);
CREATE TABLE IF NOT EXISTS ar_terms (term text PRIMARY KEY, df bigint NOT NULL);
CREATE TABLE IF NOT EXISTS ar_stats (id integer PRIMARY KEY CHECK (id = 1), n bigint NOT NULL,
                                     total_length bigint NOT NULL, generation bigint NOT NULL);
INSERT INTO ar_stats VALUES (1, 0, 0, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS ar_edges (
    a text NOT NULL, b text NOT NULL, row bigint NOT NULL REFERENCES ar_chunks(row) ON DELETE CASCADE,
    a_label text NOT NULL, b_label text NOT NULL);
CREATE INDEX IF NOT EXISTS ar_edges_a ON ar_edges (a);
CREATE INDEX IF NOT EXISTS ar_edges_b ON ar_edges (b);
"""


class PostgresKnowledgeBase:
    """The knowledge base in PostgreSQL: the embedded KnowledgeBase's interface (add, replace and
    delete documents; hybrid, BM25 and vector search with filters; graph search; term weights),
    safe to use from several threads, processes and hosts at once."""
    saves_to_folder = False  # every write is committed as it is made (KnowledgeBaseBackend)

    def __init__(self, url: str, embedder: Embedder | None = None,
                 config: Config | IndexConfig | SearchConfig | None = None, reranker: Reranker | None = None):
        self._psycopg, self._register = _psycopg()
        self.url, self.config = url, as_config(config)  # a layer alone: the others take their defaults
        _check_index_settings(self.config.index)
        self.reranker = reranker or LexicalReranker()
        self._local = threading.local()
        self._connected = False  # once any thread has connected, a failure to connect is a lost connection
        with self._connection() as db:
            try:
                meta = self._meta(db)
                if meta is None:
                    self.embedder = embedder or make_embedder("hashing")
                    self._create(db)
                else:
                    self.embedder = self._check(meta, embedder, config)
            except self._psycopg.errors.InsufficientPrivilege as exc:
                raise self._no_right(exc, "create or read") from None
        self.graph_method = "names"

    # -- connections and the schema ----------------------------------------------------------------

    def _connection(self):
        """This thread's connection (opened on first use, and again after it dropped)."""
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.closed:
            try:
                connection = self._psycopg.connect(self.url, autocommit=False)
            except (self._psycopg.OperationalError, self._psycopg.ProgrammingError) as exc:
                if self._connected:  # reached before, by some thread: it dropped, and may come back
                    raise ConnectionLost(f"cannot connect to {safe_url(self.url)} again (the connection was "
                                         f"lost): {_first_line(exc)}; check the server and retry") from None
                raise RetrievalError(f"cannot connect to {safe_url(self.url)}: {_first_line(exc)}") from None
            self._local.connection, self._connected = connection, True
        return connection

    def _meta(self, db) -> dict | None:
        exists = db.execute("SELECT to_regclass('ar_meta') IS NOT NULL").fetchone()[0]
        try:
            meta = dict(db.execute("SELECT key, value FROM ar_meta").fetchall()) if exists else {}
        except (self._psycopg.errors.UndefinedColumn, self._psycopg.errors.UndefinedFunction):
            db.rollback()
            raise self._foreign("its table ar_meta has other columns") from None
        db.commit()
        return meta or None

    def _foreign(self, why: str) -> RetrievalError:
        """The error for a database whose ar_ tables are not an agentic-rag schema (or a damaged one)."""
        return RetrievalError(f"{safe_url(self.url)} does not hold an agentic-rag knowledge base's schema, or it is "
                              f"damaged ({why}); give a new, empty database (or drop its ar_ tables) and index again")

    def _no_right(self, exc: Exception, doing: str) -> ConfigurationError:
        """The one-line error for a role that lacks a right, naming it and who can grant it."""
        first = _first_line(exc)
        if "extension" in first.lower():
            fix = "have the database's owner (or a superuser) run CREATE EXTENSION vector; in it, then open it again"
        elif doing == "write":
            fix = ("connect as a role that may write (INSERT, UPDATE, DELETE on the ar_ tables), or only search "
                   "with this one")
        else:
            fix = ("open it once as the database's owner, who creates the schema, and grant this role SELECT on the "
                   "ar_ tables (and INSERT, UPDATE, DELETE to write)")
        return ConfigurationError(f"{safe_url(self.url)}: this role may not {doing} the knowledge base "
                                  f"({first}); {fix}")

    def _create(self, db) -> None:
        dimension = self.embedder.dimension
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(8711)")  # two processes creating it at once
            if self._meta_locked(db):
                return
            db.execute(_SCHEMA.format(dimension=dimension))
            if _indexed(self.embedder):
                db.execute(_hnsw(self.config.index))
            meta = {"schema_version": SCHEMA_VERSION, "tokenizer": TOKENIZER_SETTINGS,
                    "embedder": {"name": self.embedder.name, "dimension": dimension},
                    "chunking": {"size": self.config.index.chunk_size, "overlap": self.config.index.chunk_overlap}}
            for key, value in meta.items():
                db.execute("INSERT INTO ar_meta VALUES (%s, %s)", (key, json.dumps(value)))

    def _meta_locked(self, db) -> bool:
        return bool(db.execute("SELECT to_regclass('ar_meta') IS NOT NULL").fetchone()[0]) and \
            bool(db.execute("SELECT count(*) FROM ar_meta").fetchone()[0])

    def _check(self, meta: dict, embedder: Embedder | None, config) -> Embedder:
        """The embedder the database was built with; a newer schema or other settings are clear errors."""
        version = meta.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise self._foreign(f"schema_version is {version!r}")
        if version > SCHEMA_VERSION:
            raise RetrievalError(f"{safe_url(self.url)} holds knowledge-base schema {version!r}; this agentic-rag "
                                 f"reads schema {SCHEMA_VERSION} and older: upgrade agentic-rag")
        if version < SCHEMA_VERSION:
            self._migrate(version)
        missing = _meta_problem(meta)
        if missing:
            raise self._foreign(missing)
        embedder, self.config = check_built_with(safe_url(self.url), meta, embedder, config, "NEW_DATABASE_URL")
        return embedder

    def _migrate(self, version: int) -> None:
        """Bring an older schema up to this version, one step at a time, in one transaction."""
        db = self._connection()
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(8711)")
            found = db.execute("SELECT value FROM ar_meta WHERE key = 'schema_version' FOR UPDATE").fetchone()[0]
            for step in range(found + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[step](db)
            db.execute("UPDATE ar_meta SET value = %s WHERE key = 'schema_version'", (json.dumps(SCHEMA_VERSION),))

    def _read(self, work, given: str = "the query, the filters and the document ids"):
        """Run `work(connection)` in one read-only snapshot (REPEATABLE READ: every statement of a
        search sees the same committed state, never one writer's change between two of them); a
        dropped connection is retried once."""
        for attempt in (1, 2):
            db = self._connection()
            try:
                self._register(db)
                with db.transaction():
                    db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    return work(db)
            except self._psycopg.DataError as exc:  # a NUL in a query, a filter or an id: text cannot hold it
                raise _data_error(exc, given) from None
            except self._psycopg.errors.InsufficientPrivilege as exc:
                raise self._no_right(exc, "read") from None
            except self._psycopg.OperationalError as exc:
                db.close()
                if attempt == 2:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped: {_first_line(exc)}; "
                                         f"check the server and retry") from None

    def _write(self, work, given: str = "the documents (text, titles, metadata, ids)"):
        """Run `work(connection)` in one write transaction, serialised with every other writer on the
        stats row. A connection that dropped before the commit is retried once (nothing was written);
        one that dropped during the commit is reported: the write may or may not have been saved.
        A value PostgreSQL cannot hold is an error naming where it came from (`given`)."""
        for attempt in (1, 2):
            db, committing = self._connection(), False
            try:
                self._register(db)
                with db.transaction():
                    db.execute("SELECT n FROM ar_stats WHERE id = 1 FOR UPDATE")  # one writer at a time
                    result = work(db)
                    if result != 0:  # a write that changed nothing (a delete of unknown ids) keeps the generation
                        db.execute("UPDATE ar_stats SET generation = generation + 1 WHERE id = 1")
                    committing = True
                return result
            except self._psycopg.DataError as exc:  # e.g. a NUL character, which PostgreSQL text cannot hold
                raise _data_error(exc, given) from None
            except self._psycopg.errors.InsufficientPrivilege as exc:
                raise self._no_right(exc, "write") from None
            except self._psycopg.OperationalError as exc:
                db.close()
                if committing:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped during a write's commit: "
                                         f"{_first_line(exc)}; it may or may not have been saved: check, then "
                                         f"retry") from None
                if attempt == 2:
                    raise ConnectionLost(f"the connection to {safe_url(self.url)} dropped during a write, before "
                                         f"its commit: {_first_line(exc)}; nothing of it was written: check the "
                                         f"server and retry") from None

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
            self._remove(db, replaced)
            held = db.execute("SELECT n FROM ar_stats").fetchone()[0]
            rebuild = _indexed(self.embedder) and total >= max(BULK_ROWS, held)
            if rebuild:  # pgvector builds an index over many rows far faster than it inserts them one by one
                db.execute("DROP INDEX IF EXISTS ar_chunks_hnsw")
            with db.cursor() as cursor:
                cursor.executemany("INSERT INTO ar_documents VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET "
                                   "hash = EXCLUDED.hash", [(d.id, d.content_hash()) for d in todo])
                shown = EmbedProgress(total) if progress and total > embedder_trait(self.embedder, "batch_size") \
                    else False
                length = sum(self._copy_batch(cursor, batch, shown)
                             for batch in batches(chunk_records(todo, self.config.index), ADD_BATCH))
                if isinstance(shown, EmbedProgress):
                    shown.close()
                cursor.execute("UPDATE ar_stats SET n = n + %s, total_length = total_length + %s WHERE id = 1",
                               (total, length))
            if rebuild:
                db.execute(_hnsw(self.config.index))
            return result

        return self._write(write) if todo else AddResult(unchanged=len(latest))

    def _copy_batch(self, cursor, chunks: list[dict], progress: bool | EmbedProgress) -> int:
        """Embed one batch of chunk records and COPY it in (chunks, postings, terms, edges); its tokens."""
        texts = [index_text(c) for c in chunks]
        vectors = np.concatenate([batch for _, batch in embed_batches(self.embedder, texts, progress)])
        rows = [r[0] for r in cursor.execute("SELECT nextval('ar_chunks_row_seq') FROM generate_series(1, %s)",
                                             (len(chunks),)).fetchall()]
        tokens = [tokenize(text) for text in texts]
        with cursor.copy("COPY ar_chunks (row, chunk_id, doc_id, text, title, source, metadata, length, "
                         "embedding) FROM STDIN") as copy:  # COPY: 100,000 chunks go in minutes, not hours
            for row, chunk, words, vector in zip(rows, chunks, tokens, vectors, strict=True):
                copy.write_row((row, chunk["id"], chunk["doc_id"], chunk["text"], chunk["title"], chunk["source"],
                                json.dumps(chunk["metadata"], ensure_ascii=False), len(words), vector))
        df: Counter = Counter()
        with cursor.copy("COPY ar_postings (term, row, tf, length) FROM STDIN") as copy:
            for row, words in zip(rows, tokens, strict=True):
                counts = Counter(words)
                df.update(counts.keys())
                for term, tf in counts.items():
                    copy.write_row((term, row, tf, len(words)))
        _change_df(cursor, df)
        with cursor.copy("COPY ar_edges (a, b, row, a_label, b_label) FROM STDIN") as copy:
            for row, chunk in zip(rows, chunks, strict=True):
                for edge in _edges(row, chunk["title"], chunk["text"]):
                    copy.write_row(edge)
        return sum(map(len, tokens))

    def _remove(self, db, doc_ids: list[str]) -> int:
        """Delete documents with their chunks, postings and edges (cascades), keeping the stats right."""
        if not doc_ids:
            return 0
        n, total = db.execute("SELECT count(*), coalesce(sum(length), 0) FROM ar_chunks WHERE doc_id = ANY(%s)",
                              (doc_ids,)).fetchone()
        gone = db.execute("SELECT p.term, count(*) FROM ar_postings p JOIN ar_chunks c ON c.row = p.row "
                          "WHERE c.doc_id = ANY(%s) GROUP BY p.term", (doc_ids,)).fetchall()
        with db.cursor() as cursor:
            _change_df(cursor, Counter({term: -count for term, count in gone}))
        found = db.execute("DELETE FROM ar_documents WHERE id = ANY(%s) RETURNING id", (doc_ids,)).fetchall()
        db.execute("UPDATE ar_stats SET n = n - %s, total_length = total_length - %s WHERE id = 1", (n, total))
        return len(found)

    def held_documents(self, doc_ids: Iterable[str]) -> list[str]:
        """Which of these document ids the knowledge base holds, in the order given, once each."""
        wanted = list(dict.fromkeys(doc_ids))
        held = {row[0] for row in self._read(lambda db: db.execute(
            "SELECT id FROM ar_documents WHERE id = ANY(%s)", (wanted,)).fetchall())}
        return [doc_id for doc_id in wanted if doc_id in held]

    def delete_documents(self, doc_ids: Iterable[str]) -> int:
        """Remove documents and all their chunks in one transaction; returns how many were found."""
        wanted = list(dict.fromkeys(doc_ids))
        return self._write(lambda db: self._remove(db, wanted), "the document ids")

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
            where, arguments = _where(plan.filters)
            found = {}
            if "bm25" in plan.use:
                found["bm25"] = self._bm25(db, tokens, plan.depth, where, arguments)
            if "vector" in plan.use:
                found["vector"] = self._vector(db, vector, plan.depth, where, arguments, bool(plan.filters))
            return found

        return Retrievers(self._read, lambda db: db.execute("SELECT n FROM ar_stats").fetchone()[0], retrieve,
                          self._hits, self._idf)

    def _bm25(self, db, tokens: list[str], k: int, where: str, arguments: list) -> list[tuple[int, float]]:
        """BM25 in SQL: the embedded index's formula, k1 and b."""
        terms = list(dict.fromkeys(tokens))
        if not terms:
            return []
        c = self.config.search
        n, total = db.execute("SELECT n, total_length FROM ar_stats").fetchone()
        idf = self._idf(db, terms)
        if not idf:
            return []
        chunks = "JOIN ar_chunks c ON c.row = p.row" if where else ""  # the chunk is read only for filters
        rows = db.execute(
            f"""SELECT p.row, sum(q.idf * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.length / %s)))::float4 AS score
            FROM ar_postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) USING (term) {chunks}
            WHERE true {where} GROUP BY p.row ORDER BY score DESC, p.row LIMIT %s""",
            [c.bm25_k1 + 1, c.bm25_k1, c.bm25_b, c.bm25_b, max(total / max(n, 1), 1e-9), list(idf),
             list(idf.values()), *arguments, k]).fetchall()
        return [(int(r), float(s)) for r, s in rows if s > 0]

    def _vector(self, db, vector: np.ndarray, k: int, where: str, arguments: list,
                filtered: bool) -> list[tuple[int, float]]:
        """Cosine similarity: the HNSW index when there is one, no filter and exact_search_below rows or
        more (as the embedded index), else an exact scan of the rows the filter keeps (so a filter
        keeping few rows still gives k hits)."""
        exact = filtered or not _indexed(self.embedder) or \
            db.execute("SELECT n FROM ar_stats").fetchone()[0] < self.config.index.exact_search_below
        if exact:
            db.execute("SET LOCAL enable_indexscan = off")
        db.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(int(self.config.search.hnsw_ef), k))}")
        ties = ", c.row" if exact else ""  # a second sort key would keep the HNSW index from being used
        rows = db.execute(f"SELECT c.row, 1 - (c.embedding <=> %s) FROM ar_chunks c WHERE true {where} "
                          f"ORDER BY c.embedding <=> %s{ties} LIMIT %s",
                          [vector, *arguments, vector, k]).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def _hits(self, db, fused: list) -> list[Hit]:
        if not fused:
            return []
        found = {row: rest for row, *rest in db.execute(
            "SELECT row, chunk_id, doc_id, source, title, text, metadata FROM ar_chunks WHERE row = ANY(%s)",
            ([row for row, _, _ in fused],)).fetchall()}
        return [Hit(id=found[row][0], doc_id=found[row][1], source=found[row][2], title=found[row][3],
                    text=found[row][4], score=score, ranks=ranks, metadata=found[row][5])
                for row, score, ranks in fused if row in found]

    def term_weights(self, text: str) -> dict[str, float]:
        """BM25 idf of each distinct token of `text` that the knowledge base holds."""
        terms = list(dict.fromkeys(tokenize(text)))
        return self._read(lambda db: self._idf(db, terms)) if terms else {}

    def _idf(self, db, tokens: list[str]) -> dict[str, float]:
        """BM25 idf (bm25_idf, as the embedded index) of each distinct token some chunk holds."""
        terms = list(dict.fromkeys(tokens))
        n = db.execute("SELECT n FROM ar_stats").fetchone()[0]
        rows = db.execute("SELECT term, df FROM ar_terms WHERE term = ANY(%s)", (terms,)).fetchall()
        return {term: float(bm25_idf(n, df)) for term, df in rows}

    def bm25_scores(self, query: str, chunk_ids: list[str]) -> dict[str, float]:
        """The BM25 score of each given chunk for `query`."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or not chunk_ids:
            return {}

        def run(db):
            rows = {row: score for row, score in self._bm25(db, terms, len(chunk_ids) + 10 ** 9,
                                                            "AND c.chunk_id = ANY(%s)", [list(chunk_ids)])}
            ids = dict(db.execute("SELECT row, chunk_id FROM ar_chunks WHERE chunk_id = ANY(%s)",
                                  (list(chunk_ids),)).fetchall())
            return {ids[row]: rows.get(row, 0.0) for row in ids}

        return self._read(run)

    def graph_search(self, query: str, k: int = 8, hops: int = 2) -> list[Hit]:
        """Chunks behind the graph edges within `hops` of the names in the query, ranked as the
        embedded knowledge base ranks them (walk, graph_ranking), one query per hop."""
        check_graph_arguments(k, hops)

        def run(db):
            starts = _starts(db, query)
            found = walk(lambda nodes: _neighbours(db, nodes), lambda pairs: _names(db, pairs),
                         dict(zip(starts, _names(db, [(None, key) for key in starts]), strict=True)), hops)
            rows = list(found)
            scores = dict.fromkeys(rows, 0.0)
            scores.update(self._bm25(db, tokenize(query), len(rows), "AND p.row = ANY(%s)", [rows]) if rows else [])
            ranked = graph_ranking(found, scores, k)
            hits = self._hits(db, [(row, score, ranks) for row, score, ranks, _ in ranked])
            return [h.model_copy(update={"path": path}) for h, (_, _, _, path) in zip(hits, ranked, strict=True)]

        return self._read(run)

    @property
    def graph_size(self) -> tuple[int, int]:
        """(nodes, edges) of the knowledge graph."""
        return self._read(lambda db: db.execute(
            "SELECT (SELECT count(*) FROM (SELECT a FROM ar_edges UNION SELECT b FROM ar_edges) n), "
            "(SELECT count(*) FROM (SELECT DISTINCT a, b FROM ar_edges) e)").fetchone())

    def restricted(self, filters: dict) -> RestrictedView:
        """This knowledge base with every search kept to `filters` (as KnowledgeBase.restricted)."""
        return RestrictedView(self, [check_filters(filters)])

    def save(self, *args, **kwargs) -> None:
        """Nothing to do: every write was committed in its own transaction."""

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()


def _indexed(embedder: Embedder) -> bool:
    """Whether the vectors get an HNSW index: dense, and within pgvector's 2,000 dimensions."""
    return embedder.dimension <= MAX_HNSW_DIMENSIONS and not embedder_trait(embedder, "sparse")


def _change_df(cursor, change: Counter) -> None:
    """Add `change` (term -> chunks gained or lost) to each term's document frequency in ar_terms."""
    if not change:
        return
    cursor.execute("CREATE TEMP TABLE IF NOT EXISTS ar_df_change (term text, df bigint) ON COMMIT DROP")
    with cursor.copy("COPY ar_df_change (term, df) FROM STDIN") as copy:
        for term, count in change.items():
            copy.write_row((term, count))
    cursor.execute("INSERT INTO ar_terms SELECT term, sum(df) FROM ar_df_change GROUP BY term "
                   "ON CONFLICT (term) DO UPDATE SET df = ar_terms.df + EXCLUDED.df")
    cursor.execute("DELETE FROM ar_terms WHERE term IN (SELECT term FROM ar_df_change) AND df <= 0")
    cursor.execute("TRUNCATE ar_df_change")


def _starts(db, query: str) -> list[str]:
    """The graph's nodes the query names, as KnowledgeGraph.find gives them: its names that are
    nodes, then node names of four characters or more that it contains (long ones first, five; of
    one length, the one the graph met first)."""
    named = list(dict.fromkeys(_key(n) for n in names(query)))
    held = {row[0] for row in db.execute("SELECT a FROM ar_edges WHERE a = ANY(%s) UNION "
                                         "SELECT b FROM ar_edges WHERE b = ANY(%s)", (named, named)).fetchall()}
    inside = [row[0] for row in db.execute(
        "SELECT node FROM (SELECT a AS node, row, ctid FROM ar_edges UNION ALL SELECT b, row, ctid FROM ar_edges) n "
        "WHERE length(node) >= 4 AND strpos(%s, node) > 0 GROUP BY node "
        "ORDER BY length(node) DESC, min(row), min(ctid) LIMIT 5", (_key(query),)).fetchall()]
    return list(dict.fromkeys([k for k in named if k in held] + inside))


def _neighbours(db, nodes: list[str]) -> dict[str, list[tuple[str, list[int]]]]:
    """Each node's neighbours with the rows behind the edge to each (walk's `neighbours`)."""
    near: dict[str, list[tuple[str, list[int]]]] = {}
    for node, other, rows in db.execute(
            "SELECT node, other, array_agg(row) FROM (SELECT a AS node, b AS other, row FROM ar_edges "
            "WHERE a = ANY(%s) UNION ALL SELECT b, a, row FROM ar_edges WHERE b = ANY(%s)) e GROUP BY node, other",
            (nodes, nodes)).fetchall():
        near.setdefault(node, []).append((other, rows))
    return near


def _names(db, pairs: list[tuple]) -> list[str]:
    """The name each (node, other) step adds to a path: the other's name as first written (the
    lowest row's edge, then the first edge that row gave), as KnowledgeGraph keeps it."""
    keys = list({other for _, other in pairs})
    labels = dict(db.execute(
        "SELECT DISTINCT ON (key) key, label FROM (SELECT a AS key, a_label AS label, row, ctid FROM ar_edges "
        "WHERE a = ANY(%s) UNION ALL SELECT b, b_label, row, ctid FROM ar_edges WHERE b = ANY(%s)) x "
        "ORDER BY key, row, ctid", (keys, keys)).fetchall()) if keys else {}
    return [labels.get(other, other) for _, other in pairs]


def _edges(row: int, title: str, text: str) -> list[tuple]:
    """The graph edges one chunk gives, as the embedded graph makes them (KnowledgeGraph.add)."""
    graph = KnowledgeGraph()
    graph.add(row, title, text)
    return [(a, b, row, graph.labels[a], graph.labels[b]) for a, b in graph.edges]


_COLUMNS = {"doc_id": "c.doc_id", "source": "c.source", "title": "c.title"}


def _where(filters: dict) -> tuple[str, list]:
    """The filters as SQL conditions on ar_chunks c (AND ...), with their arguments: equality and
    membership compare text, as the embedded filters compare str(); a range compares numbers as
    numbers and anything else as text."""
    parts, arguments = [], []
    for field, condition in filters.items():
        # a JSON true or false reads as Python's str() gives it: True, False
        column = _COLUMNS.get(field, "(CASE jsonb_typeof(c.metadata -> %s) WHEN 'boolean' THEN "
                                     "initcap(c.metadata ->> %s) ELSE c.metadata ->> %s END)")
        field_args = [] if field in _COLUMNS else [field] * 3
        if isinstance(condition, dict):
            for name, bound in condition.items():
                op = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<"}[name]
                if isinstance(bound, (int, float)) and not isinstance(bound, bool):  # numbers as numbers (numeric:
                    parts.append(f"({column} ~ '{_NUMBER}' AND ({column})::numeric {op} %s::numeric)")  # no overflow)
                    arguments += field_args + field_args + [repr(float(bound)) if isinstance(bound, float)
                                                            else str(bound)]
                else:
                    parts.append(f"{column} {op} %s")
                    arguments += field_args + [str(bound)]
        elif isinstance(condition, (list, tuple, set, frozenset)):
            parts.append(f"{column} = ANY(%s)")
            arguments += field_args + [[str(c) for c in condition]]
        else:
            parts.append(f"{column} = %s")
            arguments += field_args + [str(condition)]
    return "".join(f" AND {p}" for p in parts), arguments


_NUMBER = r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$"


def safe_url(url: str) -> str:
    """The URL without its passwords, in the user part or as a parameter (a folder's path as it is)."""
    url = re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)
    return re.sub(r"([?&](?:ssl)?password=)[^&]*", r"\1***", url)


def _data_error(exc: Exception, given: str) -> ConfigurationError:
    """A value PostgreSQL refused, as one line naming what to change."""
    first = _first_line(exc)
    if "NUL" in first or "0x00" in first:
        return ConfigurationError(f"PostgreSQL text cannot hold NUL characters; remove them from {given}")
    return ConfigurationError(f"PostgreSQL cannot store this value: {first}; change it in {given} "
                              f"(e.g. a NaN in metadata)")


def _meta_problem(meta: dict) -> str | None:
    """What a knowledge base's ar_meta lacks (its embedder, tokenizer, chunking), or None."""
    embedder, chunking = meta.get("embedder"), meta.get("chunking")
    if not (isinstance(embedder, dict) and isinstance(embedder.get("name"), str)
            and isinstance(embedder.get("dimension"), int)):
        return f"ar_meta's embedder is {embedder!r}"
    if not (isinstance(chunking, dict) and all(isinstance(chunking.get(k), int) for k in ("size", "overlap"))):
        return f"ar_meta's chunking is {chunking!r}"
    if "tokenizer" not in meta:
        return "ar_meta has no tokenizer"
    return None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

