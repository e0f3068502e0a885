"""What the tests share: project paths, the tiny mixed Chinese/English corpus, `run`, the command
line run in-process, and `start_service`, the service in a process of its own.

Test modules import these from here (`from helpers import ROOT`); conftest.py keeps only the
fixtures and pytest hooks, because pytest loads conftest itself and importing it as a module
would load it twice. pytest's default import mode puts this directory on sys.path, as it does
for conftest.py and openai_server.py.
"""
import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

from agentic_rag.cli import main
from agentic_rag.kb import Document, HashingEmbedder

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DATA = ROOT / "examples" / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"

TINY = [
    Document("release-2.3.1", "Fixed the authentication timeout in v2.3.1. 修复了认证超时问题。",
             title="Release notes 2.3.1", source="notes/2.3.1.md",
             metadata={"type": "release_note", "version": "2.3.1", "date": "2026-04-14"}),
    Document("release-2.3.0", "New sign-in page in 2_3_0. Offline attachments up to 50 MB.",
             title="Release notes 2.3.0", source="notes/2.3.0.md",
             metadata={"type": "release_note", "version": "2.3.0", "date": "2026-03-02"}),
    Document("ticket-1", "客户端提示认证失败，需要重新输入密码。", title="认证失败", source="tickets.jsonl:1",
             metadata={"type": "ticket", "date": "2026-03-10"}),
    Document("shipping", "工作日 15:00 之前付款的订单当天发货。Orders paid after 15:00 ship the next business day.",
             title="Shipping rules", source="warehouse.md", metadata={"type": "policy", "date": "2026-01-05"}),
    Document("pricing", "The Team plan costs 8 USD per member and month. Annual billing gives 20% off.",
             title="Pricing", source="pricing.md", metadata={"type": "manual"}),
]

# paraphrases that share no token with their document in examples/data, two of them across languages
PARAPHRASES = [
    ("When can we expect a collaborative drawing board?", "release-notes/nimbus-2.4.0-roadmap.md"),
    ("a customer could not invite one more colleague because the team is full", "NT-1189"),
    ("which days are goods not dispatched during the spring festival", "warehouse/holidays-2026.md"),
]


def run(capsys, *argv):
    """Run the real command line in this process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(capsys, *argv) -> str:
    """The one line a bad command line gets (exit code 2)."""
    import pytest

    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    return err


def without(target, member: str):
    """A stand-in for `target` with every member of it but `member`: what a protocol check must refuse."""

    class Without:
        def __getattr__(self, name):
            if name == member:
                raise AttributeError(name)
            return getattr(target, name)

        def __len__(self):
            return len(target)

    return Without()


class DenseHashing(HashingEmbedder):
    """The hashing embedder's vectors in a dense index (hnswlib above exact_search_below), for tests
    of that path without a model's weights; the hashing embedder itself is sparse, never a graph."""

    name = "dense-hashing"
    sparse = False

    def __init__(self, dimension: int = 64):
        super().__init__(dimension)


def stop_service(process: subprocess.Popen) -> None:
    """A served process stopped as an operator would (SIGTERM: a graceful stop, which may take its
    --shutdown-timeout), killed if a busy machine has not seen it end in two minutes."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(60)


def start_service(folder: Path, tmp_path: Path, name: str, *flags: str, python=None,
                  env: dict | None = None) -> tuple[subprocess.Popen, int]:
    """`agentic-rag serve --kb folder` (and `flags`) in a process of its own, on a port it reports
    once it answers /healthz; `python(code, *args)` gives the command that runs it
    (file_size_limited with its limit bound), if given; `env` adds to its environment. Its output
    goes to tmp_path/NAME.log."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(tmp_path / f"{name}.log", "w")
    serve = ["serve", "--kb", str(folder), "--port", str(port), *flags]
    command = python("from agentic_rag.cli import main; sys.exit(main(sys.argv[1:]))", *serve) if python else \
        [sys.executable, "-m", "agentic_rag.cli", *serve]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                               env={**{k: v for k, v in os.environ.items()
                                       if not k.startswith("AGENTIC_RAG_") or k == "AGENTIC_RAG_EMBEDDING_CACHE"},
                                    **(env or {})})
    deadline = time.monotonic() + 180  # readiness, with room for a busy machine: not a fixed count of tries
    while process.poll() is None and time.monotonic() < deadline:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=5).request("GET", "/healthz")
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    process.wait(60)
    raise AssertionError((tmp_path / f"{name}.log").read_text())
