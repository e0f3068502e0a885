import json

import pytest

from agentic_rag.eval import bm25_speed, retrieval
from helpers import SHARED_DATA


@pytest.mark.skipif(not (SHARED_DATA / "squad2").is_dir(), reason="needs ../shared/data beside the project")
def test_smoke_run_writes_reports(tmp_path, capsys):
    retrieval.main(["--data", str(SHARED_DATA), "--sets", "squad2", "--embedders", "hashing",
                    "--weights", "0.1", "--limit", "12", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text())
    modes = report["results"][0]["modes"]
    assert set(modes) == {"bm25", "vector", "hybrid w=0.1", "hybrid+rerank"}
    for metrics in modes.values():
        assert metrics["n"] == 12 and 0 <= metrics["r@5"] <= 1 and len(metrics["r@5_ci"]) == 2
    assert modes["bm25"]["r@5"] >= 0.5  # chance would be 5 of 83 passages, about 0.06
    assert "| squad2 | hashing |" in (tmp_path / "report.md").read_text()


def test_bm25_agrees_with_bm25s_on_a_synthetic_corpus():
    report = bm25_speed.run(chunks=2000, queries=100)
    assert report["top10_agreement"] >= 0.97  # only ties may order differently
    assert report["ours"]["index_s"] > 0 and report["bm25s"]["query_ms_p50"] > 0


def test_synthetic_corpus_repeats():
    assert bm25_speed.synthetic_corpus(50, 5) == bm25_speed.synthetic_corpus(50, 5)
