"""PDF, Word, HTML and images, read from real files made by real tools (tests/fixtures/docs/README.md):
pages and sections kept into the citations, scanned and encrypted PDFs refused, images indexed by
their description (a sidecar, alt text, or a vision model over HTTP, cached), text that is not UTF-8."""
import json
import shutil
import subprocess
import sys

import pytest

from agentic_rag import Config, ImageDescriber, KnowledgeBase, OfflineModel, load_documents, run_agentic_rag
from agentic_rag.cli import main
from agentic_rag.core._errors import ConfigurationError
from agentic_rag.eval.hostile_files import CASES, _cell, empty_paragraphs, figure_captions, sparse, write_docx, zip_bomb
from agentic_rag.kb.ingestion._chunking import document_chunks
from agentic_rag.kb.ingestion._documents import Document, from_pieces, read_file
from agentic_rag.kb.ingestion._loaders import Unreadable
from agentic_rag.models import Endpoint
from helpers import EXAMPLE_DATA, ROOT
from openai_server import FakeOpenAI

FIXTURES = ROOT / "tests" / "fixtures" / "docs"
ATTRIBUTE = "Which extended attribute can hold a file's MIME type?"


def _ask(kb: KnowledgeBase, question: str) -> dict:
    return run_agentic_rag(question, kb, OfflineModel(), config=Config(max_rounds=2))


def test_a_pdf_keeps_its_pages_and_the_answer_cites_the_page_it_is_on():
    spec = read_file("spec.pdf", (FIXTURES / "shared-mime-info-spec.pdf").read_bytes(), "spec.pdf")
    pages = [meta["page"] for _, meta in spec.parts]
    assert pages == list(range(1, 18)) and spec.title == "spec"        # pdfTeX left /Title empty
    kb = KnowledgeBase()
    kb.add_documents([spec])
    for hit in kb.search("extended attribute MIME type", k=10):          # a chunk never crosses a page
        start = spec.parts[hit.metadata["page"] - 1][0]
        end = spec.parts[hit.metadata["page"]][0] if hit.metadata["page"] < 17 else len(spec.text)
        assert hit.text in spec.text[start:end]
    state = _ask(kb, ATTRIBUTE)
    assert "user.mime_type" in state["answer"] and not state["abstained"]
    assert 14 in [c.get("page") for c in state["citations"]]             # section 2.10 is on page 14


def test_html_drops_navigation_and_cites_the_section():
    page = read_file("spec.html", (FIXTURES / "shared-mime-info-spec.html").read_bytes(), "spec.html")
    assert page.title == "Unified system" and "Prev" not in page.text and "Next" not in page.text
    sections = [meta.get("section") for _, meta in page.parts]
    assert "2.10. Storing the MIME type using Extended Attributes" in sections and "2.4. The glob files" in sections
    kb = KnowledgeBase()
    kb.add_documents([page])
    state = _ask(kb, ATTRIBUTE)
    assert "user.mime_type" in state["answer"]
    assert state["citations"][0]["section"] == "2.10. Storing the MIME type using Extended Attributes"


def test_html_tables_images_scripts_and_charset():
    html = ("<html><head><meta charset='gb18030'><title>设备</title><style>p{}</style><script>var x=1</script>"
            "</head><body><nav>Home | About</nav><div class='navbar'>Menu</div><h1>库存</h1>"
            "<table><tr><th>型号</th><th>数量</th></tr><tr><td>DK-200</td><td>12</td></tr></table>"
            "<figure><img src='dock.png' alt='二号码头'><figcaption>冷库在二号码头旁边</figcaption></figure>"
            "<p hidden>secret</p></body></html>").encode("gb18030")
    page = read_file("stock.html", html, "stock.html")
    assert page.title == "设备" and "型号 | 数量" in page.text and "DK-200 | 12" in page.text
    assert not any(word in page.text for word in ("var x", "Home", "Menu", "secret", "p{}"))
    assert read_file("bad.html", b"<p>caf\xe9 ok</p>", "bad.html").text == "caf\ufffd ok"  # as a browser shows it


def test_a_word_file_written_by_libreoffice_keeps_headings_and_table_rows():
    card = read_file("card.docx", (FIXTURES / "nimbus-quick-reference.docx").read_bytes(), "card.docx")
    assert card.title == "Nimbus Notes quick reference"
    assert [m.get("section") for _, m in card.parts] == [
        "Nimbus Notes 2.3 quick reference", "Sync status icons", "Keyboard shortcuts", "Printing and PDF"]
    assert "Lock the client | Ctrl+L | Cmd+L" in card.text
    kb = KnowledgeBase()
    kb.add_documents([card])
    state = _ask(kb, "Which keys search all notebooks on macOS?")
    assert "Cmd+Shift+F" in state["answer"] and state["citations"][0]["section"] == "Keyboard shortcuts"


def test_scanned_and_encrypted_pdfs_are_reported_never_indexed_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(ROOT / "no-such-dir"))  # no tesseract: the scan cannot be OCR'd (tests/test_ocr.py)
    for name in ("scanned-page.pdf", "encrypted.pdf"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    told = {}
    loaded = load_documents(tmp_path, on_skip=told.__setitem__)
    assert loaded.documents == []
    assert told[str(tmp_path / "scanned-page.pdf")].startswith("scanned PDF: none of its 1 pages has a text layer; "
                                                                "to OCR it: apt-get install tesseract-ocr")
    assert told[str(tmp_path / "encrypted.pdf")].startswith("encrypted PDF: decrypt it first")
    assert told[str(tmp_path / "broken.pdf")].startswith("not a readable PDF")


def test_a_pdf_with_an_empty_user_password_opens_and_a_damaged_page_loses_only_itself():
    owner = read_file("o.pdf", (FIXTURES / "owner-password-only.pdf").read_bytes(), "o.pdf")
    assert [meta["page"] for _, meta in owner.parts] == [1, 2, 3] and "Ctrl+Shift+F" in owner.text
    damaged = read_file("d.pdf", (FIXTURES / "damaged-page.pdf").read_bytes(), "d.pdf")
    assert [meta["page"] for _, meta in damaged.parts] == [1, 3] and "Printing and PDF" in damaged.text


def test_without_the_docs_extra_pdf_and_word_files_are_skipped_naming_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdfium2", None)   # as if not installed: importing it raises ImportError
    monkeypatch.setitem(sys.modules, "docx", None)
    shutil.copy(FIXTURES / "shared-mime-info-spec.pdf", tmp_path / "a.pdf")
    shutil.copy(FIXTURES / "nimbus-quick-reference.docx", tmp_path / "b.docx")
    (tmp_path / "c.md").write_text("# C\ntext", encoding="utf-8")
    loaded = load_documents(tmp_path, on_skip=lambda *_: None)
    assert [d.id for d in loaded.documents] == ["c.md"]
    assert all("pip install 'agentic-rag[docs]'" in reason for _, reason in loaded.skipped)


def test_images_are_indexed_by_sidecar_or_alt_text_and_cited_as_images(tmp_path, capsys):
    png = (EXAMPLE_DATA / "manual" / "login-screen.png").read_bytes()
    for name in ("with-sidecar.png", "shown.png", "in-html.png", "bare.png"):
        (tmp_path / name).write_bytes(png)
    (tmp_path / "with-sidecar.png.md").write_text("The loading dock map: dock 4 handles express parcels.",
                                                  encoding="utf-8")
    guide = '# Guide\n\n![The sign-in window](shown.png "sign in")\n*Figure 1: SSO button*\n'
    (tmp_path / "guide.md").write_text(guide, encoding="utf-8")
    (tmp_path / "page.html").write_text("<figure><img src='in-html.png' alt='Cold store'><figcaption>next to dock 2"
                                        "</figcaption></figure><p>Warehouse page.</p>", encoding="utf-8")
    told = {}
    loaded = load_documents(tmp_path, on_skip=told.__setitem__)
    by_id = {d.id: d for d in loaded.documents}
    assert "with-sidecar.png.md" not in by_id                        # a sidecar is not a document of its own
    assert by_id["with-sidecar.png"].text.startswith("The loading dock map")
    assert by_id["shown.png"].text == "The sign-in window. sign in. Figure 1: SSO button"
    assert by_id["in-html.png"].text == "Cold store. next to dock 2"
    assert all(by_id[i].metadata["media"] == "image" for i in ("with-sidecar.png", "shown.png", "in-html.png"))
    assert "--vision-model" in told[str(tmp_path / "bare.png")]
    assert main(["index", "--embedder", "hashing", str(tmp_path), "--kb", str(tmp_path / "kb")]) == 0
    capsys.readouterr()
    assert main(["ask", "Which dock handles express parcels?", "--kb", str(tmp_path / "kb")]) == 0
    assert f"(image) with-sidecar.png ({tmp_path / 'with-sidecar.png'})" in capsys.readouterr().out


def test_a_vision_model_describes_images_once_and_the_description_is_cached(tmp_path):
    png = (EXAMPLE_DATA / "manual" / "login-screen.png").read_bytes()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.png").write_bytes(png)
    (tmp_path / "docs" / "same-picture.png").write_bytes(png)
    with FakeOpenAI() as server:
        server.chat.append("A sign-in window with Email and Password fields and a Sign in with SSO button.")
        describer = ImageDescriber("vision-model", Endpoint(base_url=server.url), tmp_path / "cache")
        loaded = load_documents(tmp_path / "docs", describe_image=describer)
        assert [d.text[:18] for d in loaded.documents] == ["A sign-in window w"] * 2
        sent = server.chat_requests()
        assert len(sent) == 1 and describer.calls == 1                  # the second file: same bytes, cached
        image = sent[0]["messages"][0]["content"][1]
        assert sent[0]["model"] == "vision-model" and image["image_url"]["url"].startswith("data:image/png;base64,")
        again = ImageDescriber("vision-model", Endpoint(base_url=server.url), tmp_path / "cache")
        assert load_documents(tmp_path / "docs", describe_image=again).documents[0].text.startswith("A sign-in")
        assert again.calls == 0 and len(server.chat_requests()) == 1   # from the cache, across runs
        server.chat.append({"status": 500, "body": {"error": {"message": "model down"}}})
        with pytest.raises(Exception, match="describing a.png with other-model failed"):
            load_documents(tmp_path / "docs", describe_image=ImageDescriber(
                "other-model", Endpoint(base_url=server.url, max_retries=0), tmp_path / "cache"))


def test_the_cli_says_files_are_not_utf8_and_reads_them_in_the_encoding_given(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    for i in range(2):
        (tmp_path / "docs" / f"n{i}.txt").write_bytes(f"第{i}号仓库的冷库温度是零下十八度。".encode("gb18030"))
    assert main(["index", "--embedder", "hashing", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb")]) == 1
    err = capsys.readouterr().err
    assert "could be read: 2 files skipped" in err and "not UTF-8 text" in err and "--encoding gb18030" in err
    assert "no documents found" not in err and "Traceback" not in err
    (tmp_path / "docs" / "utf8.md").write_text("# 说明\n统一编码的文件。", encoding="utf-8")  # stays UTF-8
    assert main(["index", "--embedder", "hashing",
                 str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--encoding", "gb18030"]) == 0
    assert "indexed 3 documents" in capsys.readouterr().out
    assert KnowledgeBase.load(tmp_path / "kb").search("统一编码", k=1)[0].text.endswith("统一编码的文件。")
    assert main(["index", "--embedder", "hashing",
                 str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--encoding", "klingon"]) == 1
    assert "unknown encoding 'klingon'" in capsys.readouterr().err
    (tmp_path / "docs" / "rows.jsonl").write_text('{"text": "x"}\n', encoding="utf-8")
    rows = str(tmp_path / "docs" / "rows.jsonl")
    assert main(["index", "--embedder", "hashing", rows, "--kb", str(tmp_path / "kb"), "--encoding", "nope"]) == 1
    assert "unknown encoding 'nope'" in capsys.readouterr().err


def test_the_example_knowledge_base_cites_a_pdf_page_and_an_image(tmp_path, capsys):
    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", str(tmp_path / "kb")]) == 0
    capsys.readouterr()
    assert main(["ask", "What is the keyboard shortcut to search all notebooks?", "--kb", str(tmp_path / "kb"),
                 "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert "Ctrl+Shift+F" in reply["answer"]
    assert reply["citations"][0]["source"].endswith("manual/nimbus-quick-reference.pdf")
    assert reply["citations"][0]["page"] == 2
    hits = KnowledgeBase.load(tmp_path / "kb").search("sign-in window screenshot SSO button", k=3)
    assert hits[0].doc_id == "manual/login-screen.png" and hits[0].metadata["media"] == "image"


def test_a_jsonl_line_that_is_not_utf8_is_one_skipped_line(tmp_path):
    rows = [json.dumps({"id": f"r{i}", "text": f"row {i} 文本"}, ensure_ascii=False).encode() for i in range(5)]
    rows[2] = json.dumps({"id": "r2", "text": "第二行"}, ensure_ascii=False).encode("gb18030")
    (tmp_path / "rows.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    told = {}
    loaded = load_documents(tmp_path, on_skip=told.__setitem__)
    assert [d.id for d in loaded.documents] == ["r0", "r1", "r3", "r4"] and loaded.skipped_lines == 1
    assert "not UTF-8 text" in told[f"{tmp_path / 'rows.jsonl'}:3"]
    assert [d.id for d in load_documents(tmp_path, encoding="gb18030").documents] == ["r0", "r1", "r2", "r3", "r4"]


def test_malformed_html_utf16_jsonl_and_a_vision_cache_that_cannot_be_written(tmp_path):
    with pytest.raises(Unreadable, match="not readable HTML"):
        read_file("x.html", b"<p>a</p><![foo[ x ]]><p>b</p>", "x.html")
    assert read_file("u.html", "<p>hi</p>".encode("utf-16"), "u.html").text == "hi"
    assert read_file("g.html", "<p>登录失败</p>".encode("gb18030"), "g.html", encoding="gb18030").text == "登录失败"
    (tmp_path / "a.jsonl").write_bytes('{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n'.encode("utf-16"))
    assert [d.id for d in load_documents(tmp_path / "a.jsonl").documents] == ["a", "b"]
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "s.png").write_bytes((EXAMPLE_DATA / "manual" / "login-screen.png").read_bytes())
    (tmp_path / "afile").write_text("not a folder")
    with FakeOpenAI() as server:
        server.chat.append("A sign-in window.")
        describer = ImageDescriber("m", Endpoint(base_url=server.url), tmp_path / "afile" / "cache")
        assert load_documents(tmp_path / "shots", describe_image=describer).documents[0].text == "A sign-in window."


def test_html_and_word_edge_cases_keep_their_text():
    for html, expected in [
            ('<header><img class="nav-icon" src="l.png"></header><h1>Bicycle Repair</h1><p>Fix it.</p>', "Fix it."),
            ('<form><input hidden name="csrf"></form><h2>Hours</h2><p>9 to 5</p>', "9 to 5"),
            ('<ul><li class="nav-item">Home<li class="nav-item">Blog</ul><p>The ferry leaves at 07:40.</p>',
             "The ferry leaves at 07:40."),
            ('<div class="naval-history">Ships of the line</div><div class="navbar">Menu</div>', "Ships of the line"),
            ('<ul><li class="nav-item"><a>Home</a> <span>Blog</span></li></ul><p>Body text</p>', "Body text"),
            ('<ul><li class="nav-item">Home<ul><li>Blog</li></ul></li></ul><p>Body text</p>', "Body text"),
            ("<table><tr><td><p>Oil change</p></td><td>45 EUR</td></tr><tr><td>Tyre<br>swap<td>20</table>",
             "Oil change | 45 EUR\n\nTyre swap | 20")]:
        text = read_file("page.html", html.encode(), "page.html").text
        assert expected in text and "Home" not in text and "Menu" not in text and "Blog" not in text, html
    assert read_file("m.md", b"![Solar](<img/solar panel.png>)", "m.md") is not None


def test_images_named_with_spaces_are_found_from_markdown_and_html(tmp_path):
    png = (EXAMPLE_DATA / "manual" / "login-screen.png").read_bytes()
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "solar panel.png").write_bytes(png)
    (tmp_path / "img" / "red kite.png").write_bytes(png)
    (tmp_path / "notes.md").write_text("# Notes\n\n![A solar panel on the shed](<img/solar panel.png>)\n",
                                       encoding="utf-8")
    (tmp_path / "birds.html").write_text('<p><img src="img/red%20kite.png" alt="A red kite over the field"></p>',
                                         encoding="utf-8")
    (tmp_path / "site").mkdir()
    (tmp_path / "img" / "owl.png").write_bytes(png)
    (tmp_path / "site" / "page.html").write_text('<p>Birds.</p><img src="/img/owl.png" alt="A barn owl">',
                                                 encoding="utf-8")  # from "/": the folder loaded
    by_id = {d.id: d.text for d in load_documents(tmp_path).documents}
    assert by_id["img/owl.png"] == "A barn owl"
    assert by_id["img/solar panel.png"] == "A solar panel on the shed"
    assert by_id["img/red kite.png"] == "A red kite over the field"


def test_chunks_never_cross_a_part_and_carry_its_metadata():
    doc = from_pieces("d", [("a" * 50 + ". " + "b" * 50, {"page": 1}), ("c" * 30, {"page": 2})],
                      metadata={"type": "manual"})
    chunks = list(document_chunks(doc, size=40, overlap=10))
    assert all(set(text) <= set("ab. ") for text, meta in chunks if meta["page"] == 1)
    assert [(t, m) for t, m in chunks if m["page"] == 2] == [("c" * 30, {"type": "manual", "page": 2})]
    plain = Document("p", "x " * 30)
    assert [m for _, m in document_chunks(plain, 20, 5)] == [{}] * len(list(document_chunks(plain, 20, 5)))
    with pytest.raises(Unreadable, match="empty file"):
        read_file("empty.md", b"  ", "empty.md")


def test_parts_out_of_order_are_refused_and_metadata_that_is_no_page_is_not_cited_as_one():
    from agentic_rag import ConfigurationError
    from agentic_rag.steps._search import hit_evidence

    with pytest.raises(ConfigurationError, match="parts must start at ascending offsets"):
        Document("d", "one two", parts=((4, {"page": 2}), (0, {"page": 1})))
    kb = KnowledgeBase()
    kb.add_documents([Document("intro", "The welcome text of the guide.", metadata={"page": "intro"})])
    assert "page" not in hit_evidence(kb.search("welcome guide", k=1)[0])


_CPU_S = 20  # CPU seconds a hostile file may cost its own process: linear reading needs under 3, the old 30 to 300


def _read_with_cpu_bound(folder) -> dict:
    """load_documents(folder) in a process that the kernel stops after _CPU_S seconds of CPU (work,
    not wall time: a busy machine does not make it fail)."""
    code = (f"import json, resource, sys; resource.setrlimit(resource.RLIMIT_CPU, ({_CPU_S}, {_CPU_S})); "
            "from agentic_rag.kb import load_documents; r = load_documents(sys.argv[1], on_skip=lambda *_: None); "
            "print(json.dumps([[d.text for d in r.documents], r.skipped]))")
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"reading stopped (exit {done.returncode}): {done.stderr[-300:]}"
    texts, skipped = json.loads(done.stdout)
    return {"texts": texts, "skipped": skipped}


@pytest.mark.parametrize("case, count, text", [
    ("nav-nested-divs", 100_000, "The dock opens at six."),     # the skip stack: 29.7 s before, quadratic in depth
    ("html-unclosed-tags", 200_000, "The dock."),               # the parser rescanned the page per '<': 19 s at half
    ("md-image-brackets", 50_000, "![a]("),                     # the image pattern backtracked: 262 s
    ("md-heading-hashes", 100_000, "text"),                     # the heading pattern backtracked: 18 s at half
    ("html-unclosed-comments", 70_000, "The dock opens at six."),  # a search for '-->' per '<!--': 12 s at 240 KB
    ("html-unclosed-cdata", 150_000, "The dock opens at six."),    # a search for ']]>' per '<![CDATA[': 2.5 s at 440 KB
    ("html-figure-captions", 8_000, "The dock opens at six."),     # every caption given to every image: 88 s at half
    ("html-title-pieces", 850_000, "The dock opens at six."),      # the title copied per piece: 20 s at 4 MB
    ("docx-wide-span", 2_000_000_000, "Dock | The dock opens at six."),  # a cell listed once per column spanned
    ("docx-merged-rows", 6_000, "Dock | The dock opens at six.")])       # merged cells found row by row: 192 s at 9,000
def test_hostile_files_are_read_in_linear_work(tmp_path, case, count, text):
    filename, _, build, _ = CASES[case]
    build(tmp_path / filename, count)
    read = _read_with_cpu_bound(tmp_path)
    assert read["skipped"] == [] and len(read["texts"]) == 1 and text in read["texts"][0]


def test_empty_paragraphs_in_a_word_file_cost_no_query_each(tmp_path, monkeypatch):
    from docx.text.paragraph import Paragraph

    empty_paragraphs(tmp_path / "empty.docx", 200_000)  # 2.5 KB on disk
    assert (tmp_path / "empty.docx").stat().st_size < 10_000
    asked = []
    text = Paragraph.text  # each use runs an XPath query over the paragraph: 3 million of them took 94 s
    monkeypatch.setattr(Paragraph, "text", property(lambda self: asked.append(1) or text.fget(self)))
    document = read_file("empty.docx", (tmp_path / "empty.docx").read_bytes(), "empty.docx")
    assert document.text == "The dock opens at six." and len(asked) == 1


def test_files_past_the_size_limit_are_skipped_unread_saying_the_limit(tmp_path, capsys):
    for name, head in (("big.txt", b""), ("big.html", b"<p>"), ("big.pdf", b"%PDF-1.4\n")):
        sparse(tmp_path / name, 2_000_000_000, head)  # no disk used; read whole, this was a MemoryError
    zip_bomb(tmp_path / "bomb.docx", 5_000_000)      # 50 KB that unpack to 5 MB
    (tmp_path / "edge.txt").write_bytes(b"x" * 1_000_000)
    result = load_documents(tmp_path, on_skip=lambda *_: None, max_file_bytes=1_000_000)
    assert [d.id for d in result.documents] == ["edge.txt"]    # at the limit is within it
    reasons = dict(result.skipped)
    for name in ("big.txt", "big.html", "big.pdf"):
        assert reasons[str(tmp_path / name)].startswith("2,000,000,000 bytes, past the file-size limit of "
                                                        "1,000,000 bytes: raise it with --max-file-size BYTES")
    assert reasons[str(tmp_path / "bomb.docx")].startswith("a .docx that unpacks to 5,000,")
    assert main(["index", "--embedder", "hashing",
                 str(tmp_path), "--kb", str(tmp_path / "kb"), "--max-file-size", "1000000"]) == 0
    err = capsys.readouterr().err
    assert err.count("past the file-size limit of 1,000,000 bytes") == 4
    with pytest.raises(ConfigurationError, match="max_file_bytes must be a whole number"):
        load_documents(tmp_path, max_file_bytes=0)
    with pytest.raises(SystemExit):
        main(["index", "--embedder", "hashing", str(tmp_path), "--kb", str(tmp_path / "kb"), "--max-file-size", "0"])
    assert "--max-file-size: 0 must be at least 1" in capsys.readouterr().err


def test_a_figure_gives_its_one_caption_to_its_images_and_captions_copied_are_bounded():
    from agentic_rag.kb.ingestion._html import read_html

    page = ("<figure><figcaption>Dock 2</figcaption><img src='a.png' alt='Cold store'><img src='b.png'></figure>"
            "<figure><img src='c.png'><figcaption>First</figcaption><figcaption>Second</figcaption></figure>"
            "<figure><img src='d.png' alt='Left open'><figcaption>Open to the end</figcaption>")
    assert read_html(page)[2] == [("a.png", "Cold store. Dock 2"), ("b.png", "Dock 2"), ("c.png", "First"),
                                  ("d.png", "Left open. Open to the end")]
    caption = "The dock opens at six. " * 50        # 1,150 characters, given to each of 2,000 images
    images = read_html(f"<figure>{'<img src=a.png alt=a>' * 2_000}<figcaption>{caption}</figcaption></figure>")[2]
    described = [alt for _, alt in images if alt != "a"]
    assert len(described) == 1_000_000 // len(caption.strip())  # a million characters of captions at most
    assert len(read_html(figure_captions(3))[2]) == 3


def test_word_table_cells_merged_across_are_read_once_and_down_in_each_row(tmp_path):
    first = _cell("Bay", '<w:vMerge w:val="restart"/>') + _cell("Opens", '<w:gridSpan w:val="2"/>') + _cell("Closes")
    later = _cell("", "<w:vMerge/>") + _cell("06:00") + _cell("07:00") + _cell("22:00")  # the bay merged down
    write_docx(tmp_path / "bays.docx", lambda write: write(f"<w:tbl><w:tr>{first}</w:tr><w:tr>{later}</w:tr></w:tbl>"))
    document = read_file("bays.docx", (tmp_path / "bays.docx").read_bytes(), "bays.docx")
    assert document.text == "Bay | Opens | Closes\n\nBay | 06:00 | 07:00 | 22:00"   # the row keeps its key column
