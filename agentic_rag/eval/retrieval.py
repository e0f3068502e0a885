"""Retrieval benchmark over the shared evaluation sets; writes report.json and report.md.

    python -m agentic_rag.eval.retrieval --data ../shared/data --out reports/retrieval

For each set and embedder it builds a knowledge base from the corpus (or loads it from `--cache`),
then measures recall@5, all-relevant@5 and MRR@10 (corpus-entry level, answerable questions only,
of one `--half` if given) for bm25, vector, the default hybrid and hybrid search at each fusion
method and vector weight, and personalized PageRank over the knowledge graph seeded by the default
hybrid search (`pagerank`), with 95% bootstrap intervals, index time and query latency.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import Config
from ..kb import KnowledgeBase, make_embedder
from ..kb.embedders import Embedder, embedder_trait
from ..kb.indexes import FUSIONS
from ..text import tokenize
from ._bench import cached_kb, half_of
from ._datasets import Question, load_set
from ._metrics import all_relevant_at_k, bootstrap_ci, mrr_at_k, percentile, recall_at_k

if TYPE_CHECKING:
    import numpy as np

SETS = ("hotpotqa", "musique", "squad2", "cmrc2018", "rgb_zh")
METRICS = {"r@5": lambda ids, rel: recall_at_k(ids, rel, 5),
           "all@5": lambda ids, rel: all_relevant_at_k(ids, rel, 5),
           "mrr@10": lambda ids, rel: mrr_at_k(ids, rel, 10)}


def run_queries(kb: KnowledgeBase, questions: list[Question], mode: str, rerank: bool = False) -> dict:
    """Search every question once; metrics with intervals and latency percentiles."""
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    latencies = []
    for q in questions:
        start = time.perf_counter()
        hits = kb.pagerank_search(q.question, k=10) if mode == "pagerank" else \
            kb.search(q.question, k=10, mode=mode, rerank=rerank)
        latencies.append((time.perf_counter() - start) * 1000)
        ids = [h.doc_id for h in hits]
        for name, metric in METRICS.items():
            values[name].append(metric(ids, q.relevant_ids))
    out: dict[str, Any] = {"n": len(questions)}  # a JSON report
    for name, vals in values.items():
        out[name] = sum(vals) / len(vals)
        out[f"{name}_ci"] = bootstrap_ci(vals)
    out["p50_ms"], out["p95_ms"] = percentile(latencies, 50), percentile(latencies, 95)
    return out


def peer_bm25s(kb: KnowledgeBase, questions: list[Question], k1: float, b: float) -> dict:
    """The bm25s library over exactly our tokens and chunks: the peer our BM25 must not trail."""
    import bm25s

    chunks = [c for c in kb._chunks if c is not None]
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.index([tokenize(f"{c['title']}\n{c['text']}" if c["title"] else c["text"]) for c in chunks],
                show_progress=False)
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    for q in questions:
        rows = index.retrieve([tokenize(q.question) or ["-"]], k=min(10, len(chunks)), show_progress=False)[0][0]
        ids = [chunks[r]["doc_id"] for r in rows]
        for name, metric in METRICS.items():
            values[name].append(metric(ids, q.relevant_ids))
    return {name: sum(v) / len(v) for name, v in values.items()}


class _QueryMemo:
    """An embedder that embeds each distinct query once: every fusion setting searches the same questions."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._queries: dict[tuple[str, ...], np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in self._queries:
            embed = embedder_trait(self._embedder, "embed_query") or self._embedder.embed
            self._queries[key] = embed(list(texts))
        return self._queries[key]


def bench_set(folder: Path, embedder: str, config: Config, weights: list[float], limit: int | None,
              fusions: tuple[str, ...] = ("rrf",), half: int | None = None, cache: Path | None = None) -> dict:
    """Build (or load from `cache`) one set's knowledge base and run every mode on the answerable
    questions (of one half, if given)."""
    corpus, questions = load_set(folder)
    questions = [q for q in questions if q.relevant_ids and (half is None or half_of(q.id) == half)][:limit]
    start = time.perf_counter()
    if cache:
        kb = cached_kb(folder, embedder, config, cache)
    else:
        kb = KnowledgeBase(make_embedder(embedder), config)
        kb.add_documents(corpus, progress=True)
    result: dict[str, Any] = {"set": folder.name, "embedder": embedder, "half": half, "documents": len(corpus),
                              "chunks": len(kb), "index_s": None if cache else time.perf_counter() - start,
                              "modes": {}}
    kb.embedder = _QueryMemo(kb.embedder)
    for mode in ("bm25", "vector"):
        result["modes"][mode] = run_queries(kb, questions, mode)
    method, weight = kb.fusion
    result["modes"][f"hybrid default ({method} w={weight:g})"] = run_queries(kb, questions, "hybrid")
    for fusion in fusions:
        for weight in weights:
            kb.config = replace(config, fusion=fusion, vector_weight=weight)
            result["modes"][f"{fusion} w={weight:g}"] = run_queries(kb, questions, "hybrid")
    kb.config = config
    result["modes"]["hybrid+rerank"] = run_queries(kb, questions, "hybrid", rerank=True)
    result["modes"]["pagerank"] = run_queries(kb, questions, "pagerank")
    result["peer_bm25s"] = peer_bm25s(kb, questions, config.search.bm25_k1, config.search.bm25_b)
    return result


def _table(results: list[dict], modes: list[str]) -> list[str]:
    lines = ["| set | embedder | chunks | index s | mode | R@5 | all@5 | MRR@10 | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for mode in modes:
            m = r["modes"].get(mode)
            if m:
                lo, hi = m["r@5_ci"]
                index_s = "cached" if r["index_s"] is None else f"{r['index_s']:.1f}"
                lines.append(f"| {r['set']} | {r['embedder']} | {r['chunks']} | {index_s} | {mode} | "
                             f"{m['r@5']:.3f} [{lo:.2f}, {hi:.2f}] | {m['all@5']:.3f} | {m['mrr@10']:.3f} | "
                             f"{m['p50_ms']:.1f} | {m['p95_ms']:.1f} |")
    return lines


def write_report(results: list[dict], out: Path, config: Config) -> None:
    """report.json (everything) and report.md (one table row per set, embedder and mode)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps({"config": asdict(config), "results": results}, indent=2))
    modes = list(dict.fromkeys(mode for r in results for mode in r["modes"]))
    halves = {r["half"] for r in results}
    split = f" of --half {halves.pop()}" if len(halves) == 1 and None not in halves else ""
    lines = [f"# Retrieval on {', '.join(dict.fromkeys(r['set'] for r in results))}, the answerable questions{split}: "
             "recall@5, all-relevant@5 and MRR@10 per embedder and mode, latency in ms", "",
             f"chunk_size {config.chunk_size}, overlap {config.chunk_overlap}, BM25 k1 {config.bm25_k1} "
             f"b {config.bm25_b}, RRF k {config.rrf_k}, bm25 weight {config.bm25_weight}; "
             "R@5 with its 95% bootstrap interval.", ""] + _table(results, modes) + [
             "", "## The peer: bm25s over the same tokens and chunks, recall@5, all-relevant@5, MRR@10", "",
             "| set | R@5 | all@5 | MRR@10 |", "|---|---|---|---|"] + [
             f"| {r['set']} | {r['peer_bm25s']['r@5']:.3f} | {r['peer_bm25s']['all@5']:.3f} | "
             f"{r['peer_bm25s']['mrr@10']:.3f} |" for r in results if r["embedder"] == results[0]["embedder"]]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def _fusions(text: str) -> tuple[str, ...]:
    names = tuple(name for name in text.split(",") if name)
    if not names or set(names) - set(FUSIONS):
        raise argparse.ArgumentTypeError(f"{text!r}: give fusion methods among {', '.join(FUSIONS)}, comma-separated")
    return names


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run the benchmark and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data", help="folder holding the set folders")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--embedders", default="hashing,e5")
    parser.add_argument("--weights", default="0.25,0.5,1", help="vector weights to try (bm25 weight 1)")
    parser.add_argument("--fusions", default="rrf,score", type=_fusions, help="fusion methods to try at each weight")
    parser.add_argument("--half", type=int, choices=(1, 2), help="only the questions in this half (as bench --half)")
    parser.add_argument("--cache", metavar="DIR", help="keep built knowledge bases here and reuse them (as bench)")
    parser.add_argument("--chunk-size", type=int, default=Config().chunk_size)
    parser.add_argument("--limit", type=int, help="at most this many questions per set")
    parser.add_argument("--out", default="reports/retrieval")
    args = parser.parse_args(argv)
    config = Config(chunk_size=args.chunk_size, chunk_overlap=min(Config().chunk_overlap, args.chunk_size // 4))
    weights = [float(w) for w in args.weights.split(",") if w]
    results = []
    for name in args.sets.split(","):
        for embedder in args.embedders.split(","):
            print(f"{name} / {embedder} ...", file=sys.stderr)
            cache = Path(args.cache) if args.cache else None
            results.append(bench_set(Path(args.data) / name, embedder, config, weights, args.limit,
                                     args.fusions, args.half, cache))
            write_report(results, Path(args.out), config)
    print((Path(args.out) / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
