import json

import pytest

from agentic_rag.eval import bm25_speed, retrieval
from helpers import SHARED_DATA


@pytest.mark.skipif(not (SHARED_DATA / "squad2").is_dir(), reason="needs ../shared/data beside the project")
def test_smoke_run_writes_reports(tmp_path, capsys):
    argv = ["--data", str(SHARED_DATA), "--sets", "squad2", "--embedders", "hashing", "--weights", "0.1",
            "--fusions", "rrf,score", "--half", "1", "--limit", "12", "--cache", str(tmp_path / "cache")]
    retrieval.main(argv + ["--out", str(tmp_path / "first")])
    report = json.loads((tmp_path / "first" / "report.json").read_text())
    modes = report["results"][0]["modes"]
    assert set(modes) == {"bm25", "vector", "hybrid default (score w=0.02)", "rrf w=0.1", "score w=0.1",
                          "hybrid+rerank"}
    for metrics in modes.values():
        assert metrics["n"] == 12 and 0 <= metrics["r@5"] <= 1 and len(metrics["r@5_ci"]) == 2
    assert modes["bm25"]["r@5"] >= 0.5  # chance would be 5 of 83 passages, about 0.06
    assert "| squad2 | hashing |" in (tmp_path / "first" / "report.md").read_text()
    retrieval.main(argv + ["--out", str(tmp_path / "second")])  # the knowledge base now comes from the cache
    again = json.loads((tmp_path / "second" / "report.json").read_text())["results"][0]
    assert again["index_s"] is None and again["modes"]["score w=0.1"]["r@5"] == modes["score w=0.1"]["r@5"]
    assert "| squad2 | hashing | 104 | cached |" in (tmp_path / "second" / "report.md").read_text()


def test_bm25_agrees_with_bm25s_on_a_synthetic_corpus():
    report = bm25_speed.run(chunks=2000, queries=100)
    assert report["top10_agreement"] >= 0.97  # only ties may order differently
    assert report["ours"]["index_s"] > 0 and report["bm25s"]["query_ms_p50"] > 0


def test_synthetic_corpus_repeats():
    assert bm25_speed.synthetic_corpus(50, 5) == bm25_speed.synthetic_corpus(50, 5)
