"""OCR of PDF pages with no text layer, on real scans (tests/fixtures/docs/README.md): a scanned
English page and a scanned Chinese page indexed and answered from with their page cited, a mixed PDF
keeping its text page, the limits and a missing tesseract each refused in one line naming the fix.
Tests that run tesseract skip without it (naming what to install), and fail instead when CI is set."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_rag.kb.ingestion._documents import read_file
from agentic_rag.kb.ingestion._loaders import Unreadable
from agentic_rag.kb.ingestion._ocr import OCR_APT, OcrLimits, clean, missing, ocr_missing
from agentic_rag.kb.ingestion._pdf import extract

FIXTURES = Path(__file__).parent / "fixtures" / "docs"
NO_TESSERACT = str(Path(sys.executable).parent)  # a PATH with the venv's commands and nothing else


def need_tesseract():
    """Skip when OCR is not installed, saying what to install; under CI (CI set) fail instead."""
    needs = missing()
    if needs:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"OCR needs {needs}")


def _cli(*argv, path=None):
    env = {**os.environ, "PATH": path} if path else None
    return subprocess.run([sys.executable, "-m", "agentic_rag.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.twoprocess
@pytest.mark.parametrize("name, question, words", [
    ("scanned-english.pdf", "What is the latest version of Debian?", "three versions of Debian"),
    ("scanned-chinese.pdf", "Debian 是一个什么样的组织？", "Debian 是一个志愿者组织")])
def test_a_scanned_page_is_indexed_and_answered_from_citing_its_page(tmp_path, name, question, words):
    need_tesseract()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / name).write_bytes((FIXTURES / name).read_bytes())
    done = _cli("index", str(tmp_path / "d"), "--kb", str(tmp_path / "kb"), "--embedder", "hashing")
    assert done.returncode == 0 and "skipped 0 files" in done.stdout, done.stderr
    done = _cli("ask", question, "--kb", str(tmp_path / "kb"), "--json")
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert not state["abstained"] and words in state["answer"], state["answer"]
    assert {(c["doc_id"], c["page"]) for c in state["citations"]} == {(name, 1)}  # chunks of its one page


@pytest.mark.slow
def test_ocr_pages_say_so_and_chinese_comes_without_spaces_between_characters():
    need_tesseract()
    chinese = read_file("c.pdf", (FIXTURES / "scanned-chinese.pdf").read_bytes(), "c.pdf")
    assert [meta for _, meta in chinese.parts] == [{"page": 1, "ocr": True}]
    assert "它建立一致的自由软件的预编译二进制包并从档案库中分发它们" in chinese.text  # a wrapped line joined
    screenshot = read_file("s.pdf", (FIXTURES / "scanned-page.pdf").read_bytes(), "s.pdf")  # a login screen
    assert [meta for _, meta in screenshot.parts] == [{"page": 1, "ocr": True}] and "Password" in screenshot.text


@pytest.mark.slow
def test_a_mixed_pdf_keeps_its_text_page_and_ocrs_the_scanned_one():
    need_tesseract()
    mixed = read_file("m.pdf", (FIXTURES / "mixed-text-and-scan.pdf").read_bytes(), "m.pdf")
    (_, one), (start, two) = mixed.parts
    assert one == {"page": 1} and "1.1 What is this FAQ?" in mixed.text[:start]  # the text layer, as it is
    assert two == {"page": 2, "ocr": True} and "Getting and installing Debian" in mixed.text[start:]


def _pages(name):
    data = (FIXTURES / name).read_bytes()
    return data, extract(data).pages


@pytest.mark.slow
def test_each_limit_refuses_the_file_in_one_line_naming_how_to_raise_it():
    need_tesseract()
    data, pages = _pages("mixed-text-and-scan.pdf")
    for limits, told in [(OcrLimits(max_pages=0), "scanned PDF: 1 pages need OCR, past the limit of 0 a file: "
                                                  "raise OcrLimits(max_pages=)"),
                         (OcrLimits(file_seconds=0), "scanned PDF: OCR took over the limit of 0 s a file (at page 2): "
                                                     "raise OcrLimits(file_seconds=)"),
                         (OcrLimits(page_seconds=0.05), "scanned PDF: OCR of page 2 took over 0.05 s (the limit is "
                                                        "0.05 s a page, 600 s a file): raise OcrLimits(page_seconds=")]:
        with pytest.raises(Unreadable) as refused:
            ocr_missing(data, pages, limits)
        assert str(refused.value).startswith(told) and "\n" not in str(refused.value), refused.value
    assert ocr_missing(data, pages, OcrLimits(max_pages=1))[1] == {1}  # the limit itself is allowed


@pytest.mark.twoprocess
def test_without_tesseract_a_scanned_pdf_is_refused_naming_what_to_install(tmp_path):
    (tmp_path / "d").mkdir()
    for name in ("scanned-english.pdf", "mixed-text-and-scan.pdf"):
        (tmp_path / "d" / name).write_bytes((FIXTURES / name).read_bytes())
    done = _cli("index", str(tmp_path / "d"), "--kb", str(tmp_path / "kb"), "--embedder", "hashing", path=NO_TESSERACT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    told = f"scanned-english.pdf: scanned PDF: none of its 1 pages has a text layer; to OCR it: {OCR_APT} "
    assert told in done.stderr and "indexed 1 document " in done.stdout, done.stderr  # the mixed PDF's text page


def test_spaces_tesseract_puts_between_chinese_characters_go_and_others_stay():
    assert clean("这 一 章 假定 最新 的 稳定版\f") == "这一章假定最新的稳定版"
    assert clean("代号 为 ： bullseye 。 有 68980 个") == "代号为： bullseye 。有 68980 个"
    assert clean("从\n档案库\n\n许多 远程\nDebian and APT") == "从档案库\n\n许多远程\nDebian and APT"
