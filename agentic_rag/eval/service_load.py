"""A load check of the HTTP service on 127.0.0.1: concurrent clients, a writer, no errors, no
cross-talk, nothing lost; throughput against calling the library directly. Writes a JSON and a
Markdown report.

    pip install -e '.[serve]'
    python -m agentic_rag.eval.service_load --kb .kb --clients 8 --seconds 15 --out reports/service-load

The knowledge base folder is copied first (the original is never written). Phases, each
`--seconds` long with `--clients` concurrent clients asking distinct questions (made from the
knowledge base's own chunks) with the cache off:

1. HTTP, no writer; 2. the library called directly from as many threads (the same questions, the
same model); their throughput ratio is the cost of the HTTP layer. 3. HTTP while a writer adds and
deletes documents: every reply must be 200 and equal the answer the library gives to the same
question against the generation the reply names (each generation the writer makes is kept aside
for the check); after a restart every acknowledged write must be there. 4. HTTP with the cache on,
the clients asking a few questions again and again. 5. HTTP while `--slow-clients` connections
from 127.0.0.2 and up (`--slow-addresses` of them, so the per-address bound shows) each send one
header line, or one body byte, every `--slow-interval` seconds and connect again when the server
closes them; target: the p95 of phase 1 at most doubled. What the server answered them is counted.
"""
from __future__ import annotations

import argparse
import http.client
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .._loop import run_agentic_rag
from ..kb import KnowledgeBase
from ..models import OfflineModel
from ._metrics import percentile
from ._report import write_report
from ._slow_clients import slow_clients


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(folder: Path, clients: int, cache: bool) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "serve", "--kb", str(folder), "--port",
                                str(port), "--threads", str(clients), "--max-runs", str(clients), "--cache-size",
                                "4096" if cache else "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            _call(port, "GET", "/healthz")
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the server did not start")


def _call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                       headers={"Content-Type": "application/json"} if body is not None else {})
    response = connection.getresponse()
    data = json.loads(response.read())
    connection.close()
    return response.status, data


def questions_from(kb: KnowledgeBase) -> list[str]:
    """Distinct questions, one per chunk: its first words, asked about."""
    found: dict[str, None] = {}  # insertion-ordered, without repeats
    for chunk in kb._chunks:
        if chunk is not None:
            words = " ".join(chunk["text"].split()[:8]) if " " in chunk["text"] else chunk["text"][:16]
            found[f"What does the knowledge base say about: {words}?"] = None
    return list(found)


def _clients(count: int, seconds: float, ask) -> tuple[list[dict], float]:
    """`count` threads calling ask(index) for `seconds`; (records, elapsed seconds)."""
    records, lock, deadline = [], threading.Lock(), time.monotonic() + seconds
    counter = iter(range(10**9))

    def client():
        while time.monotonic() < deadline:
            with lock:
                index = next(counter)
            start = time.perf_counter()
            record = ask(index)
            record["ms"] = (time.perf_counter() - start) * 1000
            with lock:
                records.append(record)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records, time.monotonic() - started


def _figures(records: list[dict], elapsed: float) -> dict:
    ms = [r["ms"] for r in records]
    return {"requests": len(records), "rps": round(len(records) / elapsed, 2), "p50_ms": round(percentile(ms, 50), 1),
            "p95_ms": round(percentile(ms, 95), 1),
            "errors": sum(r.get("status", 200) != 200 for r in records)}


def _with_slow_clients(port: int, clients: int, seconds: float, ask, slow: tuple[int, int, float]) -> tuple:
    """(figures of `ask` from `clients` threads for `seconds`, the slow clients' report) while the
    slow clients are at work; a request that fails at the socket counts as an error."""
    stop, found = threading.Event(), {}
    thread = threading.Thread(target=lambda: found.update(slow_clients(port, *slow, stop)))
    thread.start()
    time.sleep(slow[2])  # every slow client has connected once

    def guarded(i):
        try:
            return ask(i)
        except OSError as exc:
            return {"status": 0, "error": type(exc).__name__}

    try:
        figures = _figures(*_clients(clients, seconds, guarded))
    finally:
        stop.set()
        thread.join()
    return figures, found


def run(kb_dir: str, clients: int, seconds: float, writes: int, slow: tuple[int, int, float] = (0, 1, 2.0)) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        folder, kept = Path(scratch) / "kb", Path(scratch) / "generations"
        shutil.copytree(kb_dir, folder, ignore=shutil.ignore_patterns(".lock"))
        kb = KnowledgeBase.load(folder)
        asked = questions_from(kb)
        model = OfflineModel()
        report: dict[str, Any] = {"clients": clients, "seconds": seconds}  # a JSON report

        process, port = _start(folder, clients, cache=False)
        try:
            def over_http(i):
                status, reply = _call(port, "POST", "/v1/ask", {"question": asked[i % len(asked)], "cache": False})
                return {"status": status, "question": asked[i % len(asked)], "answer": reply.get("answer"),
                        "generation": reply.get("generation")}

            report["http"] = _figures(*_clients(clients, seconds, over_http))
            if slow[0]:
                report["http_slow"], report["slow"] = _with_slow_clients(port, clients, seconds, over_http, slow)
                report["slow_p95_ratio"] = round(report["http_slow"]["p95_ms"] / report["http"]["p95_ms"], 2)
            report["library"] = _figures(*_clients(clients, seconds, lambda i: {
                "answer": run_agentic_rag(asked[i % len(asked)], kb, model)["answer"]}))
            report["http_to_library"] = round(report["http"]["rps"] / max(report["library"]["rps"], 1e-9), 3)

            generations = {_call(port, "GET", "/healthz")[1]["generation"]}
            shutil.copytree(folder, kept / next(iter(generations)), ignore=shutil.ignore_patterns(".lock"))
            acknowledged, stop, done = {}, threading.Event(), []

            def writer():
                for n in range(writes):
                    if stop.wait(seconds / (writes + 1)):
                        return
                    if n % 3 == 2:  # delete the document added two writes ago
                        doc_id = f"load-{n - 2}"
                        status, reply = _call(port, "DELETE", f"/v1/documents/{doc_id}")
                        acknowledged[doc_id] = False
                    else:
                        doc_id = f"load-{n}"
                        status, reply = _call(port, "POST", "/v1/documents", {"documents": [
                            {"id": doc_id, "text": f"Load note {n}: the service stayed up while this was written."}]})
                        acknowledged[doc_id] = True
                    if status == 200:
                        done.append(doc_id)
                        shutil.copytree(folder, kept / reply["generation"], ignore=shutil.ignore_patterns(".lock"),
                                        dirs_exist_ok=True)

            thread = threading.Thread(target=writer)
            thread.start()
            records, elapsed = _clients(clients, seconds, over_http)
            stop.set()
            thread.join()
            report["http_with_writer"] = _figures(records, elapsed)
            report["writes_acknowledged"] = len(done)
        finally:
            process.terminate()
            process.wait(30)

        cross_talk, loaded = 0, {}
        for record in records:
            if record["status"] != 200:
                continue
            if record["generation"] not in loaded:
                loaded[record["generation"]] = KnowledgeBase.load(kept / record["generation"])
            alone = run_agentic_rag(record["question"], loaded[record["generation"]], model)["answer"]
            cross_talk += alone != record["answer"]
        report["cross_talk"] = cross_talk
        report["generations_seen"] = len(loaded)

        process, port = _start(folder, clients, cache=True)  # a restart: every acknowledged write is there
        try:
            found = {doc_id: bool(_call(port, "POST", "/v1/search", {"query": "Load note", "k": 50, "filters": {
                "doc_id": [doc_id]}})[1]["hits"]) for doc_id in acknowledged}
            report["lost_writes"] = sum(found[d] != present for d, present in acknowledged.items())
            few = asked[:20]
            report["http_cached"] = _figures(*_clients(clients, seconds / 2, lambda i: dict(zip(
                ("status", "reply"), _call(port, "POST", "/v1/ask", {"question": few[i % len(few)]}), strict=True))))
        finally:
            process.terminate()
            process.wait(30)
    return report


def markdown(report: dict) -> str:
    rows = [("HTTP, cache off", report["http"]), ("library, direct", report["library"]),
            ("HTTP, cache off, with a writer", report["http_with_writer"]), ("HTTP, cache on", report["http_cached"])]
    lines = ["# The HTTP service on 127.0.0.1 against the library called directly: requests a second, latency "
             "in ms, errors, cross-talk and lost writes", "",
             f"{report['clients']} clients, {report['seconds']} s a phase; HTTP / library throughput "
             f"{report['http_to_library']:.2f}; {report['writes_acknowledged']} writes acknowledged, "
             f"{report['generations_seen']} generations answered from; cross-talk {report['cross_talk']}, "
             f"lost writes {report['lost_writes']}.", "",
             "| phase | requests | per second | p50 ms | p95 ms | errors |", "|---|---|---|---|---|---|"]
    if "slow" in report:
        slow = report["slow"]
        rows.insert(1, (f"HTTP, cache off, {slow['clients']} slow clients", report["http_slow"]))
    lines += [f"| {name} | {r['requests']} | {r['rps']} | {r['p50_ms']} | {r['p95_ms']} | {r['errors']} |"
              for name, r in rows]
    if "slow" in report:
        closed = ", ".join(f"{answer}: {n}" for answer, n in sorted(slow["closed_by"].items())) or "nothing"
        met = "met" if report["slow_p95_ratio"] <= 2 else "missed"
        lines += ["", f"Slow clients: {slow['clients']} from {slow['addresses']} addresses (127.0.0.2 and up), a "
                      f"line or a byte every {slow['interval_s']:g} s; {slow['connects']} connections made, "
                      f"{slow['open_mean']} open on average; closed by the server with {closed}. p95 with them "
                      f"/ without: {report['slow_p95_ratio']:.2f} (target at most 2: {met})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, metavar="DIR", help="a saved knowledge base (copied, not changed)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--writes", type=int, default=8)
    parser.add_argument("--slow-clients", type=int, default=300, help="slow connections of phase 5; 0 skips it")
    parser.add_argument("--slow-addresses", type=int, default=10, help="loopback addresses they come from")
    parser.add_argument("--slow-interval", type=float, default=2.0, help="seconds between a slow client's sends")
    parser.add_argument("--out", default="reports/service-load")
    args = parser.parse_args(argv)
    if not 0 <= args.slow_clients <= 900 or not 1 <= args.slow_addresses <= 250 or not args.slow_interval > 0:
        parser.error("--slow-clients 0 to 900 (one select() of them), --slow-addresses 1 to 250, --slow-interval > 0")
    report = run(args.kb, args.clients, args.seconds, args.writes,
                 (args.slow_clients, args.slow_addresses, args.slow_interval))
    write_report(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
