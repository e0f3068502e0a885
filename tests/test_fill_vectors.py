"""Vectors filled in behind: a knowledge base added with defer_vectors is searchable at once (BM25
and the graph), gives its chunks their vectors batch by batch (fill_vectors), each batch saved as
one change, and ends exactly where an add that embedded everything at once ends. Meanwhile hybrid
search ranks a chunk without a vector by BM25 alone, neither up nor down; the store port says how
many chunks have one. Chunks of one text (up to whitespace) are embedded once, and an embedding
cache serves another knowledge base given the same texts."""
import threading

import numpy as np
import pytest

from agentic_rag import Config, KnowledgeBase, run_agentic_rag
from agentic_rag.kb import Document, HashingEmbedder, MemoryKnowledgeBase
from agentic_rag.models import OfflineModel
from helpers import DenseHashing, run


class Counting(DenseHashing):
    """The dense hashing embedder, counting the texts it is given."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += list(texts)
        return super().embed(texts)


def _docs(n: int = 40) -> list[Document]:
    words = ["archive", "backup", "cipher", "daemon", "editor", "format", "kernel", "ledger"]
    return [Document(f"d{i}", f"Page {i} about the {words[i % 8]} and {words[(i * 3) % 8]} in release {i}.",
                     title=f"Page {i}", source=f"p{i}.md") for i in range(n)]


def _vectors(kb: KnowledgeBase) -> tuple[list, np.ndarray]:
    rows = [row for row, chunk in enumerate(kb._chunks) if chunk is not None]
    return [kb._chunks[row] for row in rows], kb._vectors.vectors_of(rows)


@pytest.mark.parametrize("embedder", [HashingEmbedder, DenseHashing], ids=["sparse", "dense"])
def test_a_deferred_add_filled_and_saved_batch_by_batch_ends_as_a_whole_add(tmp_path, embedder):
    whole = KnowledgeBase(embedder())
    whole.add_documents(_docs())
    kb = KnowledgeBase(embedder())
    kb.add_documents(_docs(), defer_vectors=True)
    assert kb.pending_vectors == len(kb) == 40
    kb.save(tmp_path / "kb")
    seen = []
    loaded = KnowledgeBase.load(tmp_path / "kb", embedder())
    assert loaded.pending_vectors == 40
    assert loaded.fill_vectors(batch=7, limit=20, save_to=tmp_path / "kb", on_batch=lambda *a: seen.append(a)) == 20
    assert seen[0] == (7, 33) and seen[-1] == (20, 20)
    halfway = KnowledgeBase.load(tmp_path / "kb", embedder())  # a delta segment a batch, read back
    assert halfway.pending_vectors == 20
    assert halfway.fill_vectors(batch=9, save_to=tmp_path / "kb") == 20
    done = KnowledgeBase.load(tmp_path / "kb", embedder())
    assert done.pending_vectors == 0 and done.fill_vectors() == 0
    chunks, vectors = _vectors(done)
    expected_chunks, expected = _vectors(whole)
    assert chunks == expected_chunks and np.array_equal(vectors, expected)
    query = "the cipher and kernel in release 12"
    assert [h.id for h in done.search(query)] == [h.id for h in whole.search(query)]


def test_while_every_vector_waits_hybrid_search_ranks_as_bm25_does(tmp_path):
    for fusion in ("score", "rrf"):
        kb = KnowledgeBase(DenseHashing(), Config(fusion=fusion))
        kb.add_documents(_docs(), defer_vectors=True)
        for query in ("backup daemon", "release 7 ledger", "editor"):
            hybrid, bm25 = kb.search(query, k=8), kb.search(query, k=8, mode="bm25")
            assert [h.id for h in hybrid] == [h.id for h in bm25], (fusion, query)
            assert all(set(h.ranks) == {"bm25"} for h in hybrid)  # no vector rank is made up


def test_a_chunk_waiting_for_its_vector_keeps_the_share_bm25_gives_it():
    kb = KnowledgeBase(DenseHashing(), Config(fusion="score", vector_weight=1.5, rerank=False))
    kb.add_documents(_docs(20))
    kb.add_documents([Document("late", "The cipher daemon of the late page.", title="Late", source="late.md")],
                     defer_vectors=True)
    assert kb.pending_vectors == 1
    hits = kb.search("cipher daemon late page", k=20)
    late = next(h for h in hits if h.doc_id == "late")
    bm25 = kb.search("cipher daemon late page", k=20, mode="bm25")
    assert bm25[0].doc_id == "late" and "vector" not in late.ranks
    assert late.score == pytest.approx(1.0 + 1.5)  # BM25's best, counted for both retrievers: not ranked down
    assert hits[0].doc_id == "late"


def test_the_port_says_how_many_chunks_have_a_vector(tiny_docs):
    folder = KnowledgeBase()
    folder.add_documents(tiny_docs[:2])
    folder.add_documents(tiny_docs[2:], defer_vectors=True)
    memory = MemoryKnowledgeBase()
    memory.add_documents(tiny_docs)
    assert folder.store.read(lambda s: (s.size(), s.embedded_count())) == (5, 2)
    assert folder.store.read(lambda s: s.unembedded([0, 1, 2, 3, 4, 99])) == {2, 3, 4, 99}
    assert memory.store.read(lambda s: (s.size(), s.embedded_count(), s.unembedded([0, 1]))) == (5, 5, set())
    assert folder.restricted({"type": "ticket"}).pending_vectors == 3 and memory.pending_vectors == 0
    assert set(folder.vector_scores("认证", [f"{d.id}#0" for d in tiny_docs])) == {"release-2.3.1#0", "release-2.3.0#0"}


def test_a_run_on_a_knowledge_base_still_filling_says_so_in_its_trace(tiny_docs):
    kb = KnowledgeBase()
    kb.add_documents(tiny_docs, defer_vectors=True)
    state = run_agentic_rag("Which version fixed the authentication timeout?", kb, OfflineModel())
    event = next(e for e in state["trace"] if e["step"] == "vectors")
    assert event["summary"] == "vectors:-5" and event["detail"]["chunks"] == 5
    assert state["answer"] and "2.3.1" in state["answer"]
    kb.fill_vectors()
    state = run_agentic_rag("Which version fixed the authentication timeout?", kb, OfflineModel())
    assert all(e["step"] != "vectors" for e in state["trace"])


def test_chunks_of_one_text_up_to_whitespace_are_embedded_once(tmp_path):
    embedder = Counting()
    nav = "Home | Reference | Index\n\nSearch the manual"
    docs = [Document(f"page{i}", nav.replace("\n", " \n " * (i % 3 + 1)) if i % 2 else nav, source=f"{i}.html")
            for i in range(6)] + [Document("other", "Something else entirely.", source="o.md")]
    kb = KnowledgeBase(embedder)
    kb.add_documents(docs[:3])
    kb.add_documents(docs[3:], defer_vectors=True)
    kb.fill_vectors()
    assert sorted(embedder.texts) == sorted([nav, "Something else entirely."])
    chunks, vectors = _vectors(kb)
    assert all(np.array_equal(vectors[i], vectors[0]) for i, c in enumerate(chunks) if c["doc_id"] != "other")


def test_an_embedding_cache_serves_another_knowledge_base_and_a_second_fill(tmp_path):
    first, second = Counting(), Counting()
    KnowledgeBase(first).add_documents(_docs(), embedding_cache=tmp_path / "cache")
    kb = KnowledgeBase(second)
    kb.add_documents(_docs(), defer_vectors=True)
    assert kb.fill_vectors(embedding_cache=tmp_path / "cache") == 40
    assert len(first.texts) == 40 and second.texts == []


def test_searches_and_a_delete_go_on_while_a_fill_runs():
    kb = KnowledgeBase(DenseHashing())
    kb.add_documents(_docs(200), defer_vectors=True)
    stop, errors = threading.Event(), []

    def search():
        while not stop.is_set():
            try:
                assert len(kb.search("backup daemon release", k=5)) == 5
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    reader = threading.Thread(target=search)
    reader.start()
    try:
        assert kb.delete_documents([f"d{i}" for i in range(0, 200, 10)]) == 20
        kb.fill_vectors(batch=16)
    finally:
        stop.set()
        reader.join()
    assert not errors and kb.pending_vectors == 0 and kb._vectors.size == len(kb) == 180


def test_a_stopped_fill_ends_at_a_batch_and_a_saved_kb_missing_a_vectors_file_is_refused(tmp_path):
    kb = KnowledgeBase(DenseHashing())
    kb.add_documents(_docs(), defer_vectors=True)
    stop = threading.Event()
    assert kb.fill_vectors(batch=8, save_to=tmp_path / "kb", on_batch=lambda filled, left: stop.set(), stop=stop) == 8
    assert KnowledgeBase.load(tmp_path / "kb", DenseHashing()).pending_vectors == 32
    manifest = (tmp_path / "kb" / "manifest.json").read_text()
    assert '"vectors": 8' in manifest


def test_the_cli_searches_a_filling_kb_with_bm25_and_doctor_says_so(tmp_path, capsys, tiny_docs):
    kb = KnowledgeBase()
    kb.add_documents(tiny_docs, defer_vectors=True)
    kb.save(tmp_path / "kb")
    code, out, err = run(capsys, "search", "认证失败", "--kb", str(tmp_path / "kb"), "--json")
    assert code == 0 and '"ticket-1#0"' in out
    assert f"note: 5 of 5 chunks still wait for their vectors (an index is filling them in, or was stopped: " \
           f"agentic-rag fill --kb {tmp_path / 'kb'}); searching with BM25 alone" in err
    code, out, _ = run(capsys, "doctor", "--kb", str(tmp_path / "kb"))
    assert code == 0 and "0 of 5 chunks have their vectors" in out
    code, out, err = run(capsys, "fill", "--kb", str(tmp_path / "kb"))
    assert code == 0 and out.startswith("filled 5 vectors;") and "embedded and saved" not in err  # one batch: no line
    code, out, err = run(capsys, "search", "认证失败", "--kb", str(tmp_path / "kb"))
    assert code == 0 and "note:" not in err
    code, out, _ = run(capsys, "fill", "--kb", str(tmp_path / "kb"))
    assert code == 0 and out == "nothing to fill: every chunk has its vector\n"


# serve's embedder made slow (4 texts a call, SLOW_S each): a served fill batch takes seconds
SLOW_SERVE = """import sys, time
from agentic_rag.kb.embedders._embedders import HashingEmbedder
embed = HashingEmbedder.embed
HashingEmbedder.embed = lambda self, texts: (time.sleep({slow_s}), embed(self, texts))[1]
HashingEmbedder.batch_size = 4
"""


def _vectors_saved(folder) -> tuple[int, int]:
    import json

    counts = json.loads((folder / "manifest.json").read_text())["counts"]
    return counts["chunks"], counts["vectors"]


def _until(done, what: str, timeout_s: float = 180.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s  # readiness, with room for a busy machine
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.twoprocess
def test_serve_fills_the_vectors_behind_its_answers_and_a_sigterm_stops_at_a_saved_batch(tmp_path):
    import http.client
    import json
    import sys

    from agentic_rag.service._served import SERVED_FILL_BATCH
    from helpers import start_service, stop_service

    folder = tmp_path / "kb"
    kb = KnowledgeBase()
    kb.add_documents(_docs(200), defer_vectors=True)
    kb.save(folder)

    def slow(slow_s):
        return lambda code, *args: [sys.executable, "-c", SLOW_SERVE.format(slow_s=slow_s) + code, *args]

    process, port = start_service(folder, tmp_path, "slow", python=slow(0.2))
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("POST", "/v1/search", json.dumps({"query": "cipher daemon", "k": 3}),
                           {"Content-Type": "application/json"})
        reply = connection.getresponse()
        assert reply.status == 200 and len(json.loads(reply.read())["hits"]) == 3  # answers while it fills
        _until(lambda: _vectors_saved(folder)[1] > 0, "no batch of vectors was saved")
    finally:
        stop_service(process)
    assert process.returncode == 0, (tmp_path / "slow.log").read_text()
    chunks, vectors = _vectors_saved(folder)
    assert vectors % SERVED_FILL_BATCH == 0 and 0 < vectors < chunks == 200  # stopped at a saved batch
    process, _ = start_service(folder, tmp_path, "quick")
    try:
        _until(lambda: _vectors_saved(folder)[1] == 200, "the fill did not finish")
    finally:
        stop_service(process)
    assert process.returncode == 0
    loaded = KnowledgeBase.load(folder)
    assert loaded.pending_vectors == 0 and loaded._vectors.size == 200


@pytest.mark.twoprocess
def test_index_background_returns_searchable_and_leaves_a_fill_behind(tmp_path, capsys):
    from helpers import EXAMPLE_DATA

    folder = tmp_path / "kb"
    code, out, err = run(capsys, "index", str(EXAMPLE_DATA), "--kb", str(folder), "--embedder", "hashing",
                         "--background")
    assert code == 0 and "searchable now" in err and f"its log: {folder / 'fill.log'}" in err
    code, out, _ = run(capsys, "search", "认证失败", "--kb", str(folder), "--json")
    assert code == 0 and '"doc_id"' in out
    _until(lambda: "filled 30 vectors" in (folder / "fill.log").read_text(), "the fill behind did not end")
    assert KnowledgeBase.load(folder).pending_vectors == 0
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA), "--kb", "postgresql://127.0.0.1:1/none", "--background")
    assert code == 1 and "drop --background" in err
