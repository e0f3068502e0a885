import json

import pytest

from agentic_rag.eval import retrieval, scale
from helpers import SHARED_DATA


@pytest.mark.skipif(not (SHARED_DATA / "squad2").is_dir(), reason="needs ../shared/data beside the project")
def test_smoke_run_writes_reports(tmp_path, capsys):
    argv = ["--data", str(SHARED_DATA), "--sets", "squad2", "--embedders", "hashing", "--weights", "0.1",
            "--fusions", "rrf,score", "--half", "1", "--limit", "12", "--cache", str(tmp_path / "cache")]
    retrieval.main(argv + ["--out", str(tmp_path / "first")])
    report = json.loads((tmp_path / "first" / "report.json").read_text())
    modes = report["results"][0]["modes"]
    assert set(modes) == {"bm25", "vector", "hybrid default (score w=0.02)", "rrf w=0.1", "score w=0.1",
                          "hybrid+rerank", "pagerank"}
    for metrics in modes.values():
        assert metrics["n"] == 12 and 0 <= metrics["r@5"] <= 1 and len(metrics["r@5_ci"]) == 2
    assert modes["bm25"]["r@5"] >= 0.5  # chance would be 5 of 83 passages, about 0.06
    assert "| squad2 | hashing |" in (tmp_path / "first" / "report.md").read_text()
    retrieval.main(argv + ["--out", str(tmp_path / "second")])  # the knowledge base now comes from the cache
    again = json.loads((tmp_path / "second" / "report.json").read_text())["results"][0]
    assert again["index_s"] is None and again["modes"]["score w=0.1"]["r@5"] == modes["score w=0.1"]["r@5"]
    assert "| squad2 | hashing | 104 | cached |" in (tmp_path / "second" / "report.md").read_text()


def test_bm25_agrees_with_bm25s_on_a_synthetic_corpus():
    report = scale.bm25_run(2000, 60)
    for mix in ("zipf", "mid"):  # only ties may order differently
        assert report[mix]["top10_agreement_ties_counted"] >= 0.99 and report[mix]["ours_ms"]["p50"] > 0
    assert report["build_s"]["ours"] > 0 and report["postings"] > 2000 * 20


def test_the_scale_report_measures_every_part_at_a_small_size(tmp_path):
    assert scale.texts(50) == scale.texts(50) and scale.queries("mid", 5) == scale.queries("mid", 5)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in "".join(scale.texts(20)))  # CJK characters too
    assert scale.main(["--sizes", "500", "--queries", "10", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())["sizes"]["500"]
    assert report["vectors"]["hashing"]["recall10"] == 1.0      # the sparse index is exact
    assert report["kb"]["chunks"] == 500 and report["kb"]["save"]["bytes_ratio"] < 0.2
    assert "| 500 |" in (tmp_path / "report.md").read_text()
