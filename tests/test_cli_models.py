"""The command line with real models: ask, index with OpenAI embeddings, doctor, against a local server."""
import json

import pytest

from agentic_rag.cli import main
from helpers import EXAMPLE_DATA, run
from openai_server import FakeOpenAI


@pytest.fixture
def server(monkeypatch):
    for name in ("AGENTIC_RAG_MODEL", "AGENTIC_RAG_BASE_URL", "OPENAI_BASE_URL", "AGENTIC_RAG_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with FakeOpenAI(dim=16) as fake:
        yield fake


def test_index_and_ask_with_openai_models(server, capsys, tmp_path):
    kb = str(tmp_path / "kb")
    code, out, err = run(capsys, "index", str(EXAMPLE_DATA / "contracts"), "--kb", kb, "--embedder", "openai",
                         "--embedding-model", "embed-model", "--base-url", server.url)
    assert code == 0, err
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["embedder"] == {"name": "openai:embed-model", "dimension": 16}
    server.chat.extend([json.dumps({"score": 0.9, "sufficient": True}),
                        json.dumps({"answer": "乙方逾期交货的，每逾期一周，按该批货款的 1% 支付违约金。 [1]"})])
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"model": "big-model", "per_task": {"grade": "small-model"},
                                  "prices": {"big-model": [2.0, 8.0], "small-model": [0.1, 0.4]}}))
    code, out, err = run(capsys, "ask", "合同B逾期交货的违约金怎么算？", "--kb", kb, "--base-url", server.url,
                         "--models-config", str(models), "--json")
    result = json.loads(out)
    assert code == 0, err
    # the fake's embeddings are random and a hosted embedder gets the semantic fusion default, which lets
    # vectors weigh as much as BM25: which contract leads is the fake's chance, that one is cited is not
    assert result["citations"][0]["doc_id"] in {"contract-a.md", "contract-b.md"}
    assert result["stop_reason"] == "sufficient"
    assert [r["model"] for r in server.chat_requests()] == ["small-model", "big-model"]
    assert result["usage"]["cost_usd"] == pytest.approx((11 * 0.1 + 7 * 0.4 + 11 * 2.0 + 7 * 8.0) / 1e6)
    code, out, _ = run(capsys, "search", "违约金", "--kb", kb, "--base-url", server.url, "--json")
    assert code == 0 and json.loads(out)[0]["doc_id"].startswith("contract")


def test_doctor_on_a_healthy_and_a_broken_setup(server, capsys, tmp_path):
    server.chat.extend([json.dumps({"answer": "ok"})])
    code, out, _ = run(capsys, "doctor", "--model", "small-model", "--embedding-model", "embed-model",
                       "--base-url", server.url)
    assert code == 0 and "all checks passed" in out and "16 dimensions" in out
    assert "chat model small-model answers with valid JSON" in out
    kb = tmp_path / "kb"
    assert main(["index", "--embedder", "hashing",
                 str(EXAMPLE_DATA / "policies"), "--kb", str(kb)]) == 0      # hashing, 2048 dimensions
    capsys.readouterr()
    server.chat.extend([{"status": 404, "body": {"error": {"message": "model not found"}}}])
    code, out, _ = run(capsys, "doctor", "--model", "missing-model", "--embedding-model", "embed-model",
                       "--base-url", server.url, "--kb", str(kb))
    assert code == 1 and "FAIL chat model missing-model" in out and "HTTP 404" in out
    assert "built with hashing (2048 dimensions), but the embedding model gives 16" in out
    code, out, _ = run(capsys, "doctor", "--model", "small-model", "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "FAIL endpoint does not answer" in out


def test_doctor_offline_has_nothing_to_call(server, capsys):
    code, out, _ = run(capsys, "doctor")
    assert code == 0 and "offline model: nothing to call" in out


def test_ask_stream_prints_the_draft_then_the_checked_answer(server, capsys, tmp_path):
    kb = str(tmp_path / "kb")
    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA / "warehouse"), "--kb", kb]) == 0
    capsys.readouterr()
    first = "截单时间：工作日 15:00（北京时间）之前确认付款的订单，当天发货； [1]"
    draft = f"{first} 周日也发货并免运费。 [1]"
    # a question its first search settles (no grade call), so that the answer streams as it is written
    server.chat.extend([draft,                                                              # generate, streamed
                        json.dumps({"score": 0.5, "unsupported": ["周日也发货并免运费。 [1]"]}),  # judge
                        json.dumps({"answer": first})])                                     # repair
    code, out, err = run(capsys, "ask", "工作日 15:00 之前确认付款的订单什么时候发货？", "--kb", kb, "--stream",
                         "--model", "small-model", "--base-url", server.url)
    assert code == 0, err
    assert out.index(draft) < out.index("--- checked answer") and "周日也发货" not in out.split("--- checked")[1]
    assert server.chat_requests()[0]["stream"] is True


def test_index_with_a_graph_model(server, capsys, tmp_path):
    kb = str(tmp_path / "kb")
    triple = {"subject": "合同B", "relation": "乙方", "object": "深圳星河包装材料有限公司"}
    server.chat.extend([json.dumps({"triples": [triple]}), json.dumps({"triples": []})])
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(EXAMPLE_DATA / "contracts"), "--kb", kb, "--graph-model", "small-model",
                       "--base-url", server.url)
    assert code == 0, err
    assert json.loads((tmp_path / "kb" / "manifest.json").read_text())["graph"] == "model:small-model"
    assert [r["body"]["model"] for r in server.requests if "body" in r] == ["small-model", "small-model"]
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", kb)
    assert code == 1 and "built its graph with model:small-model" in err


def test_bench_with_openai_embeddings_builds_once_then_reuses_the_cache(server, capsys, tmp_path):
    data = tmp_path / "set"
    data.mkdir()
    (data / "corpus.jsonl").write_text(json.dumps({"id": "c1", "title": "Contract B", "text": "Late delivery costs "
                                                   "1% per week, capped at 5%."}) + "\n")
    (data / "questions.jsonl").write_text(json.dumps({"id": "q1", "question": "What does late delivery cost?",
                                                      "answers": [["1%"]], "relevant_ids": ["c1"]}) + "\n")
    argv = ["bench", "--data", str(data), "--mode", "linear", "--embedder", "openai", "--embedding-model",
            "embed-model", "--base-url", server.url, "--cache", str(tmp_path / "cache")]
    for out in ("a", "b"):
        code, printed, err = run(capsys, *argv, "--out", str(tmp_path / out))
        assert code == 0 and "| linear |" in printed, err
    cached = [p.name for p in (tmp_path / "cache").iterdir()]
    assert len(cached) == 1 and cached[0].startswith("set-openai-embed-model-")
    manifest = json.loads((tmp_path / "cache" / cached[0] / "manifest.json").read_text())
    assert manifest["embedder"]["name"] == "openai:embed-model"


def test_embedding_options_from_the_models_file_are_recorded_and_reopened(server, capsys, tmp_path):
    kb, models = str(tmp_path / "kb"), tmp_path / "models.json"
    models.write_text(json.dumps({"embedding_model": "embed-model", "embedding_query_model": "small-model",
                                  "embedding_input_type": True, "base_url": server.url}))
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA / "contracts"), "--kb", kb, "--embedder", "openai",
                       "--models-config", str(models))
    assert code == 0, err
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["embedder"]["name"] == "openai:embed-model+input_type+query=small-model"
    server.requests.clear()
    code, _, err = run(capsys, "search", "违约金", "--kb", kb, "--base-url", server.url)
    assert code == 0, err
    bodies = [r["body"] for r in server.requests if r["path"].endswith("/embeddings")]
    assert (bodies[-1]["model"], bodies[-1]["input_type"], bodies[-1]["input"]) == ("small-model", "query", ["违约金"])
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA / "contracts"), "--kb", kb, "--embedder", "openai",
                       "--embedding-model", "embed-model", "--base-url", server.url)
    assert code == 1 and "openai:embed-model+input_type+query=small-model" in err


def test_embedding_input_type_in_the_models_file_must_be_a_boolean(server, capsys, tmp_path):
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"embedding_model": "embed-model", "embedding_input_type": "yes"}))
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(EXAMPLE_DATA / "contracts"), "--kb", str(tmp_path / "kb"),
                       "--embedder", "openai", "--models-config", str(models))
    assert code == 1 and "embedding_input_type" in err and "true or false" in err


def test_doctor_counts_one_model_in_the_singular(server, capsys):
    server.models = ["small-model"]
    server.chat.extend([json.dumps({"answer": "ok"})])
    code, out, _ = run(capsys, "doctor", "--model", "small-model", "--base-url", server.url)
    assert code == 0 and "endpoint answers; 1 model listed" in out, out
