"""The hostile-files benchmark at a small scale: every case built, read in a process of its own and
reported, the big ones skipped unread with the limit in the skip line."""
import json

from agentic_rag.eval import hostile_files


def test_the_hostile_files_benchmark_reports_each_case(tmp_path):
    out = tmp_path / "report"
    assert hostile_files.main(["--scale", "0.002", "--max-file-size", "1000000", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    rows = {row["case"]: row for row in report["cases"]}
    assert set(rows) == set(hostile_files.CASES) and report["max_file_bytes"] == 1_000_000
    for name in ("sparse-txt", "sparse-html", "sparse-pdf"):
        assert rows[name]["bytes"] == 4_000_000
        assert rows[name]["outcome"].startswith("skipped: 4,000,000 bytes, past the file-size limit of 1,000,000")
    assert rows["docx-zip-bomb"]["outcome"].startswith("skipped: a .docx that unpacks to 2,000,")
    assert rows["jsonl-deep-line"]["outcome"].startswith("skipped: bad line (RecursionError: ")
    for name in ("nav-nested-divs", "html-unclosed-tags", "html-unclosed-comments", "html-unclosed-cdata",
                 "html-figure-captions", "html-title-pieces", "md-image-brackets", "md-heading-hashes",
                 "docx-empty-paragraphs", "docx-wide-span", "docx-merged-rows"):
        assert rows[name]["outcome"].startswith("1 document"), rows[name]
        assert rows[name]["seconds"] >= 0 and rows[name]["peak_mb"] > 0
    assert "| docx-empty-paragraphs | 6,000 empty paragraphs |" in (out / "report.md").read_text()
