"""The PostgreSQL knowledge base's schema and the SQL of its writes, as functions of a connection
or cursor (the class in _knowledge_base runs them inside its transactions): the tables, the HNSW index
and the settings pgvector takes for it, the index of BM25 bounds, the schema made with what it is
built with and the migration to it, what ar_meta must hold, and a batch of chunks copied in
(chunks, postings, sparse vectors, document frequencies, graph edges) or documents removed."""
from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np

from ...core import Config, ConfigurationError, IndexConfig, SearchConfig
from ...text import TOKENIZER_SETTINGS, tokenize
from .._records import index_text
from ..embedders import Embedder, EmbedProgress, embed_batches, embedder_trait
from ..indexes import KnowledgeGraph

# a psycopg connection and cursor: psycopg is an optional dependency (the postgres extra), so they
# are typed by name, not imported
Connection = Any
Cursor = Any

MAX_HNSW_DIMENSIONS = 2000  # pgvector 0.6

SCHEMA_SQL = """
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
CREATE INDEX IF NOT EXISTS ar_edges_row ON ar_edges (row);
CREATE TABLE IF NOT EXISTS ar_sparse (
    dim integer NOT NULL, row bigint NOT NULL REFERENCES ar_chunks(row) ON DELETE CASCADE, weight real NOT NULL);
CREATE INDEX IF NOT EXISTS ar_sparse_dim ON ar_sparse (dim, weight) INCLUDE (row);
CREATE INDEX IF NOT EXISTS ar_sparse_row ON ar_sparse (row, dim) INCLUDE (weight);
"""


def hnsw_index(index: IndexConfig) -> str:
    """The HNSW index's definition, with the settings' m and ef_construction (a database that has one keeps it)."""
    return (f"CREATE INDEX IF NOT EXISTS ar_chunks_hnsw ON ar_chunks USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {int(index.hnsw_m)}, ef_construction = {int(index.hnsw_ef_construction)})")


def bound_sql(bound: dict, alias: str = "") -> str:
    """A posting's BM25 term score without its idf, tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / L)),
    for the average length L, k1 and b in `bound` (ar_meta's bm25_bound): the key of the postings'
    index by bound. For the average length A now, the score is at most max(1, A / L) times it, since
    the score grows with A and the ratio of the two is below A / L (_search.bm25_lists)."""
    k1, b, length = (float(bound[key]) for key in ("k1", "b", "length"))
    tf, dl = f"{alias}tf", f"{alias}length"
    return (f"({tf} * {k1 + 1!r}::float8 / ({tf} + {k1 * (1 - b)!r}::float8 + "
            f"{k1 * b / max(length, 1e-9)!r}::float8 * {dl}))")


def make_bound_index(db: Connection, search: SearchConfig) -> None:
    """(Re)make the postings' index in bound order, for the average length held now (100 tokens while
    nothing is held) and `search`'s k1 and b, and record those settings in ar_meta. Only a bulk add
    makes it anew: until then a drifting average length loosens the bounds."""
    n, total = db.execute("SELECT n, total_length FROM ar_stats").fetchone()
    bound = {"k1": search.bm25_k1, "b": search.bm25_b, "length": total / n if n else 100.0}
    db.execute("DROP INDEX IF EXISTS ar_postings_bound")
    db.execute(f"CREATE INDEX ar_postings_bound ON ar_postings (term, {bound_sql(bound)} DESC) "
               f"INCLUDE (row, tf, length)")
    db.execute("INSERT INTO ar_meta VALUES ('bm25_bound', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
               (json.dumps(bound),))


def to_schema_3(db: Connection, embedder: Embedder, config: Config) -> None:
    """Schema 3: the index of BM25 bounds, and each sparse vector's non-zero weights as postings."""
    db.execute(SCHEMA_SQL.format(dimension=embedder.dimension))  # makes ar_sparse, keeps the rest
    make_bound_index(db, config.search)
    if embedder_trait(embedder, "sparse"):
        db.execute("INSERT INTO ar_sparse (dim, row, weight) SELECT d - 1, c.row, w FROM ar_chunks c, "
                   "unnest(c.embedding::real[]) WITH ORDINALITY AS u(w, d) WHERE w <> 0")


def check_index_settings(index: IndexConfig) -> None:
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


def indexed(embedder: Embedder) -> bool:
    """Whether the vectors get an HNSW index: dense, and within pgvector's 2,000 dimensions."""
    return embedder.dimension <= MAX_HNSW_DIMENSIONS and not embedder_trait(embedder, "sparse")


def meta_problem(meta: dict) -> str | None:
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


def create_schema(db: Connection, embedder: Embedder, config: Config, version: int) -> None:
    """Make the tables (and the HNSW index where pgvector allows one, and the index of BM25 bounds)
    and record what the knowledge base is built with, in one transaction; a schema another process
    made meanwhile is kept."""
    index = config.index
    dimension = embedder.dimension
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(8711)")  # two processes creating it at once
        if _meta_held(db):
            return
        db.execute(SCHEMA_SQL.format(dimension=dimension))
        if indexed(embedder):
            db.execute(hnsw_index(index))
        make_bound_index(db, config.search)
        meta = {"schema_version": version, "tokenizer": TOKENIZER_SETTINGS,
                "embedder": {"name": embedder.name, "dimension": dimension},
                "chunking": {"size": index.chunk_size, "overlap": index.chunk_overlap}}
        for key, value in meta.items():
            db.execute("INSERT INTO ar_meta VALUES (%s, %s)", (key, json.dumps(value)))


def _meta_held(db: Connection) -> bool:
    return bool(db.execute("SELECT to_regclass('ar_meta') IS NOT NULL").fetchone()[0]) and \
        bool(db.execute("SELECT count(*) FROM ar_meta").fetchone()[0])


# -- writes ----------------------------------------------------------------------------------------


def copy_batch(cursor: Cursor, chunks: list[dict], embedder: Embedder, progress: bool | EmbedProgress) -> int:
    """Embed one batch of chunk records and COPY it in (chunks, postings, terms, edges); its tokens."""
    texts = [index_text(c) for c in chunks]
    vectors = np.concatenate([batch for _, batch in embed_batches(embedder, texts, progress)])
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
    change_df(cursor, df)
    if embedder_trait(embedder, "sparse"):
        with cursor.copy("COPY ar_sparse (dim, row, weight) FROM STDIN") as copy:
            for at, dim in zip(*np.nonzero(vectors), strict=True):
                copy.write_row((int(dim), rows[at], float(vectors[at, dim])))
    with cursor.copy("COPY ar_edges (a, b, row, a_label, b_label) FROM STDIN") as copy:
        for row, chunk in zip(rows, chunks, strict=True):
            for edge in chunk_edges(row, chunk["title"], chunk["text"]):
                copy.write_row(edge)
    return sum(map(len, tokens))


def remove(db: Connection, doc_ids: list[str]) -> int:
    """Delete documents with their chunks, postings and edges (cascades), keeping the stats right."""
    if not doc_ids:
        return 0
    n, total = db.execute("SELECT count(*), coalesce(sum(length), 0) FROM ar_chunks WHERE doc_id = ANY(%s)",
                          (doc_ids,)).fetchone()
    gone = db.execute("SELECT p.term, count(*) FROM ar_postings p JOIN ar_chunks c ON c.row = p.row "
                      "WHERE c.doc_id = ANY(%s) GROUP BY p.term", (doc_ids,)).fetchall()
    with db.cursor() as cursor:
        change_df(cursor, Counter({term: -count for term, count in gone}))
    found = db.execute("DELETE FROM ar_documents WHERE id = ANY(%s) RETURNING id", (doc_ids,)).fetchall()
    db.execute("UPDATE ar_stats SET n = n - %s, total_length = total_length - %s WHERE id = 1", (n, total))
    return len(found)


def change_df(cursor: Cursor, change: Counter) -> None:
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


def chunk_edges(row: int, title: str, text: str) -> list[tuple]:
    """The graph edges one chunk gives, as the embedded graph makes them (KnowledgeGraph.add)."""
    graph = KnowledgeGraph()
    graph.add(row, title, text)
    return [(a, b, row, graph.labels[a], graph.labels[b]) for a, b in graph.edges]
