"""Gzipped documents (read by the suffix before .gz, decompressed only up to the file-size limit), a
file reached twice inside a folder (a link, a hard link, a copy) indexed once, and many images with
no description reported in one line. Real files throughout, and the real command line."""
import gzip
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from agentic_rag import Config, KnowledgeBase
from agentic_rag.kb.ingestion._documents import load_documents, read_file
from agentic_rag.kb.ingestion._loaders import Unreadable
from helpers import EXAMPLE_DATA, run

DOCS = Path(__file__).parent / "fixtures" / "docs"


def _gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


def _loaded(paths, **kwargs):
    lines: list[tuple[str, str]] = []
    result = load_documents(paths, on_skip=lambda where, reason: lines.append((where, reason)), **kwargs)
    return result, lines


def test_gzipped_pdf_text_html_markdown_and_jsonl_are_read_by_the_suffix_before_gz(tmp_path):
    _gz(tmp_path / "spec.pdf.gz", (EXAMPLE_DATA / "manual" / "nimbus-quick-reference.pdf").read_bytes())
    _gz(tmp_path / "notes.txt.gz", b"The gateway restarts every night at two.")
    _gz(tmp_path / "page.html.gz", b"<html><head><title>Page</title></head><body><p>Port 8443.</p></body></html>")
    _gz(tmp_path / "x.md.gz", b"# Setup\n\nInstall the agent first.")
    _gz(tmp_path / "rows.jsonl.gz", b'{"id": "r1", "text": "row one"}\n{"id": "r2", "text": "row two"}\n')
    _gz(tmp_path / "quick.docx.gz", (DOCS / "nimbus-quick-reference.docx").read_bytes())
    _gz(tmp_path / "tool.exe.gz", b"MZ")  # not a type read: passed over in a folder, as tool.exe would be
    result, lines = _loaded(tmp_path)
    assert lines == []
    by_id = {d.id: d for d in result.documents}
    assert set(by_id) == {"spec.pdf.gz", "notes.txt.gz", "page.html.gz", "x.md.gz", "r1", "r2", "quick.docx.gz"}
    pdf = by_id["spec.pdf.gz"]
    assert pdf.source == str(tmp_path / "spec.pdf.gz") and "Nimbus Notes" in pdf.text
    assert [meta["page"] for _, meta in pdf.parts][:2] == [1, 2]
    assert by_id["notes.txt.gz"].title == "notes" and "two" in by_id["notes.txt.gz"].text
    assert by_id["page.html.gz"].title == "Page" and "8443" in by_id["page.html.gz"].text
    assert by_id["x.md.gz"].title == "Setup"
    assert by_id["r2"].source == f"{tmp_path / 'rows.jsonl.gz'}:2"
    assert by_id["quick.docx.gz"].text


def test_a_gz_of_a_type_not_read_named_directly_gets_its_reason(tmp_path):
    result, lines = _loaded(_gz(tmp_path / "tool.exe.gz", b"MZ"))
    assert result.documents == [] and len(lines) == 1
    assert "compressed file of an unsupported type (.exe)" in lines[0][1] and ".pdf.gz" in lines[0][1]


def test_a_gzip_bomb_is_refused_past_the_limit_without_decompressing_it_all(tmp_path):
    bomb = tmp_path / "bomb.txt.gz"
    member = gzip.compress(bytes(1_000_000), compresslevel=9)  # a MB of zeros in about a kB
    with bomb.open("wb") as out:  # 200 MB of zeros as 200 gzip members, as `cat a.gz b.gz` makes
        for _ in range(200):
            out.write(member)
    assert bomb.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        result, lines = _loaded(tmp_path, max_file_bytes=2_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.documents == []
    assert lines == [(str(bomb), "decompresses to more than 2,000,000 bytes, past the file-size limit of 2,000,000 "
                                 "bytes: raise it with --max-file-size BYTES (max_file_bytes=) or split the file")]
    assert peak < 20_000_000  # the limit and the compressed file, not the 200 MB
    with pytest.raises(Unreadable, match="decompresses to more than 2,000,000 bytes"):
        read_file("bomb.txt.gz", bomb.read_bytes(), "bomb", max_bytes=2_000_000)


def test_a_truncated_or_damaged_gz_is_refused_in_one_line(tmp_path):
    whole = gzip.compress(os.urandom(50_000))
    (tmp_path / "cut.txt.gz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "plain.md.gz").write_bytes(b"# not gzip at all\n")
    result, lines = _loaded(tmp_path)
    reasons = dict(lines)
    assert result.documents == [] and len(lines) == 2
    assert reasons[str(tmp_path / "cut.txt.gz")].startswith("a truncated .gz file")
    assert reasons[str(tmp_path / "plain.md.gz")].startswith("a damaged .gz file")
    assert all("\n" not in reason for reason in reasons.values())


def test_read_file_reads_an_uploaded_gz_by_its_inner_type_within_the_same_bound():
    data = gzip.compress((DOCS / "shared-mime-info-spec.html").read_bytes())
    doc = read_file("spec.html.gz", data, "up")
    assert doc.id == "up" and doc.source == "spec.html.gz" and "MIME" in doc.text
    limit = len(data) + 1_000  # the compressed file is within it, what it holds is not
    with pytest.raises(Unreadable, match=f"decompresses to more than {limit:,} bytes"):
        read_file("spec.html.gz", data, "up", max_bytes=limit)


def test_a_symlink_a_hard_link_and_a_copy_are_indexed_once(tmp_path):
    text = " ".join(f"Debian archive mirror {n} keeps package set {n * 7} signed." for n in range(30))
    real = tmp_path / "basic-defs.en.html"
    real.write_text(f"<html><body><p>{text}</p></body></html>")
    (tmp_path / "basic-defs.html").symlink_to("basic-defs.en.html")  # sorted first, yet the real file is kept
    os.link(real, tmp_path / "hard.html")
    shutil.copy(real, tmp_path / "z-copy.html")
    (tmp_path / "other.txt").write_text("Something else entirely.")
    result, lines = _loaded(tmp_path)
    assert sorted(d.id for d in result.documents) == ["basic-defs.en.html", "other.txt"]
    assert sorted(lines) == [
        (str(tmp_path / "basic-defs.html"), f"the same file as {real}"),
        (str(tmp_path / "hard.html"), f"the same file as {real}"),
        (str(tmp_path / "z-copy.html"), f"the same content as {real}")]
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=20))
    kb.add_documents(result.documents)
    hits = kb.search("Debian archive package signed", k=5)
    assert len(hits) == 5 and {h.doc_id for h in hits} == {"basic-defs.en.html"}
    assert len({h.text for h in hits}) == len(hits)  # never the same chunk twice


def test_a_gz_of_a_file_already_read_is_the_same_content(tmp_path):
    (tmp_path / "notes.txt").write_text("Backups run hourly.")
    _gz(tmp_path / "notes.txt.gz", b"Backups run hourly.")
    result, lines = _loaded(tmp_path)
    assert [d.id for d in result.documents] == ["notes.txt"]
    assert lines == [(str(tmp_path / "notes.txt.gz"), f"the same content as {tmp_path / 'notes.txt'}")]


def test_a_link_leading_outside_the_folder_is_still_refused(tmp_path):
    outside, folder = tmp_path / "secret.txt", tmp_path / "docs"
    outside.write_text("private")
    folder.mkdir()
    (folder / "a.txt").symlink_to(outside)
    result, lines = _loaded(folder)
    assert result.documents == [] and len(lines) == 1 and "outside the folder being indexed" in lines[0][1]


def _png(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(16))


def test_many_images_without_a_description_are_one_line_through_the_cli(capsys, tmp_path):
    docs = tmp_path / "docs"
    (docs / "icons").mkdir(parents=True)
    for n in range(32):
        _png(docs / "icons" / f"i{n:02d}.png")
    (docs / "guide.md").write_text("# Guide\n\nPress the red button.")
    code, out, err = run(capsys, "index", str(docs), "--kb", str(tmp_path / "kb"), "--embedder", "hashing")
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert code == 0 and "skipped 32 files" in out
    icons = docs / "icons"
    assert warnings == [
        f"warning: skipped 32 images without a description: {icons / 'i00.png'}, {icons / 'i01.png'}, "
        f"{icons / 'i02.png'}, {icons / 'i03.png'}, {icons / 'i04.png'} and 27 more (write a description beside "
        f"each, as photo.png.md, or describe images with a vision model, --vision-model NAME)"]


def test_each_image_skipped_stays_listed_and_one_alone_keeps_its_own_line(tmp_path):
    for name in ("a.png", "b.png", "c.png"):
        _png(tmp_path / name)
    result, lines = _loaded(tmp_path)
    assert [where for where, _ in result.skipped] == [str(tmp_path / n) for n in ("a.png", "b.png", "c.png")]
    assert all("an image with no description" in reason for _, reason in result.skipped)
    assert len(lines) == 1 and lines[0][0] == "3 images without a description"
    alone = tmp_path / "alone"
    alone.mkdir()
    _png(alone / "d.png")
    _, lines = _loaded(alone)
    assert lines == [(str(alone / "d.png"), "an image with no description: write one beside it (d.png.md) or "
                                            "describe images with a vision model (--vision-model NAME)")]
