"""One large text file through `agentic-rag index`, as a new user would index it: the dev corpora's
texts (English and Chinese) concatenated until the file holds --mb megabytes, indexed with the
hashing embedder in a process of its own; time, that process's peak memory (VmHWM) and the size of
the knowledge base against the file's.

    python -m agentic_rag.eval.big_file --data ../shared/data --mb 50 --out reports/big-file
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._report import write_report

SETS = ("squad2", "hotpotqa", "musique", "cmrc2018", "rgb_zh")
_CHILD = ("import json, sys; from agentic_rag.cli import main; from agentic_rag.eval.scale import _peak_mb; "
          "code = main(sys.argv[1:]); print(json.dumps({'code': code, 'peak_mb': _peak_mb()}))")


def write_text(data: Path, path: Path, size: int) -> int:
    """The corpora's texts, each followed by a blank line, in set order and again, until `size` bytes."""
    texts = [json.loads(line)["text"] for name in SETS
             for line in (data / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    written, i = 0, 0
    with path.open("w", encoding="utf-8") as out:
        while True:
            text = texts[i % len(texts)] + "\n\n"
            if written + len(text.encode("utf-8")) > size:
                return written
            out.write(text)
            written += len(text.encode("utf-8"))
            i += 1


def run(data: Path, megabytes: float, work: Path) -> dict:
    text = work / "big.txt"
    size = write_text(data, text, int(megabytes * 1_000_000))
    kb = work / "kb"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, "index", str(text), "--kb", str(kb), "--embedder", "hashing"],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"index failed: {done.stderr.strip().splitlines()[-1:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    kb_bytes = sum(p.stat().st_size for p in kb.rglob("*") if p.is_file())
    files = {p.name: p.stat().st_size for p in sorted(kb.rglob("*")) if p.is_file() and p.stat().st_size}
    indexed = next(line for line in done.stdout.splitlines() if line.startswith("indexed"))
    return {"text_bytes": size, "seconds": round(seconds, 1), "peak_mb": round(child["peak_mb"]),
            "kb_bytes": kb_bytes, "kb_over_text": round(kb_bytes / size, 2), "files": files, "indexed": indexed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data", help="the evaluation sets' folder")
    parser.add_argument("--mb", type=float, default=50, help="size of the text file in megabytes")
    parser.add_argument("--out", default="reports/big-file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        report = run(Path(args.data), args.mb, Path(work))
    lines = [f"# One {report['text_bytes'] / 1e6:.0f} MB text file through agentic-rag index (hashing embedder): "
             "seconds, peak memory, knowledge-base size", "",
             "| seconds | peak memory MB | knowledge base MB | knowledge base / text |", "|---|---|---|---|",
             f"| {report['seconds']} | {report['peak_mb']} | {report['kb_bytes'] / 1e6:.1f} | "
             f"{report['kb_over_text']} |", "", report["indexed"], "",
             "Files: " + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in report["files"].items()), ""]
    write_report(args.out, report, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
