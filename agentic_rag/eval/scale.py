"""Scale on one machine: BM25, vector search, saves, building and hybrid search at 10,000 to
100,000 synthetic chunks, against bm25s and raw hnswlib, in one run; writes a JSON and a
Markdown report.

    pip install -e '.[test]'     # bm25s, the BM25 peer
    python -m agentic_rag.eval.scale --sizes 10000,30000,100000 --e5-from reports/kb-cache/*-e5-* \\
        --out reports/scale

Chunks are drawn from a Zipf vocabulary (exponent 1.1) of 27,000 made-up words and 3,000 CJK
characters, 40 to 120 draws a chunk, fixed seed, and tokenized by the project's tokenizer: both
BM25 implementations get the same tokens. Two query mixes: "zipf" draws 2-5 terms from the same
distribution (so queries hold common terms), "mid" draws them from ranks 100-10,000. Ours and the
peer answer each query in turn (interleaved), timed one query at a time.

Vectors: the hashing embedder's (sparse, searched exactly) against raw hnswlib on the same vectors
(up to 30,000: its 2,048-dimensional graph takes minutes beyond); e5-like dense vectors (mixtures
of pairs of real e5 vectors from the knowledge bases given by --e5-from, plus noise: e5 itself
embeds 4 chunks a second here) in our DenseIndex against raw hnswlib with the same settings.
Recall@10 is against exact search. Building, peak memory and saves run in a child process each,
so that one's memory does not count in another's.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..core import ConfigurationError, IndexConfig, SearchConfig
from ..kb import Document, KnowledgeBase, read_generation
from ..kb.embedders import HashingEmbedder
from ..kb.indexes import BM25, DenseIndex, SparseIndex
from ..text import tokenize
from ._metrics import percentile
from ._report import write_report

if TYPE_CHECKING:
    import hnswlib

_Item = TypeVar("_Item")  # what a timed pair of searches is given: a query text or vector

_SYLLABLES = ["ka", "lo", "mi", "ru", "se", "ta", "vo", "ne", "pi", "du", "ga", "ho", "zi", "be", "fu", "ya", "co",
              "wa", "xe", "qu"]


def vocabulary() -> list[str]:
    """27,000 made-up words of three syllables, then 3,000 CJK characters, in Zipf rank order."""
    words = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]  # 8,000
    words += [w + s for w in words[:2_000] for s in ("n", "r", "x", "m", "l", "t", "k", "p", "b", "d")][:19_000]
    cjk = [chr(0x4E00 + i) for i in range(3_000)]
    order = np.random.default_rng(7).permutation(len(words) + len(cjk))  # ranks mix words and characters
    return [(words + cjk)[i] for i in order]


def texts(count: int, seed: int = 0) -> list[str]:
    """`count` chunk texts: 40-120 Zipf draws each; adjacent CJK characters join into one run."""
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    lengths = rng.integers(40, 121, size=count)
    draws = rng.choice(len(vocab), size=int(lengths.sum()), p=weights / weights.sum())
    out, start = [], 0
    for n in lengths:
        parts = [vocab[i] for i in draws[start:start + n]]
        out.append("".join(p if p >= "\u4e00" and (i and parts[i - 1] >= "\u4e00") else " " + p
                           for i, p in enumerate(parts)).strip())
        start += n
    return out


def queries(mix: str, count: int, seed: int = 1) -> list[str]:
    """`count` queries of 2-5 terms: Zipf draws ("zipf") or ranks 100-10,000 ("mid")."""
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    out = []
    for _ in range(count):
        n = rng.integers(2, 6)
        ranks = rng.choice(len(vocab), size=n, p=weights / weights.sum()) if mix == "zipf" else \
            rng.integers(100, 10_000, size=n)
        out.append(" ".join(vocab[i] for i in ranks))
    return out


def _interleaved(ours: Callable[[_Item], object], peer: Callable[[_Item], object],
                 items: Iterable[_Item]) -> tuple[list, list, list[float], list[float]]:
    """Each item to ours then the peer, each call timed alone (ms)."""
    got: list = []
    want: list = []
    ours_ms: list[float] = []
    peer_ms: list[float] = []
    for item in items:
        for fn, results, times in ((ours, got, ours_ms), (peer, want, peer_ms)):
            start = time.perf_counter()
            results.append(fn(item))
            times.append((time.perf_counter() - start) * 1000)
    return got, want, ours_ms, peer_ms


def _p(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 50), 4), "p95": round(percentile(values, 95), 4)}


def bm25_run(size: int, query_count: int) -> dict:
    """Build both indexes on the same tokens; both query mixes, interleaved; top-10 agreement."""
    try:
        import bm25s
    except ImportError:
        raise ConfigurationError("the scale benchmark needs bm25s: pip install -e '.[test]'") from None
    tokens = [tokenize(t) for t in texts(size)]
    start = time.perf_counter()
    ours = BM25()
    ours.add(list(range(size)), tokens)
    ours.merge()
    ours_build = time.perf_counter() - start
    start = time.perf_counter()
    peer = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    peer.index(tokens, show_progress=False)
    peer_build = time.perf_counter() - start
    report = {"postings": int(len(ours.post_rows)), "build_s": {"ours": round(ours_build, 3),
                                                                "bm25s": round(peer_build, 3)}}
    for mix in ("zipf", "mid"):
        asked = [tokenize(q) for q in queries(mix, query_count)]
        got, want, ours_ms, peer_ms = _interleaved(
            lambda q: ours.top(q, 10), lambda q: peer.retrieve([q], k=10, show_progress=False), asked)
        agree, tied = [], []
        for mine, (rows, scores) in zip(got, want, strict=True):
            theirs = rows[0].tolist()
            agree.append(len({r for r, _ in mine} & set(theirs)) / max(1, len(theirs)))
            # ties: a row of ours whose score equals the peer's 10th best counts as agreeing
            floor = float(scores[0][-1]) if len(theirs) else 0.0
            tied.append(sum(r in theirs or s >= floor - 1e-4 for r, s in mine) / max(1, len(mine)))
        report[mix] = {"ours_ms": _p(ours_ms), "bm25s_ms": _p(peer_ms),
                       "ratio_p50": round(percentile(ours_ms, 50) / percentile(peer_ms, 50), 3),
                       "top10_agreement": round(float(np.mean(agree)), 4),
                       "top10_agreement_ties_counted": round(float(np.mean(tied)), 4)}
    return report


def _recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return round(float(np.mean([len(set(f) & set(e)) / max(1, len(e)) for f, e in zip(found, exact, strict=True)])), 4)


def _exact(vectors: np.ndarray, asked: np.ndarray, k: int = 10) -> list[list[int]]:
    sims = asked @ vectors.T
    return [np.lexsort((np.arange(len(row)), -row))[:k].tolist() for row in sims]


def _raw_hnsw(vectors: np.ndarray, built: IndexConfig, search: SearchConfig) -> tuple[hnswlib.Index, float]:
    import hnswlib

    start = time.perf_counter()
    index = hnswlib.Index(space="cosine", dim=vectors.shape[1])
    index.init_index(max_elements=len(vectors), M=built.hnsw_m, ef_construction=built.hnsw_ef_construction,
                     random_seed=built.seed)
    index.add_items(vectors, np.arange(len(vectors)), num_threads=1)
    index.set_ef(search.hnsw_ef)
    return index, time.perf_counter() - start


def vectors_run(size: int, query_count: int, e5_vectors: np.ndarray | None, raw_hashing_up_to: int) -> dict:
    """Recall@10 against exact search and single-query latency: ours against raw hnswlib."""
    built, search, report = IndexConfig(), SearchConfig(), {}
    embedder = HashingEmbedder()
    hashed = embedder.embed(texts(size))
    asked = embedder.embed(queries("zipf", query_count))
    start = time.perf_counter()
    sparse = SparseIndex(embedder.dimension)
    sparse.add(list(range(size)), hashed)
    build = time.perf_counter() - start
    exact = _exact(hashed, asked)
    entry = {"ours": "SparseIndex (exact)", "build_s": round(build, 3)}
    if size <= raw_hashing_up_to:
        raw, raw_build = _raw_hnsw(hashed, built, search)
        got, want, ours_ms, raw_ms = _interleaved(lambda q: [r for r, _ in sparse.search(q, 10)],
                                                  lambda q: raw.knn_query(q.reshape(1, -1), k=10)[0][0].tolist(), asked)
        entry.update(raw_hnswlib_build_s=round(raw_build, 3), raw_hnswlib_recall10=_recall(want, exact),
                     raw_hnswlib_ms=_p(raw_ms))
    else:
        got, ours_ms = [], []
        for q in asked:
            start = time.perf_counter()
            got.append([r for r, _ in sparse.search(q, 10)])
            ours_ms.append((time.perf_counter() - start) * 1000)
    entry.update(recall10=_recall(got, exact), ms=_p(ours_ms))
    report["hashing"] = entry
    if e5_vectors is not None:
        rng = np.random.default_rng(size)

        def mixtures(n: int) -> np.ndarray:
            i, j, w = rng.integers(0, len(e5_vectors), n), rng.integers(0, len(e5_vectors), n), rng.random((n, 1))
            v = w * e5_vectors[i] + (1 - w) * e5_vectors[j] + rng.normal(0, 0.02, (n, e5_vectors.shape[1]))
            return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

        dense_vectors, dense_asked = mixtures(size), mixtures(query_count)
        start = time.perf_counter()
        dense = DenseIndex(dense_vectors.shape[1], built.hnsw_m, built.hnsw_ef_construction, search.hnsw_ef,
                           built.exact_search_below, built.seed)
        dense.add(list(range(size)), dense_vectors)
        build = time.perf_counter() - start
        raw, raw_build = _raw_hnsw(dense_vectors, built, search)
        exact = _exact(dense_vectors, dense_asked)
        got, want, ours_ms, raw_ms = _interleaved(lambda q: [r for r, _ in dense.search(q, 10)],
                                                  lambda q: raw.knn_query(q.reshape(1, -1), k=10)[0][0].tolist(),
                                                  dense_asked)
        report["e5_like"] = {"ours": "DenseIndex" + (" (hnswlib)" if dense.hnsw is not None else " (exact)"),
                             "m": built.hnsw_m, "ef": search.hnsw_ef, "build_s": round(build, 3),
                             "recall10": _recall(got, exact), "ms": _p(ours_ms),
                             "raw_hnswlib_build_s": round(raw_build, 3), "raw_hnswlib_recall10": _recall(want, exact),
                             "raw_hnswlib_ms": _p(raw_ms)}
    return report


def _peak_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts anew at exec (ru_maxrss, on Linux,
    carries the peak of the process that forked it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_build(size: int, query_count: int) -> dict:
    """In a process of its own: build a knowledge base of `size` chunks (hashing), time and peak
    memory; hybrid search against bm25s alone; a full save, then 100 documents added and saved."""
    import bm25s

    documents = [Document(f"c{i}", text) for i, text in enumerate(texts(size))]
    start = time.perf_counter()
    kb = KnowledgeBase(config=IndexConfig(chunk_size=4000, chunk_overlap=0))  # one chunk a document: `size` chunks
    kb.add_documents(documents)
    build = time.perf_counter() - start
    peak_mb = _peak_mb()
    asked = queries("zipf", query_count)
    peer = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    peer.index([tokenize(d.text) for d in documents], show_progress=False)
    _, _, hybrid_ms, peer_ms = _interleaved(lambda q: kb.search(q, k=10),
                                            lambda q: peer.retrieve([tokenize(q)], k=10, show_progress=False), asked)
    report = {"chunks": len(kb), "build_s": round(build, 2), "build_peak_mb": round(peak_mb),
              "hybrid_ms": _p(hybrid_ms), "bm25s_alone_ms": _p(peer_ms),
              "hybrid_ratio_p50": round(percentile(hybrid_ms, 50) / percentile(peer_ms, 50), 3)}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        kb.save(folder)
        full_s = time.perf_counter() - start
        full_bytes = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
        kb.add_documents([Document(f"new{i}", text) for i, text in enumerate(texts(100, seed=99))])
        start = time.perf_counter()
        delta = kb.save(folder)
        delta_s = time.perf_counter() - start
        delta_bytes = sum(p.stat().st_size for p in delta.iterdir())
        start = time.perf_counter()
        loaded = KnowledgeBase.load(folder)
        load_s = time.perf_counter() - start
        assert len(loaded) == len(kb) and len(read_generation(Path(folder))[1]) == 2
    report["save"] = {"full_s": round(full_s, 3), "full_mb": round(full_bytes / 2**20, 1),
                      "add_100_docs_s": round(delta_s, 3), "add_100_docs_kb": round(delta_bytes / 1024, 1),
                      "bytes_ratio": round(delta_bytes / full_bytes, 4), "time_ratio": round(delta_s / full_s, 4),
                      "load_with_delta_s": round(load_s, 3)}
    return report


def _in_child(size: int, query_count: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "agentic_rag.eval.scale", "--child", str(size),
                           "--queries", str(query_count)], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the build at {size} chunks failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def e5_vectors(folders: list[str]) -> np.ndarray | None:
    """The vectors of saved e5 knowledge bases, de-duplicated; None if none is given."""
    found = []
    for folder in folders:
        manifest, segments = read_generation(Path(folder))
        if manifest["embedder"]["name"] != "e5":
            raise ConfigurationError(f"{folder} was built with {manifest['embedder']['name']}, not e5")
        kb = KnowledgeBase.load(folder)
        live = [row for row, chunk in enumerate(kb._chunks) if chunk is not None]
        found.append(kb._vectors.vectors_of(live))
    return np.unique(np.concatenate(found), axis=0) if found else None


def markdown(report: dict) -> str:
    """The report's tables."""
    lines = [f"# Scale on synthetic chunks ({', '.join(f'{int(s):,}' for s in report['sizes'])}): BM25 against "
             "bm25s, vector search against raw hnswlib, building, hybrid search and saves; seconds, ms, MB", "",
             "## BM25: build seconds, p50 ms a query on each query mix, top-10 agreement with bm25s", "",
             "| chunks | BM25 build ours / bm25s | Zipf p50 ours / bm25s (ratio) | mid p50 ours / bm25s (ratio) | "
             "top-10 agreement (ties counted) |", "|---|---|---|---|---|"]
    for size, r in report["sizes"].items():
        b = r["bm25"]
        lines.append(f"| {int(size):,} | {b['build_s']['ours']:.2f} / {b['build_s']['bm25s']:.2f} s | "
                     f"{b['zipf']['ours_ms']['p50']:.3f} / {b['zipf']['bm25s_ms']['p50']:.3f} ms "
                     f"({b['zipf']['ratio_p50']:.2f}) | {b['mid']['ours_ms']['p50']:.3f} / "
                     f"{b['mid']['bm25s_ms']['p50']:.3f} ms ({b['mid']['ratio_p50']:.2f}) | "
                     f"{b['zipf']['top10_agreement']:.3f} ({b['zipf']['top10_agreement_ties_counted']:.3f}) / "
                     f"{b['mid']['top10_agreement']:.3f} ({b['mid']['top10_agreement_ties_counted']:.3f}) |")
    lines += ["", "## Vector search: recall@10 against exact search, p50 ms a query, build seconds", "",
              "| chunks | hashing: recall@10, p50 (raw hnswlib) | e5-like: recall@10, p50, build (raw hnswlib) |",
              "|---|---|---|"]
    for size, r in report["sizes"].items():
        h, e = r["vectors"]["hashing"], r["vectors"].get("e5_like")
        raw = f" ({h['raw_hnswlib_recall10']:.3f}, {h['raw_hnswlib_ms']['p50']:.3f} ms)" \
            if "raw_hnswlib_ms" in h else ""
        dense = (f"{e['recall10']:.3f}, {e['ms']['p50']:.3f} ms, {e['build_s']:.1f} s "
                 f"({e['raw_hnswlib_recall10']:.3f}, {e['raw_hnswlib_ms']['p50']:.3f} ms, "
                 f"{e['raw_hnswlib_build_s']:.1f} s)") if e else "–"
        lines.append(f"| {int(size):,} | {h['recall10']:.3f}, {h['ms']['p50']:.3f} ms{raw} | {dense} |")
    lines += ["", "## The knowledge base (hashing): building, hybrid search, full and delta saves, loading", "",
              "| chunks | build (hashing) s, peak MB | hybrid p50 / bm25s alone (ratio) | full save s, MB | "
              "add 100 docs + save: s, KB (share of bytes, of time) | load with the delta s |",
              "|---|---|---|---|---|---|"]
    for size, r in report["sizes"].items():
        k, s = r["kb"], r["kb"]["save"]
        lines.append(f"| {int(size):,} | {k['build_s']:.1f}, {k['build_peak_mb']:,} | {k['hybrid_ms']['p50']:.3f} / "
                     f"{k['bm25s_alone_ms']['p50']:.3f} ms ({k['hybrid_ratio_p50']:.2f}) | {s['full_s']:.2f}, "
                     f"{s['full_mb']:.1f} | {s['add_100_docs_s']:.3f}, {s['add_100_docs_kb']:.0f} "
                     f"({s['bytes_ratio']:.2%}, {s['time_ratio']:.2%}) | {s['load_with_delta_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run every size and write reports/scale/report.json and report.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,30000,100000", help="comma-separated chunk counts")
    parser.add_argument("--queries", type=int, default=300, help="queries per mix")
    parser.add_argument("--e5-from", nargs="*", default=[], metavar="DIR",
                        help="saved e5 knowledge bases whose vectors seed the e5-like vectors")
    parser.add_argument("--raw-hashing-up-to", type=int, default=30_000,
                        help="largest size at which raw hnswlib indexes the hashing vectors")
    parser.add_argument("--out", default="reports/scale")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child_build(args.child, args.queries)))
        return 0
    seeds = e5_vectors(args.e5_from)
    report: dict[str, Any] = {"sizes": {}, "e5_seed_vectors": 0 if seeds is None else len(seeds)}
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"{size} chunks ...", file=sys.stderr)
        report["sizes"][size] = {"bm25": bm25_run(size, args.queries),
                                 "vectors": vectors_run(size, args.queries, seeds, args.raw_hashing_up_to),
                                 "kb": _in_child(size, args.queries)}
    write_report(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
