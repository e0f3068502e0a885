"""PDF text read right: the Debian FAQ's words come out spaced (pypdf ran whole lines together),
its printed page labels are kept and cited end to end through `agentic-rag index` and `ask`, and a
page whose text still looks unspaced is reported in one line naming the file and page."""
import json
import logging
import re

import pytest

from agentic_rag.cli import main
from agentic_rag.kb.ingestion._loaders import read_pdf
from helpers import ROOT, SHARED_DATA

FIXTURES = ROOT / "tests" / "fixtures" / "docs"
FAQ = SHARED_DATA / "realdocs" / "docs" / "pdf" / "debian-faq.en.pdf"  # evaluation data, never copied in
needs_faq = pytest.mark.skipif(not FAQ.is_file(), reason="needs ../shared/data beside the project")
UNSPACED = re.compile(r"[A-Za-z]{40,}")


@needs_faq
def test_the_faq_pages_come_out_spaced_with_their_printed_labels():
    _title, pieces = read_pdf(FAQ.read_bytes(), "debian-faq.en.pdf")
    text = "\n".join(t for t, _ in pieces)
    windows = [text[i:i + 1000] for i in range(0, len(text), 1000)]
    assert sum(bool(UNSPACED.search(w)) for w in windows) <= 0.01 * len(windows)  # pypdf: most windows
    where = {meta["page"]: meta for _, meta in pieces}
    texts = {meta["page"]: t for t, meta in pieces}
    assert where[29] == {"page": 29, "page_label": "21"} and "How many Debian distributions" in texts[29]
    assert where[1]["page_label"] == "i"


def test_a_pdf_without_labels_keeps_the_physical_page_and_no_label():
    _title, pieces = read_pdf(_pdf("One page of text.", "Two pages of text."))
    assert [meta for _, meta in pieces] == [{"page": 1}, {"page": 2}]


@needs_faq
@pytest.mark.slow  # indexes the whole FAQ (89 pages): about 4 s
def test_a_labelled_page_is_cited_by_its_label_through_index_and_ask(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.pdf").write_bytes(FAQ.read_bytes())
    assert main(["index", str(docs), "--kb", str(tmp_path / "kb"), "--embedder", "hashing"]) == 0
    capsys.readouterr()
    assert main(["ask", "How many Debian distributions are there?", "--kb", str(tmp_path / "kb"), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    cited = [c for c in reply["citations"] if c["page"] == 29]
    assert cited and cited[0]["page_label"] == "21"
    assert main(["ask", "How many Debian distributions are there?", "--kb", str(tmp_path / "kb")]) == 0
    assert "faq.pdf, p. 21" in capsys.readouterr().out


def _pdf(*page_texts: str) -> bytes:
    """A small real PDF (Helvetica text, one line a page) with a correct cross-reference table."""
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(page_texts)))
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {len(page_texts)} >>"]
    for i, text in enumerate(page_texts):
        stream = f"BT /F1 10 Tf 20 100 Td ({text}) Tj ET".encode()
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 200] /Contents {4 + 2 * i} 0 R "
                       "/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
    out, offsets = b"%PDF-1.4\n", []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


def test_a_page_still_unspaced_is_reported_naming_the_file_and_page(caplog):
    data = _pdf("Words with spaces read well.", "Thesewordsallruntogetherwithnospacebetweenthematall here")
    with caplog.at_level(logging.WARNING, logger="agentic_rag"):
        _title, pieces = read_pdf(data, "joined.pdf")
    assert [meta["page"] for _, meta in pieces] == [1, 2]  # indexed, and said
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("joined.pdf: pdf reader warning: page 2: text looks unspaced")
