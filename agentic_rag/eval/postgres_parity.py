"""The PostgreSQL backend against the embedded knowledge base: ranking parity on every dev set and
speed at 10,000-100,000 synthetic chunks, in one run; writes a JSON and a Markdown report.

    pip install -e '.[test]'     # psycopg, pgvector and pgserver
    python -m agentic_rag.eval.postgres_parity --data ../shared/data --sizes 10000,30000 --out reports/postgres

Without `--url` it starts a PostgreSQL 16 with pgvector from the pgserver wheel in a temporary
folder; every knowledge base gets a new database. Parity, on every set folder of `--data` with a
corpus (corpus.jsonl, or real files in docs/) and questions.jsonl, hashing embedder, k = 10: for
each question, BM25, vector and hybrid search, graph search and PageRank search in both backends;
per question the top-10 agreement (hits both return over the longer list: 1 when both return none)
and exact order (the same ids in the same order), averaged per set and per dev half
(_bench.half_of); recall@5 and MRR@10 of hybrid search in each backend. Target: top-10 agreement
>= 0.98 in every mode on every set. Sets sharing a corpus (conversations, off-topic sets) share
one pair of knowledge bases.
Speed, per size and embedder: the default hashing embedder (2,048 sparse dimensions: postings in
both backends) and e5-sized dense vectors (DenseProjection: 384 dimensions, pgvector's HNSW and
ours): building, BM25 and hybrid search p50/p95 on the Zipf query mix (k = 10), and adding 100
documents (with the embedded save). The server it starts gets maintenance_work_mem 1GB, as
docs/how-to/postgres.md advises for building HNSW indexes.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..core import IndexConfig
from ..kb import Document, Hit, KnowledgeBase, KnowledgeBaseBackend, PostgresKnowledgeBase
from ..kb.embedders import HashingEmbedder, SymmetricEmbedder, l2_normalize
from ..kb.ingestion import load_documents
from ._bench import half_of
from ._datasets import Question, _read_jsonl, load_set
from ._metrics import mrr_at_k, percentile, recall_at_k
from ._report import write_report
from .scale import queries, texts

MODES = ("bm25", "vector", "hybrid", "graph", "pagerank")
TARGET = 0.98  # top-10 agreement, every mode, every set
K = 10


def new_database(server_url: str, prefix: str = "parity") -> str:
    """A new empty database on the server behind `server_url` (named `prefix`_ and a random suffix); its URL."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    head, _, tail = server_url.partition("?")
    return head.rsplit("/", 1)[0] + f"/{name}" + (f"?{tail}" if tail else "")


def dev_sets(data: Path) -> list[str]:
    """The set folders under `data` that parity can run: questions.jsonl beside corpus.jsonl or docs/."""
    return sorted(folder.name for folder in data.iterdir() if (folder / "questions.jsonl").is_file()
                  and ((folder / "corpus.jsonl").is_file() or (folder / "docs").is_dir()))


def read_set(folder: Path) -> tuple[list[Document], list[Question], str]:
    """A set's documents, questions and a digest of its corpus (the same corpus, the same digest)."""
    if (folder / "corpus.jsonl").is_file():
        documents, questions = load_set(folder)
        return documents, questions, hashlib.sha256((folder / "corpus.jsonl").read_bytes()).hexdigest()
    questions = [Question(id=str(row["id"]), question=row["question"], answers=row.get("answers", []),
                          relevant_ids=[], answerable=bool(row.get("answerable", True)), kind=row.get("kind", ""))
                 for row in _read_jsonl(folder / "questions.jsonl")]   # evidence named by file and page, not id
    documents = load_documents(folder / "docs").documents
    digest = hashlib.sha256(repr([(d.id, d.content_hash()) for d in documents]).encode()).hexdigest()
    return documents, questions, digest


def agreement(ours: list[str], theirs: list[str]) -> tuple[float, float]:
    """(shared ids over the longer list, 1.0 if the lists are equal in order else 0.0); both empty agree."""
    if not ours and not theirs:
        return 1.0, 1.0
    return len(set(ours) & set(theirs)) / max(len(ours), len(theirs)), float(ours == theirs)


def _ranked(kb: KnowledgeBaseBackend, question: str, mode: str) -> list[Hit]:
    if mode == "graph":
        return kb.graph_search(question, k=K)
    if mode == "pagerank":
        return kb.pagerank_search(question, k=K)
    return kb.search(question, k=K, mode=mode)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def compare(kbs: dict, questions: list[Question]) -> dict:
    """Per split (all, half 1, half 2) and mode, the mean top-10 agreement and exact order; and hybrid
    search's recall@5 and MRR@10 in each backend over the questions with relevant ids."""
    per: dict = {}
    quality: dict = {f"{b} {m}": [] for b in kbs for m in ("r@5", "mrr@10")}
    for q in questions:
        for mode in MODES:
            found = {b: _ranked(kb, q.question, mode) for b, kb in kbs.items()}
            shared, exact = agreement(*([h.id for h in hits] for hits in found.values()))
            for split in ("all", f"half {half_of(q.id)}"):
                per.setdefault(split, {}).setdefault(mode, ([], []))
                per[split][mode][0].append(shared)
                per[split][mode][1].append(exact)
            if mode == "hybrid" and q.answerable and q.relevant_ids:
                for b, hits in found.items():
                    ids = [h.doc_id for h in hits]
                    quality[f"{b} r@5"].append(recall_at_k(ids, q.relevant_ids, 5))
                    quality[f"{b} mrr@10"].append(mrr_at_k(ids, q.relevant_ids, 10))
    agreements = {split: {"questions": len(by_mode[MODES[0]][0]),
                          **{mode: {"top10": _mean(shared), "exact": _mean(exact)}
                             for mode, (shared, exact) in by_mode.items()}}
                  for split, by_mode in sorted(per.items())}
    return {"agreement": agreements, **{name: _mean(values) for name, values in quality.items()}}


def parity(server_url: str, data: Path, names: list[str], max_docs: int, max_questions: int) -> dict:
    """compare() on each set, the corpus capped at `max_docs` documents and the questions at the first
    `max_questions` (0: no cap); one pair of knowledge bases per distinct corpus."""
    built: dict[tuple[str, int], dict[str, KnowledgeBaseBackend]] = {}
    opened: list[PostgresKnowledgeBase] = []
    report = {}
    try:
        for name in names:
            documents, questions, digest = read_set(data / name)
            documents, questions = documents[:max_docs or None], questions[:max_questions or None]
            start = time.perf_counter()
            if (digest, len(documents)) not in built:
                embedded, pg = KnowledgeBase(), PostgresKnowledgeBase(new_database(server_url))
                opened.append(pg)
                embedded.add_documents(documents)
                pg.add_documents(documents)
                built[digest, len(documents)] = {"embedded": embedded, "postgres": pg}
            kbs = built[digest, len(documents)]
            report[name] = {"documents": len(documents), "chunks": len(kbs["embedded"]),
                            **compare(kbs, questions), "seconds": round(time.perf_counter() - start, 1)}
            print(f"{name}: {report[name]['agreement']['all']}", file=sys.stderr)
    finally:
        for pg in opened:
            pg.close()
    return report


class DenseProjection(SymmetricEmbedder):
    """e5-sized dense vectors without e5's cost (it embeds a few chunks a second here): the hashing
    embedder's 2,048 dimensions projected to 384 by a fixed Gaussian matrix (Johnson-Lindenstrauss:
    similarities kept roughly), every dimension non-zero."""

    name, dimension, fusion, batch_size = "dense-projection", 384, ("rrf", 1.0), 1024

    def __init__(self) -> None:
        self._hashing = HashingEmbedder()
        self._projection = np.random.default_rng(11).standard_normal((2048, 384)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return l2_normalize(self._hashing.embed(texts) @ self._projection)


def speed(server_url: str, size: int, query_count: int, embedders: tuple[str, ...] = ("hashing", "dense 384")) -> dict:
    """Each embedder's building, search and add times in both backends at `size` synthetic chunks."""
    config = IndexConfig(chunk_size=4000, chunk_overlap=0)
    documents = [Document(f"c{i}", text) for i, text in enumerate(texts(size))]
    extra = [Document(f"new{i}", text) for i, text in enumerate(texts(100, seed=99))]
    asked = queries("zipf", query_count)
    report: dict = {}
    made = {"hashing": HashingEmbedder, "dense 384": DenseProjection}
    for name in embedders:
        embedder = made[name]()
        for backend in ("embedded", "postgres"):
            with tempfile.TemporaryDirectory() as folder:
                start = time.perf_counter()
                kb: KnowledgeBase | PostgresKnowledgeBase
                if backend == "embedded":
                    kb = KnowledgeBase(embedder, config)
                    kb.add_documents(documents)
                    kb.save(folder)
                else:
                    kb = PostgresKnowledgeBase(new_database(server_url), embedder, config)
                    kb.add_documents(documents)
                entry = {"build_s": round(time.perf_counter() - start, 2)}
                entry.update(_search_times(kb, asked))
                start = time.perf_counter()
                kb.add_documents(extra)
                kb.save(folder)
                entry["add_100_s"] = round(time.perf_counter() - start, 3)
                if isinstance(kb, PostgresKnowledgeBase):
                    kb.close()
                report.setdefault(name, {})[backend] = entry
                print(f"{size} {name} {backend}: {entry}", file=sys.stderr)
    return report


def _search_times(kb: KnowledgeBaseBackend, asked: list[str]) -> dict:
    """BM25 and hybrid search's p50 and p95 (ms, k = 10) over the queries, each timed alone."""
    times = {}
    for mode in ("bm25", "hybrid"):
        ms = []
        for q in asked:
            start = time.perf_counter()
            kb.search(q, k=10, mode=mode)
            ms.append((time.perf_counter() - start) * 1000)
        times.update({f"{mode}_p50_ms": round(percentile(ms, 50), 3), f"{mode}_p95_ms": round(percentile(ms, 95), 3)})
    return times


def large(server_url: str, size: int, query_count: int, cap_minutes: float, cap_gb: float) -> dict:
    """PostgreSQL alone at up to `size` synthetic chunks with e5-sized dense vectors (DenseProjection),
    built in doubling steps (each step at least as large as what is held, so each one rebuilds the
    HNSW index after its load, as a bulk add does): after each step, the database's size, BM25 and
    hybrid p50/p95; at the end, adding 100 documents. A step that would start past `cap_minutes` of
    building, or a database past `cap_gb`, ends the run: the report says which, at what size."""
    config, embedder = IndexConfig(chunk_size=4000, chunk_overlap=0), DenseProjection()
    kb = PostgresKnowledgeBase(new_database(server_url, "large"), embedder, config)
    steps = [size >> n for n in range(5, -1, -1) if size >> n]  # 1/32 of it, then doubling to all of it
    asked, held, building = queries("zipf", query_count), 0, 0.0
    report: dict = {"steps": [], "stopped": None}
    for target in steps:
        if building > cap_minutes * 60:
            report["stopped"] = f"the build reached {building / 60:.0f} minutes (cap {cap_minutes:g})"
            break
        start = time.perf_counter()
        kb.add_documents(Document(f"c{i}", text) for i, text in enumerate(texts(target - held, seed=held), held))
        building, held = building + time.perf_counter() - start, target
        step = {"chunks": held, "build_s_total": round(building, 1), "database_gb": round(_gigabytes(kb), 2)}
        step.update(_search_times(kb, asked))
        report["steps"].append(step)
        print(f"large: {step}", file=sys.stderr)
        if step["database_gb"] > cap_gb:
            report["stopped"] = f"the database reached {step['database_gb']} GB (cap {cap_gb:g})"
            break
    start = time.perf_counter()
    kb.add_documents(Document(f"new{i}", text) for i, text in enumerate(texts(100, seed=99)))
    report["add_100_s"] = round(time.perf_counter() - start, 3)
    kb.close()
    return report


def _gigabytes(kb: PostgresKnowledgeBase) -> float:
    return kb._read(lambda db: db.execute("SELECT pg_database_size(current_database())").fetchone()[0]) / 1e9


def floor(server_url: str, size: int, query_count: int, dimension: int = 384) -> dict:
    """What no search in PostgreSQL can beat on this machine: one round trip (SELECT 1) and one pgvector
    HNSW query (m 16, ef_construction 64, ef_search 40, k 10) over `size` random unit vectors of
    `dimension`, each timed `query_count` times from this process; and the index's build time."""
    import psycopg
    from pgvector.psycopg import register_vector

    rng = np.random.default_rng(7)
    with psycopg.connect(new_database(server_url, "floor"), autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(db)
        db.execute(f"CREATE TABLE floor (id int PRIMARY KEY, v vector({dimension}))")
        with db.cursor().copy("COPY floor (id, v) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for start in range(0, size, 10_000):
                block = rng.standard_normal((min(10_000, size - start), dimension)).astype(np.float32)
                for i, v in enumerate(block / np.linalg.norm(block, axis=1, keepdims=True)):
                    copy.write_row([start + i, v])
        started = time.perf_counter()
        db.execute("CREATE INDEX ON floor USING hnsw (v vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
        build = time.perf_counter() - started
        db.execute("SET hnsw.ef_search = 40")
        trips, searches = [], []
        for _ in range(query_count):
            started = time.perf_counter()
            db.execute("SELECT 1").fetchone()
            trips.append((time.perf_counter() - started) * 1000)
            query = rng.standard_normal(dimension).astype(np.float32)
            started = time.perf_counter()
            db.execute("SELECT id FROM floor ORDER BY v <=> %s LIMIT 10", (query / np.linalg.norm(query),)).fetchall()
            searches.append((time.perf_counter() - started) * 1000)
    return {"rows": size, "dimension": dimension, "hnsw_build_s": round(build, 1),
            "round_trip_p50_ms": round(percentile(trips, 50), 3), "hnsw_p50_ms": round(percentile(searches, 50), 3),
            "hnsw_p95_ms": round(percentile(searches, 95), 3)}


def _cell(r: dict) -> str:
    return "-" if r["top10"] is None else f"{r['top10']:.3f} / {r['exact']:.3f}"


def _missed(parity: dict) -> list[str]:
    """'set mode value' for every set and mode whose top-10 agreement is under the target."""
    return [f"{name} {mode} {r['agreement']['all'][mode]['top10']:.3f}" for name, r in parity.items()
            for mode in MODES if r["agreement"]["all"][mode]["top10"] < TARGET]


def markdown(report: dict) -> str:
    caps = report["caps"]
    capped = ", ".join(part for part in (caps["documents"] and f"the first {caps['documents']:,} documents",
                                         caps["questions"] and f"the first {caps['questions']:,} questions")
                       if part) or "nothing"
    lines = ["# PostgreSQL against the embedded knowledge base: ranking parity on the dev sets and speed", ""]
    if report["parity"]:
        lines += _parity_lines(report, capped)
    if report.get("floor"):
        f = report["floor"]
        lines += ["", f"## The floor: one round trip and one pgvector HNSW query ({f['rows']:,} random "
                      f"{f['dimension']}-dimensional vectors, m 16, ef_construction 64, ef_search 40, k 10)", "",
                  "| round trip p50 ms | HNSW query p50 ms | HNSW query p95 ms | HNSW build s |", "|---|---|---|---|",
                  f"| {f['round_trip_p50_ms']} | {f['hnsw_p50_ms']} | {f['hnsw_p95_ms']} | {f['hnsw_build_s']} |"]
    if report["speed"]:
        lines += _speed_lines(report)
    if report.get("large"):
        lines += _large_lines(report["large"])
    return "\n".join(lines) + "\n"


def _large_lines(large: dict) -> list[str]:
    lines = ["", "## PostgreSQL alone, built in doubling steps (384-dimensional dense vectors, k = 10)", "",
             "| chunks | build s (all steps) | database GB | BM25 p50 / p95 ms | hybrid p50 / p95 ms |",
             "|---|---|---|---|---|"]
    lines += [f"| {s['chunks']:,} | {s['build_s_total']} | {s['database_gb']} | {s['bm25_p50_ms']} / "
              f"{s['bm25_p95_ms']} | {s['hybrid_p50_ms']} / {s['hybrid_p95_ms']} |" for s in large["steps"]]
    return lines + ["", f"Adding 100 documents at the end: {large['add_100_s']} s. "
                        + (f"Stopped early: {large['stopped']}." if large["stopped"] else "Every step was built.")]


def _parity_lines(report: dict, capped: str) -> list[str]:
    lines = [f"Hashing embedder, k = {K}. Each cell: mean top-10 agreement (hits both backends return over the "
             f"longer list) / exact order (the same ids in the same order), per question. Target: top-10 "
             f"agreement >= {TARGET} in every mode on every set. Capped per set at {capped}.", "",
             "| set | split | documents | chunks | questions | " + " | ".join(MODES) + " |",
             "|---|---|---|---|---|" + "---|" * len(MODES)]
    for name, r in report["parity"].items():
        for split, a in r["agreement"].items():
            lines.append(f"| {name} | {split} | {r['documents']} | {r['chunks']} | {a['questions']} | "
                         + " | ".join(_cell(a[mode]) for mode in MODES) + " |")
    missed = _missed(report["parity"])
    lines += ["", f"**Target {'missed' if missed else 'met'}**" + (f": {', '.join(missed)}." if missed else
                                                                    " on every set and mode."), "",
              "Hybrid search's quality in each backend, on the answerable questions with relevant ids:", "",
              "| set | r@5 embedded / postgres | mrr@10 embedded / postgres |", "|---|---|---|"]
    for name, r in report["parity"].items():
        if r["embedded r@5"] is not None:
            lines.append(f"| {name} | {r['embedded r@5']:.3f} / {r['postgres r@5']:.3f} "
                         f"| {r['embedded mrr@10']:.3f} / {r['postgres mrr@10']:.3f} |")
    return lines


def _speed_lines(report: dict) -> list[str]:
    lines = ["", "## Speed on synthetic chunks, embedded / postgres: seconds, ms (k = 10, the Zipf query mix)", "",
             "| chunks | embedder | build s | BM25 p50 ms | hybrid p50 ms | hybrid p95 ms | postgres / embedded "
             "hybrid p50 | add 100 docs s |", "|---|---|---|---|---|---|---|---|"]
    for size, by_embedder in report["speed"].items():
        for name, r in by_embedder.items():
            e, p = r["embedded"], r["postgres"]
            lines.append(f"| {int(size):,} | {name} | {e['build_s']} / {p['build_s']} | {e['bm25_p50_ms']} / "
                         f"{p['bm25_p50_ms']} | {e['hybrid_p50_ms']} / {p['hybrid_p50_ms']} | {e['hybrid_p95_ms']} / "
                         f"{p['hybrid_p95_ms']} | {p['hybrid_p50_ms'] / max(e['hybrid_p50_ms'], 1e-9):.1f}x | "
                         f"{e['add_100_s']} / {p['add_100_s']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data", help="the evaluation sets' folder")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: every set found in --data; "
                                                   "none: no parity part)")
    parser.add_argument("--max-docs", type=int, default=0, help="documents of each corpus indexed (0: all)")
    parser.add_argument("--max-questions", type=int, default=200, help="questions asked a set (0: all)")
    parser.add_argument("--sizes", default="", help="comma-separated chunk counts for the speed part (none: skip)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedders", default="hashing,dense 384", help="the speed part's: hashing, dense 384 or both")
    parser.add_argument("--floor", type=int, default=0, metavar="ROWS",
                        help="also time one round trip and one pgvector HNSW query over ROWS random 384-dimensional "
                             "vectors: the floor no search can beat (0: skip)")
    parser.add_argument("--large", type=int, default=0, metavar="ROWS",
                        help="also a PostgreSQL-only run up to ROWS chunks with 384-dimensional vectors, built in "
                             "doubling steps (0: skip)")
    parser.add_argument("--cap-minutes", type=float, default=60, help="the large run's building time cap")
    parser.add_argument("--cap-gb", type=float, default=30, help="the large run's database size cap")
    parser.add_argument("--url", help="a PostgreSQL server's URL (default: start one with pgserver)")
    parser.add_argument("--out", default="reports/postgres")
    args = parser.parse_args(argv)
    data = Path(args.data)
    names = [] if args.sets == "none" else [name for name in args.sets.split(",") if name] or dev_sets(data)
    with tempfile.TemporaryDirectory() as pgdata:
        server, url = None, args.url
        if not url:
            import pgserver

            server = pgserver.get_server(pgdata, cleanup_mode="stop")
            url = server.get_uri()
            server.psql(f"ALTER SYSTEM SET maintenance_work_mem = '{'4GB' if args.large else '1GB'}'; "
                        "SELECT pg_reload_conf();")
        try:
            report = {"target": {"top10_agreement": TARGET},
                      "caps": {"documents": args.max_docs, "questions": args.max_questions},
                      "parity": parity(url, data, names, args.max_docs, args.max_questions),
                      "speed": {int(s): speed(url, int(s), args.queries, tuple(args.embedders.split(",")))
                                for s in args.sizes.split(",") if s},
                      "floor": floor(url, args.floor, args.queries) if args.floor else None,
                      "large": large(url, args.large, args.queries, args.cap_minutes, args.cap_gb) if args.large
                      else None}
        finally:
            if server is not None:
                server.cleanup()
    write_report(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
