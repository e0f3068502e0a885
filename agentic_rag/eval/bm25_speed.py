"""BM25 speed against the bm25s library on one synthetic corpus, same tokens, one run.

    pip install -e '.[bench]'
    python -m agentic_rag.eval.bm25_speed --chunks 100000 --out reports/bm25_speed.json

The corpus is drawn from a Zipf-distributed vocabulary (exponent 1.1, 30,000 terms), 40 to 120
tokens a chunk, fixed seed; queries take 2 to 5 terms of middling frequency. Both indexes get the
same token lists, so only indexing and scoring are compared; top-10 agreement is reported too.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .._errors import ConfigurationError
from ..kb._bm25 import BM25
from ._metrics import percentile


def synthetic_corpus(chunks: int, queries: int, seed: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    """Token lists for the chunks and the queries."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(30_000)], dtype=object)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    lengths = rng.integers(40, 121, size=chunks)
    ids = rng.choice(len(vocab), size=int(lengths.sum()), p=weights / weights.sum())
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    docs = [vocab[ids[bounds[i]:bounds[i + 1]]].tolist() for i in range(chunks)]
    asked = [vocab[rng.integers(100, 10_000, size=rng.integers(2, 6))].tolist() for _ in range(queries)]
    return docs, asked


def _timed(fn, items) -> tuple[list, list[float]]:
    results, ms = [], []
    for item in items:
        start = time.perf_counter()
        results.append(fn(item))
        ms.append((time.perf_counter() - start) * 1000)
    return results, ms


def run(chunks: int, queries: int, k1: float = 1.2, b: float = 0.75) -> dict:
    """Index and query both implementations; timings in seconds and milliseconds."""
    try:
        import bm25s
    except ImportError:
        raise ConfigurationError("the speed comparison needs bm25s: pip install 'agentic-rag[bench]'") from None
    docs, asked = synthetic_corpus(chunks, queries)
    start = time.perf_counter()
    ours = BM25(k1, b)
    ours.add(list(range(len(docs))), docs)
    ours.merge()
    ours_index = time.perf_counter() - start
    start = time.perf_counter()
    peer = bm25s.BM25(k1=k1, b=b, method="lucene")
    peer.index(docs, show_progress=False)
    peer_index = time.perf_counter() - start
    ours_top, ours_ms = _timed(lambda q: [row for row, _ in ours.top(q, 10)], asked)
    peer_top, peer_ms = _timed(lambda q: peer.retrieve([q], k=10, show_progress=False)[0][0].tolist(), asked)
    start = time.perf_counter()
    peer.retrieve(asked, k=10, show_progress=False)  # bm25s is built for batches: its best case too
    peer_batch_ms = (time.perf_counter() - start) * 1000 / len(asked)
    overlap = [len(set(a) & set(p)) / max(len(a), 1) for a, p in zip(ours_top, peer_top, strict=True)]
    return {"chunks": chunks, "queries": queries, "postings": int(len(ours.post_rows)),
            "ours": {"index_s": ours_index, "query_ms_p50": percentile(ours_ms, 50),
                     "query_ms_p95": percentile(ours_ms, 95), "query_ms_mean": float(np.mean(ours_ms))},
            "bm25s": {"version": getattr(bm25s, "__version__", "?"), "index_s": peer_index,
                      "query_ms_p50": percentile(peer_ms, 50), "query_ms_p95": percentile(peer_ms, 95),
                      "query_ms_mean": float(np.mean(peer_ms)), "batched_query_ms_mean": peer_batch_ms},
            "top10_agreement": float(np.mean(overlap))}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run once and write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--out", default="reports/bm25_speed.json")
    args = parser.parse_args(argv)
    report = run(args.chunks, args.queries)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
