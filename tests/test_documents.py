import json

import pytest

from agentic_rag import ConfigurationError, Document, load_documents


def test_loads_txt_md_jsonl_recursively_with_metadata(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("---\ntype: manual\ndate: 2026-01-02\n---\n# Title B\n\nBody.",
                                           encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"id": "x1", "text": "first", "title": "T", "metadata": {"k": "v"}}) + "\n"
        + json.dumps({"text": "second"}) + "\n", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("a,b", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "d.md").write_text("secret", encoding="utf-8")
    result = load_documents([tmp_path])
    by_id = {d.id: d for d in result.documents}
    assert set(by_id) == {"a.txt", "sub/b.md", "x1", "c.jsonl:2"}
    assert by_id["sub/b.md"].title == "Title B"
    assert by_id["sub/b.md"].metadata == {"type": "manual", "date": "2026-01-02"}
    assert by_id["sub/b.md"].text.startswith("# Title B")
    assert by_id["a.txt"].title == "a"
    assert by_id["x1"].metadata == {"k": "v"} and by_id["x1"].title == "T"
    assert by_id["x1"].source.endswith("c.jsonl:1")
    assert result.skipped == []


def test_bad_files_are_skipped_and_counted(tmp_path, caplog):
    (tmp_path / "good.txt").write_text("good", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.md").write_text("   ", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"text": "ok"}\nnot json\n{"title": "no text"}\n', encoding="utf-8")
    result = load_documents(tmp_path)
    assert [d.id for d in result.documents] == ["good.txt", "rows.jsonl:1"]
    reasons = dict(result.skipped)
    assert "not UTF-8" in reasons[str(tmp_path / "latin1.txt")]
    assert reasons[str(tmp_path / "empty.md")] == "empty file"
    assert str(tmp_path / "rows.jsonl") + ":2" in reasons and str(tmp_path / "rows.jsonl") + ":3" in reasons
    assert "skipped" in caplog.text


def test_single_file_and_unsupported_file(tmp_path):
    (tmp_path / "one.md").write_text("# One\ntext", encoding="utf-8")
    (tmp_path / "data.csv").write_text("a,b", encoding="utf-8")
    result = load_documents([tmp_path / "one.md", tmp_path / "data.csv"])
    assert [d.id for d in result.documents] == ["one.md"]
    assert "unsupported" in result.skipped[0][1]


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigurationError, match="path not found"):
        load_documents(tmp_path / "nope")


def test_content_hash_tracks_text_title_and_metadata():
    base = Document("d", "text", "title", "s", {"a": 1})
    assert base.content_hash() == Document("d", "text", "title", "other-source", {"a": 1}).content_hash()
    assert base.content_hash() != Document("d", "text!", "title", "s", {"a": 1}).content_hash()
    assert base.content_hash() != Document("d", "text", "title", "s", {"a": 2}).content_hash()


def test_each_skip_is_reported_once_and_jsonl_lines_are_counted_apart(tmp_path, caplog):
    (tmp_path / "empty.md").write_text(" ", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"text": "ok"}\nnot json\n[1]\n', encoding="utf-8")
    told = []
    result = load_documents(tmp_path, on_skip=lambda where, reason: told.append(where))
    assert told == [where for where, _ in result.skipped] and len(told) == 3
    assert result.skipped_lines == 2 and "skipped" not in caplog.text   # told to the caller, not logged as well
    assert load_documents(tmp_path).skipped_lines == 2 and caplog.text.count("skipped") == 3


def test_line_ends_are_made_newlines_as_text_mode_reading_did(tmp_path):
    (tmp_path / "crlf.txt").write_bytes(b"one\r\ntwo\rthree\n")
    assert load_documents(tmp_path).documents[0].text == "one\ntwo\nthree"
