"""The PostgreSQL knowledge base's retrievers in SQL, as functions of a connection (the class in
_postgres runs them in one read-only snapshot): filters as SQL conditions, BM25 with the embedded
index's formula, cosine similarity through the HNSW index or an exact scan, the hits' rows, idf,
and graph search: the nodes a query names, each node's neighbours and the names on a path, walked
and ranked by the embedded knowledge base's own code (_graph.walk, _search.graph_ranking)."""
from __future__ import annotations

import numpy as np

from ..._config import Config, SearchConfig
from ...text._names import names
from ...text._tokenize import tokenize
from .._hit import Hit
from ..embedders._embedders import Embedder
from ..indexes._bm25 import bm25_idf
from ..indexes._graph import HUB_ROWS, node_key, walk
from ._postgres_sql import indexed
from ._search import graph_ranking, pagerank_ranking

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


def _condition_sql(column: str, condition, field: str | None = None) -> tuple[str, list]:
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


def bm25_rows(db, tokens: list[str], k: int, where: str, arguments: list,
              c: SearchConfig) -> list[tuple[int, float]]:
    """BM25 in SQL: the embedded index's formula, k1 and b."""
    terms = list(dict.fromkeys(tokens))
    if not terms:
        return []
    n, total = db.execute("SELECT n, total_length FROM ar_stats").fetchone()
    idf = idf_of(db, terms)
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


def vector_rows(db, vector: np.ndarray, k: int, where: str, arguments: list, filtered: bool,
                embedder: Embedder, config: Config) -> list[tuple[int, float]]:
    """Cosine similarity: the HNSW index when there is one, no filter and exact_search_below rows or
    more (as the embedded index), else an exact scan of the rows the filter keeps (so a filter
    keeping few rows still gives k hits)."""
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


def hits_of(db, fused: list) -> list[Hit]:
    """The hits of fused (row, score, ranks), read from ar_chunks, in that order."""
    if not fused:
        return []
    found = {row: rest for row, *rest in db.execute(
        "SELECT row, chunk_id, doc_id, source, title, text, metadata FROM ar_chunks WHERE row = ANY(%s)",
        ([row for row, _, _ in fused],)).fetchall()}
    return [Hit(id=found[row][0], doc_id=found[row][1], source=found[row][2], title=found[row][3],
                text=found[row][4], score=score, ranks=ranks, metadata=found[row][5])
            for row, score, ranks in fused if row in found]


def idf_of(db, tokens: list[str]) -> dict[str, float]:
    """BM25 idf (bm25_idf, as the embedded index) of each distinct token some chunk holds."""
    terms = list(dict.fromkeys(tokens))
    n = db.execute("SELECT n FROM ar_stats").fetchone()[0]
    rows = db.execute("SELECT term, df FROM ar_terms WHERE term = ANY(%s)", (terms,)).fetchall()
    return {term: float(bm25_idf(n, df)) for term, df in rows}


def idf_within(db, terms: list[str], where: str, arguments: list) -> dict[str, float]:
    """idf_of among the chunks `where` keeps (conditions on ar_chunks c): N and df counted there."""
    n = db.execute(f"SELECT count(*) FROM ar_chunks c WHERE true {where}", arguments).fetchone()[0]
    rows = db.execute(f"""SELECT p.term, count(DISTINCT p.row) FROM ar_postings p JOIN ar_chunks c ON c.row = p.row
        WHERE p.term = ANY(%s) {where} GROUP BY p.term""", [terms, *arguments]).fetchall()
    return {term: float(bm25_idf(n, df)) for term, df in rows if df}


# -- graph search ----------------------------------------------------------------------------------


def graph_hits(db, query: str, k: int, hops: int, search: SearchConfig) -> list[Hit]:
    """The chunks behind the edges within `hops` of the names in the query, ranked as the embedded
    knowledge base ranks them (walk, graph_ranking), one query per hop."""
    starts = start_nodes(db, query)
    found = walk(lambda nodes: neighbours(db, nodes), lambda pairs: path_names(db, pairs),
                 dict(zip(starts, path_names(db, [(None, key) for key in starts]), strict=True)), hops)
    rows = list(found)
    scores = dict.fromkeys(rows, 0.0)
    scores.update(bm25_rows(db, tokenize(query), len(rows), "AND p.row = ANY(%s)", [rows], search) if rows else [])
    ranked = graph_ranking(found, scores, k)
    hits = hits_of(db, [(row, score, ranks) for row, score, ranks, _ in ranked])
    return [h.model_copy(update={"path": path}) for h, (_, _, _, path) in zip(hits, ranked, strict=True)]


def pagerank_hits(db, query: str, k: int, hops: int, seeds: dict[str, float], rrf_k: int) -> list[Hit]:
    """The k chunks personalized PageRank from the query's names and the seed chunks ranks first,
    fused with the seeds' ranking, as the embedded knowledge base ranks them (pagerank_ranking)."""
    held = {row: (text, seeds[c]) for c, row, text in db.execute(
        "SELECT chunk_id, row, text FROM ar_chunks WHERE chunk_id = ANY(%s)", (list(seeds),)).fetchall()}
    starts = start_nodes(db, query)
    labels = dict(zip(starts, path_names(db, [(None, key) for key in starts]), strict=True))
    return hits_of(db, pagerank_ranking(query, labels, held, lambda nodes: rows_naming(db, nodes),
                                        lambda rows: nodes_in(db, rows), hops, k, rrf_k))


def rows_naming(db, nodes: list[str]) -> dict[str, list[int]]:
    """Each node's rows (pagerank's `rows_of`); a hub, in more than HUB_ROWS rows, is left out."""
    return {node: rows for node, rows in db.execute(
        "SELECT node, array_agg(DISTINCT row) FROM (SELECT a AS node, row FROM ar_edges WHERE a = ANY(%s) "
        "UNION ALL SELECT b, row FROM ar_edges WHERE b = ANY(%s)) e GROUP BY node HAVING count(DISTINCT row) <= %s",
        (nodes, nodes, HUB_ROWS)).fetchall()} if nodes else {}


def nodes_in(db, rows: list[int]) -> dict[int, list[str]]:
    """The nodes each row's edges join (pagerank's `nodes_of`)."""
    return {row: nodes for row, nodes in db.execute(
        "SELECT row, array_agg(DISTINCT node) FROM (SELECT row, a AS node FROM ar_edges WHERE row = ANY(%s) "
        "UNION ALL SELECT row, b FROM ar_edges WHERE row = ANY(%s)) e GROUP BY row", (rows, rows)).fetchall()} \
        if rows else {}


def start_nodes(db, query: str) -> list[str]:
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


def neighbours(db, nodes: list[str]) -> dict[str, list[tuple[str, list[int]]]]:
    """Each node's neighbours with the rows behind the edge to each (walk's `neighbours`)."""
    near: dict[str, list[tuple[str, list[int]]]] = {}
    for node, other, rows in db.execute(
            "SELECT node, other, array_agg(row) FROM (SELECT a AS node, b AS other, row FROM ar_edges "
            "WHERE a = ANY(%s) UNION ALL SELECT b, a, row FROM ar_edges WHERE b = ANY(%s)) e GROUP BY node, other",
            (nodes, nodes)).fetchall():
        near.setdefault(node, []).append((other, rows))
    return near


def path_names(db, pairs: list[tuple]) -> list[str]:
    """The name each (node, other) step adds to a path: the other's name as first written (the
    lowest row's edge, then the first edge that row gave), as KnowledgeGraph keeps it."""
    keys = list({other for _, other in pairs})
    labels = dict(db.execute(
        "SELECT DISTINCT ON (key) key, label FROM (SELECT a AS key, a_label AS label, row, ctid FROM ar_edges "
        "WHERE a = ANY(%s) UNION ALL SELECT b, b_label, row, ctid FROM ar_edges WHERE b = ANY(%s)) x "
        "ORDER BY key, row, ctid", (keys, keys)).fetchall()) if keys else {}
    return [labels.get(other, other) for _, other in pairs]
