"""Tests that start processes hold on a busy machine and leave none behind: with every core kept
busy by a bounded load (spinning processes, one a core, ended with the test), a
streaming replica starts and serves reads, `agentic-rag serve` starts, answers and stops
gracefully, and `agentic-rag index` runs in a process of its own; afterwards no process of theirs
is left (by command line, so a postgres reparented away from the test is caught too). Readiness
is waited on (the replica's WAL receiver streaming, the port answering), never a fixed sleep."""
import os
import subprocess
import sys

import psutil
import pytest

from agentic_rag.eval._replica import StreamingReplica
from agentic_rag.kb import Document, PostgresKnowledgeBase
from helpers import EXAMPLE_DATA, ROOT, start_service
from test_serve_stop import asked_then_stopped

SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def busy_cpu():
    """Every core busy for the test (at most 3 minutes), one spinner a core; the spinners end with it."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=180)])
                for _ in range(os.cpu_count() or 1)]
    yield len(spinners)
    for spinner in spinners:
        spinner.kill()
        spinner.wait(30)


def _left(marker: str) -> list[str]:
    """Command lines of the processes on this machine that name `marker` (a test's folder)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if marker in line:
            found.append(line[:200])
    return found


def test_a_replica_starts_serves_reads_and_is_gone_afterwards(busy_cpu, pg_server, pg_url, tmp_path):
    replica = StreamingReplica(pg_server.get_uri(), tmp_path / "replica")
    try:
        name = pg_url.partition("?")[0].rsplit("/", 1)[1]
        from urllib.parse import quote

        kb = PostgresKnowledgeBase(pg_url + "&read=" + quote(replica.url(name), safe=""))
        kb.add_documents([Document(id="d1", text="The replica streams the primary's write-ahead log.")])
        replica.caught_up()
        assert [h.doc_id for h in kb.search("write-ahead log", k=1)] == ["d1"]
        kb.close()
    finally:
        replica.stop()
    assert not _left(str(tmp_path / "replica"))


def test_serve_starts_answers_and_stops_gracefully_under_load(busy_cpu, example_kb_dir, tmp_path):
    process, port = start_service(example_kb_dir, tmp_path, "busy")
    try:
        asked_then_stopped(process, port)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    assert not _left(str(tmp_path))


def test_index_in_a_process_of_its_own_under_load(busy_cpu, tmp_path):
    done = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "index", "--embedder", "hashing",
                           str(EXAMPLE_DATA), "--kb", str(tmp_path / "kb")], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "kb" / "manifest.json").exists()
    assert not _left(str(tmp_path))
