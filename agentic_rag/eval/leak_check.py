"""A leak check of scoped keys over real HTTP: no reply, citation, search hit or stream chunk may hold
the text or the ids of a scope the key may not read. Writes report.json (with `leaks`) and report.md.

    pip install -e '.[serve,postgres,mcp]'
    python -m agentic_rag.eval.leak_check --scopes 4 --docs 24 --questions 12 --out reports/leak-check

Each scope (a tenant) gets documents tagged {"tenant": ...}, each holding a planted secret (a token
no other document holds) in sentences every scope shares ("The vault code of project Falcon is
..."), so that the scopes' documents are near-duplicates; a few documents belong to two tenants
(a list value). One server on 127.0.0.1 serves the corpus twice, as a saved folder and as a
PostgreSQL database (started with pgserver unless --postgres-url names one; --backends chooses).
Every tenant has a key that reads and writes only its own documents, and one key reads two tenants
with an "any of" filter. From every key, on both collections: questions about its own secrets,
about another tenant's (naming it), near-duplicates naming no tenant, each through ask (cache on,
twice, and off), ask streamed, search (three modes, and with a request filter naming another
tenant), chat (whole and streamed) and a conversation's follow-up, and through the MCP SDK's client
on /mcp/NAME (unless --no-mcp: search, ask, list and read every document, ask for another tenant's
by id), while a writer adds documents with new secrets through the tenants' keys. A leak is a secret
or a document id of a tenant the key may not read found anywhere in a reply's bytes. With
--replica, the PostgreSQL collection's searches go to a streaming replica of its server
(eval/_replica), started for the run; the report counts the transactions the replica served.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

from ..kb import Document, KnowledgeBase, KnowledgeBaseBackend
from ..models import OfflineModel
from ._mcp_leaks import mcp_every_way
from ._replica import StreamingReplica
from ._report import write_report
from .service_load import http_call

TOPICS = ("vault code", "launch date", "budget", "supplier", "project lead", "server name")
PROJECTS = ("Falcon", "Heron", "Otter", "Lynx", "Badger", "Marten")


class Planted:
    """The secrets and document ids planted so far, each with the tenants allowed to read it."""

    def __init__(self) -> None:
        self.owners: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def add(self, token: str, tenants: Iterable[str]) -> None:
        with self._lock:
            self.owners[token] = frozenset(tenants)

    def foreign(self, text: str, allowed: frozenset[str]) -> list[str]:
        """The planted tokens in `text` that no tenant of `allowed` may read."""
        with self._lock:
            owners = list(self.owners.items())
        return [token for token, tenants in owners if not tenants & allowed and token in text]


def corpus(scopes: int, docs: int, seed: int, planted: Planted) -> list[Document]:
    """`docs` documents per tenant, and one shared by each pair of neighbouring tenants."""
    rng = random.Random(seed)
    documents = []
    for s in range(scopes):
        tenant = f"tenant{s}"
        for j in range(docs):
            documents.append(_document(f"{tenant}-doc{j}", [tenant], j, rng, planted))
    for s in range(scopes - 1):
        documents.append(_document(f"shared{s}-doc0", [f"tenant{s}", f"tenant{s + 1}"], s, rng, planted))
    return documents


def _document(doc_id: str, tenants: list[str], j: int, rng: random.Random, planted: Planted) -> Document:
    while (secret := f"Q{rng.randrange(16 ** 10):010x}") in planted.owners:  # each secret planted once
        pass
    topic, project = TOPICS[j % len(TOPICS)], PROJECTS[(j // len(TOPICS)) % len(PROJECTS)]
    planted.add(secret, tenants)
    planted.add(doc_id, tenants)
    text = (f"The {topic} of project {project} is {secret}. The {project} team of {' and '.join(tenants)} keeps "
            f"this {topic} in its own notes.")
    return Document(doc_id, text, title=f"{project} {topic}", metadata={"tenant": tenants[0] if len(tenants) == 1
                                                                          else tenants})


def questions(tenant: str, others: list[str], count: int, rng: random.Random) -> list[str]:
    """Questions a key asks: about its own projects, about another tenant's, and near-duplicates
    that name no tenant."""
    asked = []
    for i in range(count):
        topic, project = rng.choice(TOPICS), rng.choice(PROJECTS)
        kind = i % 3
        who = tenant if kind == 0 else rng.choice(others) if kind == 1 and others else ""
        asked.append(f"What is the {topic} of project {project}" + (f" at {who}?" if who else "?"))
    return asked


class Client:
    """Real HTTP requests to the server, each reply's bytes checked for foreign tokens."""

    def __init__(self, port: int, planted: Planted):
        self.port, self.planted = port, planted
        self.statuses: Counter[str] = Counter()
        self.checked = 0
        self.leaks: list[dict] = []
        self._lock = threading.Lock()

    def call(self, method: str, path: str, body: dict | None, key: str, allowed: frozenset[str] | None,
             what: str) -> tuple[int, str]:
        status, data = http_call(self.port, method, path, body, key)
        text = data.decode("utf-8", "replace")
        self.check(what, path, str(status), text, allowed)
        return status, text

    def check(self, what: str, path: str, outcome: str, text: str, allowed: frozenset[str] | None) -> None:
        """Count a reply (`outcome`: its status) and record every foreign token its text holds."""
        with self._lock:
            self.statuses[f"{what} {outcome}"] += 1
            if allowed is not None:
                self.checked += 1
                for token in self.planted.foreign(text, allowed):
                    self.leaks.append({"what": what, "path": path, "token": token, "allowed": sorted(allowed)})


def _keys(scopes: int, collections: list[str]) -> list[dict]:
    """One key per tenant (reads and writes its own documents), one that reads two tenants ("any
    of"), and the operator's writer key is not needed: the writer writes through the tenants' keys."""
    import secrets

    keys = [{"id": f"tenant{s}", "key": secrets.token_urlsafe(24), "filter": {"tenant": f"tenant{s}"},
             "allowed": frozenset({f"tenant{s}"}), "write": collections} for s in range(scopes)]
    pair = [f"tenant{s}" for s in range(min(2, scopes))]
    keys.append({"id": "pair", "key": secrets.token_urlsafe(24), "filter": {"tenant": pair},
                 "allowed": frozenset(pair), "write": []})
    return keys


def run(scopes: int = 4, docs: int = 24, count: int = 12, backends: tuple[str, ...] = ("embedded", "postgres"),
        postgres_url: str | None = None, seed: int = 7, replica: bool = False, mcp: bool = True) -> dict:
    from ..service import KeyRing, create_collections, create_server, digest, write_keys_file

    planted, rng = Planted(), random.Random(seed + 1)  # the questions' and the writer's, apart from the corpus's
    documents = corpus(scopes, docs, seed, planted)
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as cleanup:
        collections: dict[str, Path | KnowledgeBaseBackend] = {}
        server_pg, opened, standby = None, [], None
        if "embedded" in backends:
            kb = KnowledgeBase()
            kb.add_documents(documents)
            kb.save(Path(scratch) / "folder")
            collections["folder"] = Path(scratch) / "folder"
        if "postgres" in backends:
            from ..kb import open_kb

            url = postgres_url
            if not url:
                import pgserver

                server_pg = pgserver.get_server(Path(scratch) / "pgdata", cleanup_mode="stop")
                cleanup.callback(server_pg.cleanup)  # stopped however the run ends, after the replica
                url = server_pg.get_uri()
            if replica:  # stopped as the run ends, before the scratch folder holding it is removed
                standby = StreamingReplica(url, Path(scratch) / "replica")
                cleanup.callback(standby.stop)
                url = f"{url}{'&' if '?' in url else '?'}read={quote(standby.url(), safe='')}"
            database = open_kb(url)
            opened.append(database)
            database.delete_documents([d.id for d in documents])  # the corpus's documents as planted now
            database.add_documents(documents)
            collections["database"] = database
        keys = _keys(scopes, list(collections))
        write_keys_file(Path(scratch) / "keys.json", [
            {"id": k["id"], "sha256": digest(k["key"]), "read": list(collections), "write": k["write"],
             "filter": k["filter"]} for k in keys])
        figures = {}
        for cache_size in (1024, 0):
            app = create_collections(OfflineModel(), collections, KeyRing(file=Path(scratch) / "keys.json"),
                                     cache_size=cache_size, state_dir=Path(scratch) / f"state{cache_size}")
            server = create_server(app, "127.0.0.1", 0, 8, app.limits.max_body_bytes)
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            try:
                figures["cache_on" if cache_size else "cache_off"] = _rounds(
                    Client(server.effective_port, planted), keys, list(collections), scopes, count, rng, mcp)
            finally:
                server.close()
                thread.join(30)
        for database in opened:
            database.close()
        served = None
        if standby is not None:
            served = _transactions(standby)
    leaks = sum(f["leaks"] for f in figures.values())
    return {"scopes": scopes, "documents_per_scope": docs, "questions_per_key": count, "backends": list(backends),
            "keys": len(keys), "leaks": leaks, "runs": figures, "replica_transactions": served}


def _rounds(client: Client, keys: list[dict], collections: list[str], scopes: int, count: int,
            rng: random.Random, mcp: bool) -> dict:
    """Every key's questions on every collection through every endpoint (the MCP client's too, with
    `mcp`), a writer at work meanwhile."""
    planted = client.planted
    stop, written = threading.Event(), Counter[str]()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            owner = keys[n % scopes]
            where = collections[n % len(collections)]
            document = _document(f"{owner['id']}-new{n}", [owner["id"]], n, rng, planted)  # planted before sent
            status, _ = client.call("POST", f"/v1/collections/{where}/documents", {"documents": [{
                "id": document.id, "text": document.text, "title": document.title}]}, owner["key"], None, "write")
            written[str(status)] += 1
            n += 1
            time.sleep(0.05)

    started = time.perf_counter()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        for key in keys:
            tenant = sorted(key["allowed"])[0]
            others = [f"tenant{s}" for s in range(scopes) if f"tenant{s}" not in key["allowed"]]
            for where in collections:
                asked = questions(tenant, others, count, rng)
                for question in asked:
                    _ask_every_way(client, key, where, question, others)
                if mcp:
                    mcp_every_way(client, key, where, asked, others)
    finally:
        stop.set()
        thread.join(30)
    return {"requests": sum(client.statuses.values()), "checked": client.checked, "leaks": len(client.leaks),
            "leak_examples": client.leaks[:10], "statuses": dict(sorted(client.statuses.items())),
            "writes": dict(written), "seconds": round(time.perf_counter() - started, 1)}


def _ask_every_way(client: Client, key: dict, where: str, question: str, others: list[str]) -> None:
    k, allowed, base = key["key"], key["allowed"], f"/v1/collections/{where}"
    for cache in (True, True, False):
        client.call("POST", f"{base}/ask", {"question": question, "cache": cache}, k, allowed, "ask")
    client.call("POST", f"{base}/ask", {"question": question, "stream": True}, k, allowed, "ask stream")
    for mode in ("hybrid", "bm25", "vector"):
        client.call("POST", f"{base}/search", {"query": question, "k": 10, "mode": mode}, k, allowed, "search")
    if others:  # a request filter can only narrow the key's: asking for another tenant finds nothing of it
        client.call("POST", f"{base}/search", {"query": question, "k": 10, "filters": {"tenant": others[0]}}, k,
                    allowed, "search filtered")
    chat = {"model": where, "messages": [{"role": "user", "content": question}]}
    client.call("POST", "/v1/chat/completions", chat, k, allowed, "chat")
    client.call("POST", "/v1/chat/completions", dict(chat, stream=True), k, allowed, "chat stream")
    status, text = client.call("POST", "/v1/chat/completions", dict(chat, conversation=True), k, allowed,
                               "chat conversation")
    if status == 200:
        conversation = json.loads(text)["agentic_rag"]["conversation_id"]
        client.call("POST", "/v1/chat/completions", {"model": where, "conversation_id": conversation, "messages": [
            {"role": "user", "content": "And what is its budget?"}]}, k, allowed, "chat follow-up")


def _transactions(standby: StreamingReplica) -> int:
    """The transactions committed on the replica (its own statistics: the reads it served, and ours)."""
    import psycopg

    time.sleep(1.2)  # a standby's statistics are flushed within a second
    with psycopg.connect(standby.url(), autocommit=True) as db:
        return int((db.execute("SELECT sum(xact_commit) FROM pg_stat_database").fetchone() or [0])[0] or 0)


def markdown(report: dict) -> str:
    lines = [f"# Leak check: {report['leaks']} leaks", "",
             f"{report['scopes']} tenants, {report['documents_per_scope']} documents each (and one shared by each "
             f"pair of neighbours), {report['keys']} keys, {report['questions_per_key']} questions a key on each "
             f"collection ({', '.join(report['backends'])}), a writer at work.", "",
             "| run | requests | checked | leaks | writes | seconds |", "|---|---|---|---|---|---|"]
    for name, run in report["runs"].items():
        lines.append(f"| {name} | {run['requests']} | {run['checked']} | {run['leaks']} | {run['writes']} | "
                     f"{run['seconds']} |")
    if report.get("replica_transactions") is not None:
        lines += ["", f"Searches on a streaming replica: it committed {report['replica_transactions']:,} transactions."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", type=int, default=4, help="tenants (default %(default)s)")
    parser.add_argument("--docs", type=int, default=24, help="documents a tenant (default %(default)s)")
    parser.add_argument("--questions", type=int, default=12, help="questions a key asks a collection (default "
                                                                  "%(default)s)")
    parser.add_argument("--backends", default="embedded,postgres", help="embedded, postgres or both (default "
                                                                        "%(default)s)")
    parser.add_argument("--postgres-url", help="a PostgreSQL database to use (default: start one with pgserver)")
    parser.add_argument("--replica", action="store_true", help="search the PostgreSQL collection on a streaming "
                                                                "replica of its server, started for the run")
    parser.add_argument("--no-mcp", action="store_true", help="no MCP client (without the mcp extra)")
    parser.add_argument("--out", default="reports/leak-check")
    args = parser.parse_args(argv)
    if not args.no_mcp and importlib.util.find_spec("mcp") is None:
        parser.error("the MCP client needs the mcp extra: pip install 'agentic-rag[mcp]', or give --no-mcp")
    if args.scopes < 2:
        parser.error("--scopes: give at least 2, so that there is another scope to leak")
    backends = tuple(b for b in args.backends.split(",") if b)
    if not backends or set(backends) - {"embedded", "postgres"}:
        parser.error("--backends: embedded, postgres or embedded,postgres")
    report = run(args.scopes, args.docs, args.questions, backends, args.postgres_url, replica=args.replica,
                 mcp=not args.no_mcp)
    write_report(args.out, report, markdown(report))
    return 1 if report["leaks"] else 0


if __name__ == "__main__":
    sys.exit(main())
