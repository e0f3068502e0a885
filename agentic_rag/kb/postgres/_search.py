"""The PostgreSQL knowledge base's retrievers in SQL, as functions of a connection (_snapshot
runs them in one read-only snapshot): filters as SQL conditions, BM25 with the embedded
index's formula, cosine similarity through the HNSW index or an exact scan, the hits' rows, idf,
and the graph: the nodes a query names, each node's neighbours, the names on a path and the rows
and nodes PageRank walks, which the engine (kb/_engine) walks and ranks as every store's."""
from __future__ import annotations

import numpy as np

from ...core import Config, SearchConfig
from ...text import names
from .._hit import Hit
from ..embedders import Embedder, embedder_trait
from ..indexes import HUB_ROWS, bm25_idf, node_key
from ._pruned import SPARSE_DEEPEST, pruned_top
from ._sql import Connection, bound_sql, indexed

_COLUMNS = {"doc_id": "c.doc_id", "source": "c.source", "title": "c.title"}
_NUMBER = r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$"


# a JSON value as Python's str() writes it: true and false as True and False (the embedded filters compare str())
_TEXT_OF = "(CASE jsonb_typeof({0}) WHEN 'boolean' THEN initcap({0} #>> '{{}}') ELSE {0} #>> '{{}}' END)"


def where_sql(filters: dict, every_member: bool = False) -> tuple[str, list]:
    """The filters as SQL conditions on ar_chunks c (AND ...), with their arguments: equality and
    membership compare text, as the embedded filters compare str(); a range compares numbers as
    numbers and anything else as text. A metadata value that is a JSON array meets a condition when
    one of its members does, or with `every_member` when it has members and each does."""
    parts, arguments = [], []
    for field, condition in filters.items():
        if field in _COLUMNS:
            test, test_args = _condition_sql(_COLUMNS[field], condition)
            parts.append(test)
            arguments += test_args
            continue
        scalar, scalar_args = _condition_sql(_TEXT_OF.format("(c.metadata -> %s)"), condition, field)
        member, member_args = _condition_sql(_TEXT_OF.format("m.v"), condition)
        if every_member:  # members there are, and none of them fails (NULL fails too)
            parts.append(f"(CASE WHEN jsonb_typeof(c.metadata -> %s) = 'array' THEN jsonb_array_length("
                         f"c.metadata -> %s) > 0 AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(c.metadata -> "
                         f"%s) AS m(v) WHERE ({member}) IS NOT TRUE) ELSE {scalar} END)")
            arguments += [field, field, field, *member_args, *scalar_args]
        else:
            parts.append(f"(CASE WHEN jsonb_typeof(c.metadata -> %s) = 'array' THEN EXISTS (SELECT 1 FROM "
                         f"jsonb_array_elements(c.metadata -> %s) AS m(v) WHERE {member}) ELSE {scalar} END)")
            arguments += [field, field, *member_args, *scalar_args]
    return "".join(f" AND {p}" for p in parts), arguments


def _condition_sql(column: str, condition: object, field: str | None = None) -> tuple[str, list]:
    """One field's condition on the SQL expression `column`, and its arguments in order; each %s of
    `column` takes `field` (the metadata key it reads)."""
    field_args = [field] * column.count("%s") if field is not None else []
    parts: list[str] = []
    arguments: list = []
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
    return " AND ".join(parts), arguments


def bm25_rows(db: Connection, tokens: list[str], k: int, where: str, arguments: list,
              c: SearchConfig) -> list[tuple[int, float]]:
    """BM25 in SQL: the embedded index's formula, k1 and b; the top k pruned (_pruned) where
    the postings' index of bounds was made with these k1 and b, else every posting of the terms summed."""
    formula, bound = _Formula.read(db, c)
    idf = idf_of(db, tokens, formula.n)
    if not idf:
        return []
    if bound and (bound["k1"], bound["b"]) == (c.bm25_k1, c.bm25_b):
        found = pruned_top(db, bm25_lists(idf, bound, formula, where, arguments), k,
                           lambda rows: bm25_of_rows(db, idf, rows, formula), nonnegative=True)
        if found is not None:
            return found
    _roomy(db)
    rows = db.execute(
        f"""SELECT p.row, sum({formula.score("q.idf")})::float4 AS score
        FROM ar_postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) USING (term)
        {_chunks_for(where, "p")} WHERE true {where} GROUP BY p.row ORDER BY score DESC, p.row LIMIT %s""",
        [*formula.arguments, list(idf), list(idf.values()), *arguments, k]).fetchall()
    return [(int(r), float(s)) for r, s in rows if s > 0]


def _chunks_for(where: str, postings: str) -> str:
    """The join to ar_chunks c that filter conditions on it need (the chunk is read only for filters)."""
    return f"JOIN ar_chunks c ON c.row = {postings}.row" if where else ""


def _roomy(db: Connection) -> None:
    """Room for an exhaustive sum's score per row in memory (work_mem, for this transaction alone):
    PostgreSQL's default 4MB spills it to disk at 100,000 chunks."""
    db.execute("SET LOCAL work_mem = '64MB'")


class _Formula:
    """BM25's term score of a posting p, as SQL, for the average length held now."""

    def __init__(self, c: SearchConfig, n: int, average_length: float):
        self.arguments = [c.bm25_k1 + 1, c.bm25_k1, c.bm25_b, c.bm25_b, average_length]
        self.n, self.average_length = n, average_length

    @classmethod
    def read(cls, db: Connection, c: SearchConfig) -> tuple[_Formula, dict | None]:
        """The formula for the stats held now, and the bound settings of the postings' index (ar_meta)."""
        n, total, bound = db.execute("SELECT n, total_length, (SELECT value FROM ar_meta WHERE key = "
                                     "'bm25_bound') FROM ar_stats").fetchone()
        return cls(c, n, max(total / max(n, 1), 1e-9)), bound

    @staticmethod
    def score(idf: str) -> str:
        """The term score for the idf `idf` (SQL), taking the arguments in order after any of `idf`."""
        return f"({idf} * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.length / %s)))"


def bm25_lists(idf: dict[str, float], bound: dict, formula: _Formula, where: str, arguments: list) -> list:
    """One posting list per query term for pruned_top: its postings in bound order, each with its
    term score and the most any later posting scores (the stored bound scaled up to the average
    length now, bound_sql)."""
    scale = max(1.0, formula.average_length / float(bound["length"])) * (1 + 1e-6)
    key = bound_sql(bound, "p.")
    return [(f"SELECT p.row, {formula.score('%s')}, %s * {key} FROM ar_postings p {_chunks_for(where, 'p')} "
             f"WHERE p.term = %s "
             f"{where} ORDER BY {key} DESC", [weight, *formula.arguments, weight * scale, term, *arguments])
            for term, weight in idf.items()]


def bm25_of_rows(db: Connection, idf: dict[str, float], rows: list[int], formula: _Formula) -> dict[int, float]:
    """The BM25 score of each given row holding a query term: each posting looked up by term and row
    (LIMIT 1 keeps the planner from joining by a scan of every posting of the terms)."""
    if not rows or not idf:
        return {}
    return {int(r): float(s) for r, s in db.execute(
        f"""SELECT r.row, sum(p.score)::float4 FROM unnest(%s::bigint[]) AS r(row)
        CROSS JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf)
        CROSS JOIN LATERAL (SELECT {formula.score("q.idf")} AS score FROM ar_postings p
                            WHERE p.term = q.term AND p.row = r.row LIMIT 1) p GROUP BY r.row""",
        [rows, list(idf), list(idf.values()), *formula.arguments]).fetchall()}


def bm25_given(db: Connection, tokens: list[str], rows: list[int], c: SearchConfig) -> dict[int, float]:
    """The BM25 score of each given row holding a query term, for the stats held now."""
    formula = _Formula.read(db, c)[0]
    return bm25_of_rows(db, idf_of(db, tokens, formula.n), rows, formula)


def vector_rows(db: Connection, vector: np.ndarray, k: int, where: str, arguments: list, filtered: bool,
                embedder: Embedder, config: Config) -> list[tuple[int, float]]:
    """Cosine similarity: a sparse embedder's postings pruned (_pruned); else the HNSW index
    when there is one, no filter and exact_search_below rows or more (as the embedded index), else an
    exact scan of the rows the filter keeps (so a filter keeping few rows still gives k hits)."""
    if embedder_trait(embedder, "sparse"):
        found = pruned_top(db, sparse_lists(vector, where, arguments), k, lambda rows: sparse_of_rows(db, vector, rows),
                           nonnegative=False, deepest=SPARSE_DEEPEST) or sparse_sum(db, vector, k, where, arguments)
        if found is not None:
            return found
    exact = filtered or not indexed(embedder) or \
        db.execute("SELECT n FROM ar_stats").fetchone()[0] < config.index.exact_search_below
    if exact:
        db.execute("SET LOCAL enable_indexscan = off")
    db.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(int(config.search.hnsw_ef), k))}")
    ties = ", c.row" if exact else ""  # a second sort key would keep the HNSW index from being used
    rows = db.execute(f"SELECT c.row, 1 - (c.embedding <=> %s) FROM ar_chunks c WHERE true {where} "
                      f"ORDER BY c.embedding <=> %s{ties} LIMIT %s",
                      [vector, *arguments, vector, k]).fetchall()
    return [(int(r), float(s)) for r, s in rows]


def sparse_lists(vector: np.ndarray, where: str, arguments: list) -> list:
    """One posting list per non-zero dimension of the query for pruned_top: the rows holding it, the
    weight times the query's read from the largest product down (weights ascending where the
    query's is negative); a posting's product is the most any later one gives."""
    return [(f"SELECT s.row, %s * s.weight, %s * s.weight FROM ar_sparse s {_chunks_for(where, 's')} "
             f"WHERE s.dim = %s {where} ORDER BY s.weight {'DESC' if weight > 0 else 'ASC'}",
             [weight, weight, dim, *arguments]) for dim, weight in zip(*_nonzero(vector), strict=True)]


def _nonzero(vector: np.ndarray) -> tuple[list[int], list[float]]:
    """A sparse vector's non-zero dimensions and their weights."""
    dims = np.flatnonzero(vector)
    return dims.tolist(), vector[dims].astype(float).tolist()


def sparse_sum(db: Connection, vector: np.ndarray, k: int, where: str,
               arguments: list) -> list[tuple[int, float]] | None:
    """The k rows of best dot product with the sparse vector, every posting of its dimensions summed;
    None when fewer than k are above 0 (rows at 0 and below rank next: the exact scan orders them)."""
    _roomy(db)
    rows = db.execute(f"""SELECT s.row, sum(q.weight * s.weight) AS score FROM ar_sparse s
        JOIN unnest(%s::integer[], %s::float8[]) AS q(dim, weight) USING (dim) {_chunks_for(where, "s")}
        WHERE true {where} GROUP BY s.row ORDER BY score DESC, s.row LIMIT %s""",
                      [*_nonzero(vector), *arguments, k]).fetchall()
    found = [(int(r), float(score)) for r, score in rows if score > 0]
    return found if len(found) == k else None


def sparse_of_rows(db: Connection, vector: np.ndarray, rows: list[int]) -> dict[int, float]:
    """Each given row's dot product with the sparse vector, from its postings (each looked up by row
    and dimension): its cosine similarity, since the hashing embedder's vectors are unit length."""
    if not rows:
        return {}
    return {int(r): float(s) for r, s in db.execute(
        """SELECT r.row, sum(q.weight * s.weight) FROM unnest(%s::bigint[]) AS r(row)
        CROSS JOIN unnest(%s::integer[], %s::float8[]) AS q(dim, weight)
        CROSS JOIN LATERAL (SELECT s.weight FROM ar_sparse s WHERE s.row = r.row AND s.dim = q.dim LIMIT 1) s
        GROUP BY r.row""", (rows, *_nonzero(vector))).fetchall()}


def hits_of(db: Connection, fused: list) -> list[Hit]:
    """The hits of fused (row, score, ranks), read from ar_chunks, in that order."""
    if not fused:
        return []
    found = {row: rest for row, *rest in db.execute(
        "SELECT row, chunk_id, doc_id, source, title, text, metadata FROM ar_chunks WHERE row = ANY(%s)",
        ([row for row, _, _ in fused],)).fetchall()}
    return [Hit(id=found[row][0], doc_id=found[row][1], source=found[row][2], title=found[row][3],
                text=found[row][4], score=score, ranks=ranks, metadata=found[row][5])
            for row, score, ranks in fused if row in found]


def idf_of(db: Connection, tokens: list[str], n: int | None = None) -> dict[str, float]:
    """BM25 idf (bm25_idf, as the embedded index) of each distinct token some chunk holds, for `n`
    chunks (read from ar_stats if not given)."""
    terms = list(dict.fromkeys(tokens))
    n = db.execute("SELECT n FROM ar_stats").fetchone()[0] if n is None else n
    rows = db.execute("SELECT term, df FROM ar_terms WHERE term = ANY(%s)", (terms,)).fetchall()
    return {term: float(bm25_idf(n, df)) for term, df in rows}


def idf_within(db: Connection, terms: list[str], where: str, arguments: list) -> dict[str, float]:
    """idf_of among the chunks `where` keeps (conditions on ar_chunks c): N and df counted there."""
    n = db.execute(f"SELECT count(*) FROM ar_chunks c WHERE true {where}", arguments).fetchone()[0]
    rows = db.execute(f"""SELECT p.term, count(DISTINCT p.row) FROM ar_postings p JOIN ar_chunks c ON c.row = p.row
        WHERE p.term = ANY(%s) {where} GROUP BY p.term""", [terms, *arguments]).fetchall()
    return {term: float(bm25_idf(n, df)) for term, df in rows if df}


# -- graph search ----------------------------------------------------------------------------------


def rows_naming(db: Connection, nodes: list[str]) -> dict[str, list[int]]:
    """Each node's rows (pagerank's `rows_of`); a hub, in more than HUB_ROWS rows, is left out."""
    return {node: rows for node, rows in db.execute(
        "SELECT node, array_agg(DISTINCT row) FROM (SELECT a AS node, row FROM ar_edges WHERE a = ANY(%s) "
        "UNION ALL SELECT b, row FROM ar_edges WHERE b = ANY(%s)) e GROUP BY node HAVING count(DISTINCT row) <= %s",
        (nodes, nodes, HUB_ROWS)).fetchall()} if nodes else {}


def nodes_in(db: Connection, rows: list[int]) -> dict[int, list[str]]:
    """The nodes each row's edges join (pagerank's `nodes_of`)."""
    return {row: nodes for row, nodes in db.execute(
        "SELECT row, array_agg(DISTINCT node) FROM (SELECT row, a AS node FROM ar_edges WHERE row = ANY(%s) "
        "UNION ALL SELECT row, b FROM ar_edges WHERE row = ANY(%s)) e GROUP BY row", (rows, rows)).fetchall()} \
        if rows else {}


def start_nodes(db: Connection, query: str) -> list[str]:
    """The graph's nodes the query names, as KnowledgeGraph.find gives them: its names that are
    nodes, then node names of four characters or more that it contains (long ones first, five; of
    one length, the one the graph met first)."""
    named = list(dict.fromkeys(node_key(n) for n in names(query)))
    held = {row[0] for row in db.execute("SELECT a FROM ar_edges WHERE a = ANY(%s) UNION "
                                         "SELECT b FROM ar_edges WHERE b = ANY(%s)", (named, named)).fetchall()}
    inside = [row[0] for row in db.execute(
        "SELECT node FROM (SELECT a AS node, row, ctid FROM ar_edges UNION ALL SELECT b, row, ctid FROM ar_edges) n "
        "WHERE length(node) >= 4 AND strpos(%s, node) > 0 GROUP BY node "
        "ORDER BY length(node) DESC, min(row), min(ctid) LIMIT 5", (node_key(query),)).fetchall()]
    return list(dict.fromkeys([k for k in named if k in held] + inside))


def neighbours(db: Connection, nodes: list[str]) -> dict[str, list[tuple[str, list[int]]]]:
    """Each node's neighbours with the rows behind the edge to each (walk's `neighbours`)."""
    near: dict[str, list[tuple[str, list[int]]]] = {}
    for node, other, rows in db.execute(
            "SELECT node, other, array_agg(row) FROM (SELECT a AS node, b AS other, row FROM ar_edges "
            "WHERE a = ANY(%s) UNION ALL SELECT b, a, row FROM ar_edges WHERE b = ANY(%s)) e GROUP BY node, other",
            (nodes, nodes)).fetchall():
        near.setdefault(node, []).append((other, rows))
    return near


def path_names(db: Connection, pairs: list[tuple]) -> list[str]:
    """The name each (node, other) step adds to a path: the other's name as first written (the
    lowest row's edge, then the first edge that row gave), as KnowledgeGraph keeps it."""
    keys = list({other for _, other in pairs})
    labels = dict(db.execute(
        "SELECT DISTINCT ON (key) key, label FROM (SELECT a AS key, a_label AS label, row, ctid FROM ar_edges "
        "WHERE a = ANY(%s) UNION ALL SELECT b, b_label, row, ctid FROM ar_edges WHERE b = ANY(%s)) x "
        "ORDER BY key, row, ctid", (keys, keys)).fetchall()) if keys else {}
    return [labels.get(other, other) for _, other in pairs]
