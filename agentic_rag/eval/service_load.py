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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..kb import KnowledgeBase, KnowledgeBaseBackend
from ..loop import run_agentic_rag
from ..models import OfflineModel
from ._metrics import percentile
from ._report import write_report
from ._slow_clients import slow_clients


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(served: dict[str, Path], clients: int, cache: bool, keys_file: Path | None = None
           ) -> tuple[subprocess.Popen, int]:
    """`agentic-rag serve` over the folders of `served` (one unnamed, or several as collections)."""
    port = _free_port()
    kbs = [str(served["default"])] if list(served) == ["default"] else [f"{n}={f}" for n, f in served.items()]
    flags = [x for kb in kbs for x in ("--kb", kb)] + (["--keys-file", str(keys_file)] if keys_file else [])
    process = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "serve", *flags, "--port",
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


def http_call(port: int, method: str, path: str, body: dict | None = None, key: str | None = None) -> tuple[int, bytes]:
    """One request to the server on 127.0.0.1:`port` (a JSON body, a bearer key): its status and bytes."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    connection.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def _call(port: int, method: str, path: str, body: dict | None = None, key: str | None = None) -> tuple[int, dict]:
    status, data = http_call(port, method, path, body, key)
    return status, json.loads(data)


def questions_from(kb: KnowledgeBase) -> list[str]:
    """Distinct questions, one per chunk: its first words, asked about."""
    found: dict[str, None] = {}  # insertion-ordered, without repeats
    for chunk in kb._chunks:
        if chunk is not None:
            words = " ".join(chunk["text"].split()[:8]) if " " in chunk["text"] else chunk["text"][:16]
            found[f"What does the knowledge base say about: {words}?"] = None
    return list(found)


def _clients(count: int, seconds: float, ask: Callable[[int], dict]) -> tuple[list[dict], float]:
    """`count` threads calling ask(index) for `seconds`; (records, elapsed seconds)."""
    records, lock, deadline = [], threading.Lock(), time.monotonic() + seconds
    counter = iter(range(10**9))

    def client() -> None:
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


def _with_slow_clients(port: int, clients: int, seconds: float, ask: Callable[[int], dict],
                       slow: tuple[int, int, float]) -> tuple[dict, dict]:
    """(figures of `ask` from `clients` threads for `seconds`, the slow clients' report) while the
    slow clients are at work; a request that fails at the socket counts as an error."""
    stop, found = threading.Event(), {}
    thread = threading.Thread(target=lambda: found.update(slow_clients(port, *slow, stop)))
    thread.start()
    time.sleep(slow[2])  # every slow client has connected once

    def guarded(i: int) -> dict:
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


class Tenants:
    """The load's collections and keys: one collection and no keys, as a lone knowledge base is
    served; or `count` collections, each holding every tenant's copy of the knowledge base's chunks
    (tagged {"tenant": "tN"}), and a key per tenant that reads and writes every collection, its
    filter its tenant. Request `i` goes to collection i % count with the key of tenant i // count."""

    def __init__(self, kb: KnowledgeBase, scratch: Path, count: int):
        import secrets

        from ..kb import Document
        from ..service import digest, write_keys_file

        self.count, self.names = count, ["default"] if count == 1 else [f"c{n}" for n in range(count)]
        self.keys = [] if count == 1 else [secrets.token_urlsafe(24) for _ in range(count)]
        self.keys_file = None if count == 1 else scratch / "keys.json"
        if self.keys_file is not None:
            write_keys_file(self.keys_file, [{"id": f"t{n}", "sha256": digest(key), "write": ["*"],
                                              "filter": {"tenant": f"t{n}"}} for n, key in enumerate(self.keys)])
        self.folders: dict[str, Path] = {}
        for name in self.names:
            self.folders[name] = scratch / "kbs" / name
            if count == 1:
                kb.save(self.folders[name])
                continue
            tagged = KnowledgeBase(embedder=kb.embedder, config=kb.config)
            tagged.add_documents([Document(f"t{n}-{c['id']}", c["text"], c["title"], c["source"],
                                           {**c["metadata"], "tenant": f"t{n}"})
                                  for n in range(count) for c in kb._chunks if c is not None])
            tagged.save(self.folders[name])

    def route(self, i: int) -> tuple[str, str, str | None, dict | None]:
        """Request i's collection, its path prefix, its key and the key's filter."""
        if self.count == 1:
            return "default", "/v1", None, None
        name, tenant = self.names[i % self.count], (i // self.count) % self.count
        return name, f"/v1/collections/{name}", self.keys[tenant], {"tenant": f"t{tenant}"}


def run(kb_dir: str, clients: int, seconds: float, writes: int, slow: tuple[int, int, float] = (0, 1, 2.0),
        collections: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        kept = Path(scratch) / "generations"
        tenants = Tenants(KnowledgeBase.load(kb_dir), Path(scratch), collections)
        loaded_first = {name: KnowledgeBase.load(folder) for name, folder in tenants.folders.items()}
        asked = questions_from(KnowledgeBase.load(kb_dir))
        model = OfflineModel()
        report: dict[str, Any] = {"clients": clients, "seconds": seconds, "collections": collections,
                                  "keys": len(tenants.keys)}

        def view(kb: KnowledgeBase, scope: dict | None) -> KnowledgeBaseBackend:
            return kb.restricted(scope, scope=True) if scope else kb  # as the service restricts a key

        process, port = _start(tenants.folders, clients, False, tenants.keys_file)
        try:
            def over_http(i: int) -> dict:
                name, base, key, scope = tenants.route(i)
                status, reply = _call(port, "POST", f"{base}/ask", {"question": asked[i % len(asked)],
                                                                  "cache": False}, key)
                return {"status": status, "question": asked[i % len(asked)], "answer": reply.get("answer"),
                        "generation": reply.get("generation"), "collection": name, "scope": scope}

            report["http"] = _figures(*_clients(clients, seconds, over_http))
            if slow[0]:
                report["http_slow"], report["slow"] = _with_slow_clients(port, clients, seconds, over_http, slow)
                report["slow_p95_ratio"] = round(report["http_slow"]["p95_ms"] / report["http"]["p95_ms"], 2)

            def direct(i: int) -> dict:
                name, _, _, scope = tenants.route(i)
                return {"answer": run_agentic_rag(asked[i % len(asked)], view(loaded_first[name], scope), model)[
                    "answer"]}

            report["library"] = _figures(*_clients(clients, seconds, direct))
            report["http_to_library"] = round(report["http"]["rps"] / max(report["library"]["rps"], 1e-9), 3)

            for name, folder in tenants.folders.items():
                _, base, key, _ = tenants.route(tenants.names.index(name))
                health = "/healthz" if collections == 1 else f"{base}/healthz"
                generation = _call(port, "GET", health, None, key)[1]["generation"]
                shutil.copytree(folder, kept / name / generation, ignore=shutil.ignore_patterns(".lock"))
            acknowledged, stop, done = {}, threading.Event(), []

            def writer() -> None:
                for n in range(writes):
                    if stop.wait(seconds / (writes + 1)):
                        return
                    # each write goes to one collection with one tenant's key; a delete removes the
                    # document added two writes before, where it was added
                    target = n - 2 if n % 3 == 2 else n
                    name, base, key, _ = tenants.route(target)
                    doc_id = f"load-{target}"
                    if n % 3 == 2:
                        status, reply = _call(port, "DELETE", f"{base}/documents/{doc_id}", None, key)
                        acknowledged[(name, doc_id)] = False
                    else:
                        status, reply = _call(port, "POST", f"{base}/documents", {"documents": [
                            {"id": doc_id, "text": f"Load note {n}: the service stayed up while this was written."}]},
                            key)
                        acknowledged[(name, doc_id)] = True
                    if status == 200:
                        done.append(doc_id)
                        shutil.copytree(tenants.folders[name], kept / name / reply["generation"],
                                        ignore=shutil.ignore_patterns(".lock"), dirs_exist_ok=True)

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
        for record in records:  # each reply is what the library answers the key, on the generation it names
            if record["status"] != 200:
                continue
            where = (record["collection"], record["generation"])
            if where not in loaded:
                loaded[where] = KnowledgeBase.load(kept / record["collection"] / record["generation"])
            alone = run_agentic_rag(record["question"], view(loaded[where], record["scope"]), model)["answer"]
            cross_talk += alone != record["answer"]
        report["cross_talk"] = cross_talk
        report["generations_seen"] = len(loaded)

        process, port = _start(tenants.folders, clients, True, tenants.keys_file)  # a restart: every write is there
        try:
            found = {}
            for name, doc_id in acknowledged:
                _, base, key, _ = tenants.route(int(doc_id.split("-")[1]))
                found[(name, doc_id)] = bool(_call(port, "POST", f"{base}/search", {
                    "query": "Load note", "k": 50, "filters": {"doc_id": [doc_id]}}, key)[1]["hits"])
            report["lost_writes"] = sum(found[w] != present for w, present in acknowledged.items())
            few = asked[:20]

            def cached(i: int) -> dict:
                _, base, key, _ = tenants.route(i)
                return dict(zip(("status", "reply"), _call(port, "POST", f"{base}/ask", {"question": few[i % len(few)]},
                                                           key), strict=True))

            report["http_cached"] = _figures(*_clients(clients, seconds / 2, cached))
        finally:
            process.terminate()
            process.wait(30)
    return report


def markdown(report: dict) -> str:
    rows = [("HTTP, cache off", report["http"]), ("library, direct", report["library"]),
            ("HTTP, cache off, with a writer", report["http_with_writer"]), ("HTTP, cache on", report["http_cached"])]
    lines = ["# The HTTP service on 127.0.0.1 against the library called directly: requests a second, latency "
             "in ms, errors, cross-talk and lost writes", "",
             (f"{report['collections']} collections, {report['keys']} keys with a tenant filter each; "
              if report.get("collections", 1) > 1 else "") +
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
    parser.add_argument("--collections", type=int, default=1,
                        help="collections served, each with every tenant's copy of the chunks, and a scoped key per "
                             "tenant (default 1: one knowledge base, no keys)")
    parser.add_argument("--out", default="reports/service-load")
    args = parser.parse_args(argv)
    if not 0 <= args.slow_clients <= 900 or not 1 <= args.slow_addresses <= 250 or not args.slow_interval > 0:
        parser.error("--slow-clients 0 to 900 (one select() of them), --slow-addresses 1 to 250, --slow-interval > 0")
    if not 1 <= args.collections <= 16:
        parser.error("--collections: 1 to 16")
    report = run(args.kb, args.clients, args.seconds, args.writes,
                 (args.slow_clients, args.slow_addresses, args.slow_interval), args.collections)
    write_report(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
