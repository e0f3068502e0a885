"""The PostgreSQL backend against the embedded knowledge base: retrieval parity on the dev sets and
speed at 10,000-100,000 synthetic chunks, in one run; writes a JSON and a Markdown report.

    pip install -e '.[test]'     # psycopg, pgvector and pgserver
    python -m agentic_rag.eval.postgres_parity --data ../shared/data --sizes 10000,30000 --out reports/postgres

Without `--url` it starts a PostgreSQL 16 with pgvector from the pgserver wheel in a temporary
folder; every knowledge base gets a new database. Parity: for every answerable question of each
set, hybrid search (k = 10) in both backends with the hashing embedder: recall@5, MRR@10 and the
top-10 agreement (shared hits over 10). Speed (hashing embedder at 1,024 dimensions, which pgvector
can index, so both backends use the same vectors): building, hybrid search p50/p95 on the Zipf
query mix, and adding 100 documents (with the embedded save), per size.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from .._config import IndexConfig
from ..kb import Document, KnowledgeBase
from ..kb.backends._postgres import PostgresKnowledgeBase
from ..kb.embedders._embedders import HashingEmbedder
from ._datasets import load_set
from ._metrics import mrr_at_k, percentile, recall_at_k
from ._report import write_report
from .scale import queries, texts

SETS = ("squad2", "hotpotqa", "musique", "cmrc2018", "rgb_zh")


def _database(server_url: str) -> str:
    """A new empty database on the server; its URL."""
    import psycopg

    name = f"parity_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    head, _, tail = server_url.partition("?")
    return head.rsplit("/", 1)[0] + f"/{name}" + (f"?{tail}" if tail else "")


def parity(server_url: str, data: Path, name: str) -> dict:
    documents, questions = load_set(data / name)
    asked = [q for q in questions if q.answerable and q.relevant_ids]
    embedded, pg = KnowledgeBase(), PostgresKnowledgeBase(_database(server_url))
    embedded.add_documents(documents)
    pg.add_documents(documents)
    figures: dict[str, Any] = {"embedded": {"r@5": [], "mrr@10": []}, "postgres": {"r@5": [], "mrr@10": []},
                               "agreement": []}
    for q in asked:
        found: dict[str, list[str]] = {}
        for backend, kb in (("embedded", embedded), ("postgres", pg)):
            hits = kb.search(q.question, k=10)
            found[backend] = [h.id for h in hits]
            ids = [h.doc_id for h in hits]
            figures[backend]["r@5"].append(recall_at_k(ids, q.relevant_ids, 5))
            figures[backend]["mrr@10"].append(mrr_at_k(ids, q.relevant_ids, 10))
        figures["agreement"].append(len(set(found["embedded"]) & set(found["postgres"])) / 10)
    pg.close()
    mean = lambda values: round(sum(values) / max(1, len(values)), 4)  # noqa: E731
    return {"questions": len(asked), "chunks": len(embedded),
            **{f"{b} {m}": mean(figures[b][m]) for b in ("embedded", "postgres") for m in ("r@5", "mrr@10")},
            "top10_agreement": mean(figures["agreement"])}


def speed(server_url: str, size: int, query_count: int) -> dict:
    config, embedder = IndexConfig(chunk_size=4000, chunk_overlap=0), HashingEmbedder(1024)
    embedder.sparse = False  # as a dense embedder: pgvector's HNSW and ours index the same vectors
    documents = [Document(f"c{i}", text) for i, text in enumerate(texts(size))]
    extra = [Document(f"new{i}", text) for i, text in enumerate(texts(100, seed=99))]
    asked = queries("zipf", query_count)
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        for backend in ("embedded", "postgres"):
            start = time.perf_counter()
            kb: KnowledgeBase | PostgresKnowledgeBase
            if backend == "embedded":
                kb = KnowledgeBase(embedder, config)
                kb.add_documents(documents)
                kb.save(folder)
            else:
                kb = PostgresKnowledgeBase(_database(server_url), embedder, config)
                kb.add_documents(documents)
            build = time.perf_counter() - start
            ms = []
            for q in asked:
                start = time.perf_counter()
                kb.search(q, k=10)
                ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            kb.add_documents(extra)
            kb.save(folder)
            report[backend] = {"build_s": round(build, 2), "hybrid_p50_ms": round(percentile(ms, 50), 3),
                               "hybrid_p95_ms": round(percentile(ms, 95), 3),
                               "add_100_s": round(time.perf_counter() - start, 3)}
    return report


def markdown(report: dict) -> str:
    lines = ["# PostgreSQL against the embedded knowledge base: hybrid search parity (k = 10, hashing embedder) and "
             "speed", "", "## Parity on the answerable questions of each set: recall@5, MRR@10, top-10 agreement", "",
             "| set | questions | chunks | r@5 embedded / postgres | mrr@10 embedded / postgres | top-10 agreement |",
             "|---|---|---|---|---|---|"]
    for name, r in report["parity"].items():
        lines.append(f"| {name} | {r['questions']} | {r['chunks']} | {r['embedded r@5']:.3f} / {r['postgres r@5']:.3f} "
                     f"| {r['embedded mrr@10']:.3f} / {r['postgres mrr@10']:.3f} | {r['top10_agreement']:.3f} |")
    if report["speed"]:
        lines += ["", "## Speed on synthetic chunks (hashing embedder at 1,024 dimensions), embedded / postgres: "
                  "seconds, ms", "",
                  "| chunks | build s embedded / postgres | hybrid p50 ms | hybrid p95 ms | add 100 docs s |",
                  "|---|---|---|---|---|"]
        for size, r in report["speed"].items():
            e, p = r["embedded"], r["postgres"]
            lines.append(f"| {int(size):,} | {e['build_s']} / {p['build_s']} | {e['hybrid_p50_ms']} / "
                         f"{p['hybrid_p50_ms']} | {e['hybrid_p95_ms']} / {p['hybrid_p95_ms']} | {e['add_100_s']} / "
                         f"{p['add_100_s']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data", help="the evaluation sets' folder")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--sizes", default="", help="comma-separated chunk counts for the speed part (none: skip)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--url", help="a PostgreSQL server's URL (default: start one with pgserver)")
    parser.add_argument("--out", default="reports/postgres")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as pgdata:
        server, url = None, args.url
        if not url:
            import pgserver

            server = pgserver.get_server(pgdata, cleanup_mode="stop")
            url = server.get_uri()
        try:
            report = {"parity": {name: parity(url, Path(args.data), name) for name in args.sets.split(",") if name},
                      "speed": {int(s): speed(url, int(s), args.queries) for s in args.sizes.split(",") if s}}
        finally:
            if server is not None:
                server.cleanup()
    write_report(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
