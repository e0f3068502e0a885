import json
import xml.etree.ElementTree as ET

import pytest

from agentic_rag import Config, OfflineModel, run_bench
from agentic_rag.cli import main
from agentic_rag.eval import Question, run_rgb
from agentic_rag.eval._report import RATES, summarize
from agentic_rag.eval._rgb import passages_for
from helpers import SHARED_DATA

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="needs ../shared/data beside the project")


def record(id, answer, ranking, citations, abstained=False, **extra):
    return dict({"mode": "agentic", "id": id, "kind": "k", "answer": answer, "abstained": abstained,
                 "stop_reason": "sufficient", "rounds": 1, "ranking": ranking, "evidence": ranking[:8],
                 "pool_size": len(ranking), "citations": citations, "ms": 10.0, "faithfulness": 1.0,
                 "usage": {"model_calls": 2, "prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.0}}, **extra)


def test_summarize_by_hand():
    questions = [Question("a", "q", [["Paris"]], ["d1", "d2"], True, "k"),
                 Question("b", "q", [["Rome"]], ["d3"], True, "k"),
                 Question("c", "q", [], [], False, "k")]
    records = [record("a", "It is Paris. [1]", ["d1", "x", "d2"], ["d1", "x"]),
               record("b", "No idea", ["y", "d3"], ["y"], abstained=True),
               record("c", "Refused", [], [], abstained=True)]
    m = summarize(records, questions)
    assert m["r@3"] == pytest.approx((1 + 1) / 2) and m["p@3"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert m["mrr@10"] == pytest.approx((1 + 0.5) / 2)
    assert m["answer_accuracy"] == 0.5 and m["false_abstain_rate"] == 0.5
    assert m["abstain_recall"] == 1.0 and m["abstain_precision"] == 0.5
    assert m["citation_precision"] == pytest.approx((0.5 + 0) / 2)
    assert m["answer_chars"] == len("It is Paris.") and m["stop_reasons"] == {"sufficient": 3}
    assert set(m["by_kind"]) == {"k"} and all(f"{r}_ci" in m for r in RATES)


@needs_data
def test_smoke_benchmark_writes_every_metric_and_resumes(tmp_path):
    out = tmp_path / "out"
    metrics = run_bench(SHARED_DATA / "squad2", ["linear", "agentic"], out, OfflineModel(), Config(), limit=6)
    for mode in ("linear", "agentic"):
        assert set(RATES) | {"n", "answer_chars", "evidence_pool_size", "rounds", "model_calls", "prompt_tokens",
                             "completion_tokens", "cost_usd", "latency_ms_p50", "latency_ms_p95", "by_kind",
                             "stop_reasons"} <= set(metrics[mode])
        assert metrics[mode]["n"] == 6
    assert metrics["linear"]["model_calls"] == 1.0 and metrics["linear"]["stop_reasons"] == {"linear": 6}
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(metrics))
    assert "| answer_accuracy |" in (out / "report.md").read_text()
    assert ET.fromstring((out / "report.svg").read_text()).tag.endswith("svg")
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 12
    run_bench(SHARED_DATA / "squad2", ["linear", "agentic"], out, OfflineModel(), Config(), limit=6)
    assert (out / "results.jsonl").read_text().splitlines() == lines        # resumed: nothing ran twice
    assert any((out / "kb-cache").iterdir())                                 # the knowledge base was cached


@needs_data
def test_bench_command_line(tmp_path, capsys):
    assert main(["bench", "--data", str(SHARED_DATA / "hotpotqa"), "--mode", "agentic", "--limit", "3",
                 "--out", str(tmp_path)]) == 0
    assert "| agentic |" in capsys.readouterr().out
    assert main(["bench", "--data", str(tmp_path), "--out", str(tmp_path / "x")]) == 1


def test_rgb_passages_follow_the_noise_rate():
    item = {"id": 7, "positive": ["p1", "p2", "p3"], "negative": ["n1", "n2", "n3", "n4", "n5"]}
    assert sum(p.startswith("n") for p in passages_for(item, 0.4, 5)) == 2
    assert all(p.startswith("n") for p in passages_for(item, 1.0, 5))
    assert passages_for(item, 0.4, 5) == passages_for(item, 0.4, 5)


@needs_data
def test_rgb_protocol_smoke(tmp_path):
    report = run_rgb(SHARED_DATA / "rgb" / "zh_refine.dev.jsonl", 0.4, 5, OfflineModel(), limit=4, out=tmp_path)
    assert report["n"] == 4 and 0 <= report["agentic_accuracy"] <= 1 and 0 <= report["rejection_rate"] <= 1
    assert json.loads((tmp_path / "rgb.json").read_text())["noise_rate"] == 0.4


@needs_data
def test_the_large_file_benchmark_reports_time_memory_and_size(tmp_path):
    from agentic_rag.eval import big_file

    assert big_file.main(["--data", str(SHARED_DATA), "--mb", "0.3", "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert 250_000 < report["text_bytes"] <= 300_000 and report["peak_mb"] > 0
    assert 0.5 < report["kb_over_text"] < 5 and "chunks.jsonl" in report["files"]
