"""Two writers on one saved knowledge base, as two real processes: neither loses the other's change.

Each test pauses one process at a known point (it prints a line and waits for one on stdin), so
the order of events is fixed by handshakes, not by sleeps.
"""
import json
import subprocess
import sys
import time

import pytest

from agentic_rag import KnowledgeBase
from agentic_rag.cli import main
from helpers import EXAMPLE_DATA, ROOT

# a library user's writer: loads (inside the writer lock when told to), says "loaded", waits for a
# line, then adds a document and saves
WRITER = """
import contextlib, sys
from pathlib import Path
from agentic_rag import AgenticRAGError, Document, KnowledgeBase, writer_lock
kb_dir, locked = Path(sys.argv[1]), sys.argv[2] == "locked"
try:
    with writer_lock(kb_dir) if locked else contextlib.nullcontext():
        kb = KnowledgeBase.load(kb_dir)
        print("loaded", flush=True)
        sys.stdin.readline()
        kb.add_documents([Document("writer-add", "a note about zebras from the first writer")])
        kb.save(kb_dir)
    print("saved", flush=True)
except AgenticRAGError as exc:
    print(f"refused: {type(exc).__name__}: {exc}", flush=True)
"""


def _start_writer(kb_dir, locked: bool) -> subprocess.Popen:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(kb_dir), "locked" if locked else "free"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert writer.stdout.readline() == "loaded\n"
    return writer


def _finish(writer: subprocess.Popen) -> str:
    out, _ = writer.communicate("go\n", timeout=120)
    return out


def _doc_ids(kb_dir) -> set:
    """The documents of the saved knowledge base, among those these tests write or delete (a vector
    search restricted to one document finds a chunk of it whenever it is held)."""
    kb = KnowledgeBase.load(kb_dir)
    return {doc_id for doc_id in ("writer-add", "small-add", "contract-a.md", "contract-b.md")
            if kb.search("document", k=1, mode="vector", filters={"doc_id": [doc_id]})}


@pytest.fixture
def kb_dir(tmp_path, capsys):
    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", str(tmp_path / "kb")]) == 0
    capsys.readouterr()
    return tmp_path / "kb"


@pytest.fixture
def small_folder(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "one.jsonl").write_text(json.dumps({"id": "small-add", "text": "一条关于斑马的小文档"}) + "\n",
                                      encoding="utf-8")
    return folder


def test_a_second_index_waits_for_the_writer_and_keeps_both_changes(kb_dir, small_folder):
    writer = _start_writer(kb_dir, locked=True)
    cli = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "index", "--embedder", "hashing",
                                                                     str(small_folder), "--kb", str(kb_dir)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "waiting for another writer" in cli.stderr.readline()
    finally:
        assert _finish(writer) == "saved\n"
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert "knowledge base now holds 4 documents" in out
    assert {"writer-add", "small-add", "contract-a.md", "contract-b.md"} <= _doc_ids(kb_dir)


@pytest.mark.parametrize("argv", [["index", "SMALL"], ["delete", "contract-a.md"]])
def test_a_writer_that_cannot_get_the_lock_is_refused_in_one_line(kb_dir, small_folder, capsys, monkeypatch, argv):
    monkeypatch.setattr("agentic_rag.cli._main.LOCK_WAIT_S", 0.0)  # refuse at once rather than wait
    writer = _start_writer(kb_dir, locked=True)
    try:
        before = (kb_dir / "manifest.json").read_text()
        code = main([str(small_folder) if a == "SMALL" else a for a in argv] + ["--kb", str(kb_dir)])
        err = capsys.readouterr().err
        assert code == 1 and err.count("\n") == 1
        assert f"another process is writing the knowledge base at {kb_dir}" in err and "then retry" in err
        assert (kb_dir / "manifest.json").read_text() == before
    finally:
        assert _finish(writer) == "saved\n"
    assert "contract-a.md" in _doc_ids(kb_dir) and "small-add" not in _doc_ids(kb_dir)


def test_refused_writers_leave_no_thread_or_descriptor_behind(kb_dir):
    import os
    import threading

    from agentic_rag import WriteConflict, writer_lock

    writer = _start_writer(kb_dir, locked=True)  # holds the lock until told to go on
    try:
        before = (threading.active_count(), len(os.listdir("/proc/self/fd")))
        for _ in range(10):
            with pytest.raises(WriteConflict, match="another process is writing"):
                with writer_lock(kb_dir, wait_s=0.1):
                    pass
        assert (threading.active_count(), len(os.listdir("/proc/self/fd"))) == before
    finally:
        assert _finish(writer) == "saved\n"
    with writer_lock(kb_dir, wait_s=5):  # and the lock is free again once the other writer let go
        pass


def test_a_save_after_another_process_saved_is_refused(kb_dir, capsys):
    # index saved gen-000001 searchable, then gen-000002 with the vectors
    writer = _start_writer(kb_dir, locked=False)              # loaded gen-000002, then paused
    assert main(["delete", "contract-a.md", "--kb", str(kb_dir)]) == 0   # saves gen-000003 meanwhile
    capsys.readouterr()
    out = _finish(writer)
    assert out.startswith("refused: WriteConflict: ") and "changed since this knowledge base was loaded" in out
    assert "(gen-000002, now gen-000003)" in out and "reload it and retry" in out
    ids = _doc_ids(kb_dir)
    assert "contract-a.md" not in ids and "writer-add" not in ids   # the delete stays; nothing came back


# -- fairness: writers in two processes that write again and again take turns -------------------------

# a writer that, once both are ready, takes the lock TURNS times in a row, writing its name in the log
# each time it holds it (the brief sleep stands for a save's work)
TAKER = """
import sys, time
from pathlib import Path
from agentic_rag import writer_lock
folder, name, turns = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
(folder / f"ready-{name}").touch()
while not (folder / "go").exists():
    time.sleep(0.001)
for _ in range(turns):
    with writer_lock(folder, wait_s=120):
        with open(folder / "turns", "a") as log:
            log.write(name)
        time.sleep(0.02)
"""


def test_two_processes_writing_again_and_again_take_turns(tmp_path):
    turns = 30
    takers = [subprocess.Popen([sys.executable, "-c", TAKER, str(tmp_path), name, str(turns)], cwd=ROOT)
              for name in "ab"]
    try:
        while not all((tmp_path / f"ready-{name}").exists() for name in "ab"):
            assert all(t.poll() is None for t in takers), "a writer died before it started"
            time.sleep(0.01)
        (tmp_path / "go").touch()
        assert [t.wait(300) for t in takers] == [0, 0]
    finally:
        for taker in takers:
            if taker.poll() is None:
                taker.kill()
    log = (tmp_path / "turns").read_text()
    assert sorted(log) == ["a"] * turns + ["b"] * turns
    # while both wanted the lock (from the later one's first turn to the first one's last), they took turns:
    # without a queue the writer that let it go took it straight back, the other waited for all its turns
    both = log[max(log.index("a"), log.index("b")):min(log.rindex("a"), log.rindex("b")) + 1]
    # a count of hand-overs, not of the longest run: a run's length depends on how long the machine
    # stalls one process (a loaded machine can stall one for several turns); hand-overs stay the most
    # (queued: every stall costs one; unqueued: a handful in all)
    switches = sum(x != y for x, y in zip(both, both[1:], strict=False))
    assert len(both) >= turns and switches >= len(both) // 4, log
