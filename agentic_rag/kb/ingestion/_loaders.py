"""Readers that turn a file's bytes into text with its structure: PDF pages (pypdfium2, in _pdf), Word headings
and tables (python-docx), and the images a Markdown document shows with their alt text and caption
(HTML is read in _html). Each reader returns a title and its pieces, (text, metadata) in reading
order: a page ({"page": 3}) or a section ({"section": "Login"}); chunks never cross a piece. pypdfium2
and python-docx come with the `docs` extra."""
from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from ._unreadable import Unreadable, printable, too_large

log = logging.getLogger("agentic_rag")
DOCS_EXTRA = "pip install 'agentic-rag[docs]'"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")
# no bracket in alt text, no < or ( in a link: each scan stops where the next image could start, so
# the search is linear in the text (the open forms took minutes on 250 KB of "![a](")
_MD_IMAGE = re.compile(r'!\[([^\[\]]*)\]\(\s*(?:<([^<>\n]+)>|([^()<\s]+))(?:\s+"([^"]*)")?\s*\)'
                       r'(?:[ \t]*\n[ \t]*([*_])(.+?)\5[ \t]*$)?', re.M)


ENCRYPTED = "encrypted PDF: decrypt it first (e.g. qpdf --decrypt --password=... in.pdf out.pdf)"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"  # WordprocessingML's namespace


Pieces = list[tuple[str, dict]]


def read_pdf(data: bytes, name: str = "") -> tuple[str, Pieces]:
    """One piece a page with text, {"page": n} (physical, 1-based) and, when the PDF has printed page
    labels, {"page_label": "21"} beside it (citations show the label). A page with no text layer is
    OCR'd (_ocr: tesseract, bounded) and marked {"ocr": True}. Encrypted PDFs (unless the user
    password is empty) and scanned ones that cannot be OCR'd are refused, never indexed as empty
    documents. The reader's warnings (a page whose text looks unspaced) are logged as one line each
    naming `name` and the page."""
    try:
        from ._pdf import Encrypted, extract
        found = extract(data)
    except ImportError:
        raise Unreadable(f"reading PDF needs the docs extra: {DOCS_EXTRA}") from None
    except Encrypted:
        raise Unreadable(ENCRYPTED) from None
    except Exception as exc:  # PDFium's error on a damaged file
        raise Unreadable(f"not a readable PDF ({printable(exc)})") from None
    for warning in found.warnings:
        log.warning("%s: pdf reader warning: %s", name or "PDF", warning)
    pages = found.pages  # None: a damaged page; "": no text layer (a scan)
    if pages and all(text is None for text in pages):
        raise Unreadable("not a readable PDF: no page's text could be read")
    from ._ocr import ocr_missing  # pages with no text layer are OCR'd (when tesseract is installed)
    pages, ocrd = ocr_missing(data, pages)
    pieces = [(text, {**_where(n, found.labels), "ocr": True} if n - 1 in ocrd else _where(n, found.labels))
              for n, text in enumerate(pages, 1) if text and text.strip()]
    if not pieces:
        raise Unreadable(f"scanned PDF: none of its {len(pages)} pages has a text layer and OCR read no text "
                         f"on them")
    return found.title, pieces


def _where(n: int, labels: list[str]) -> dict:
    """A page's metadata: its physical number, and its printed label whenever the PDF has labels (even
    where the two agree, so every page of a labelled PDF is cited the same way)."""
    label = labels[n - 1] if n <= len(labels) else ""
    return {"page": n, "page_label": label} if label else {"page": n}


def read_docx(data: bytes, max_unpacked: int | None = None) -> tuple[str, Pieces]:
    """Paragraphs and tables in order; each heading starts a section; each table row becomes one
    line, its cells joined by ' | ' (a merged cell once, in its first row). A file whose parts
    unpack to more than `max_unpacked` bytes is refused before any is unpacked."""
    try:
        import docx
    except ImportError:
        raise Unreadable(f"reading Word files needs the docs extra: {DOCS_EXTRA}") from None
    try:
        _unpacked_within(data, max_unpacked)
        document = docx.Document(io.BytesIO(data))
        names = {style.style_id: style.name for style in document.styles}  # paragraph.style scans them all
        sections = Sections()
        for block in _blocks(document):
            if isinstance(block, docx.table.Table):
                for row in _table_rows(block._tbl):
                    sections.add(row)
                continue
            style = names.get(block._p.style, "") or ""
            if style == "Title" or style.startswith("Heading"):
                sections.heading(block.text.strip(), title=style == "Title")
            else:
                sections.add(block.text)
        title = (document.core_properties.title or "").strip()
    except Unreadable:
        raise
    except Exception as exc:  # not a zip, not a Word document, a damaged part
        raise Unreadable(f"not a readable Word .docx file ({printable(exc)})") from None
    return title or sections.title, sections.pieces()


def unpacked_size(data: bytes) -> int:
    """What a zip (a .docx) declares its parts unpack to, read from its directory alone."""
    return sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist())


def _unpacked_within(data: bytes, max_unpacked: int | None) -> None:
    """Refuse a zip whose parts declare more than `max_unpacked` bytes in all (a zip bomb): zipfile
    never unpacks a part past its declared size (it stops there, and the checksum then fails)."""
    if max_unpacked is not None:
        unpacked = unpacked_size(data)
        if unpacked > max_unpacked:
            raise Unreadable(too_large(unpacked, max_unpacked, "a .docx that unpacks to "))


def _blocks(document: Any) -> Iterator[Any]:
    """The body's tables and its paragraphs that hold text, one at a time: iter_inner_content lists
    them all first, and a paragraph's .text is an XPath query (3 million empty ones took 94 s)."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    body = document._body
    for element in body._element.iterchildren(_W + "p", _W + "tbl"):
        if element.tag == _W + "tbl":
            yield Table(element, body)
        elif _has_text(element):
            yield Paragraph(element, body)


_REPEATED_CHARS = 200  # of a cell merged down, in each row after its first: the text stays linear in the file


def _table_rows(tbl: Any) -> Iterator[str]:
    """Each row's cells joined by ' | ': a cell spanning columns once, and a cell merged down in
    every row it covers (a row's key column stays in it; after the first row, its first 200
    characters), its text kept by grid column as the rows go, never looked up by walking back up."""
    started: dict[int, str] = {}  # grid column -> the text of the cell a merge down starts with there
    for tr in tbl.tr_lst:
        column, cells = getattr(tr, "grid_before", 0), []
        for tc in tr.tc_lst:
            if tc.vMerge == "continue":
                cells.append(started.get(column, ""))
            else:
                cells.append(_cell_text(tc))
                if tc.vMerge == "restart":  # repeated cut short: a key, not a cell's whole text in every row
                    started[column] = cells[-1][:_REPEATED_CHARS]
            column += tc.grid_span
        yield " | ".join(cells)


def _cell_text(tc: Any) -> str:
    """A table cell's text, read from its own element: python-docx's row.cells lists a cell once per
    column it spans (a span of 20 million: 245 MB) and finds a cell merged down by walking up the
    rows (9,000 merged rows: 192 s)."""
    from docx.text.paragraph import Paragraph

    return "\n".join(Paragraph(p, None).text  # type: ignore[arg-type]  # no parent part: only its text is read
                     for p in tc.iterchildren(_W + "p") if _has_text(p)).strip()


def _has_text(paragraph: Any) -> bool:
    """Whether a paragraph holds any text, found by lxml's own walk (text in w:t, or a hyphen)."""
    hyphen = _W + "noBreakHyphen"
    return any(e.tag == hyphen or (e.text or "").strip() for e in paragraph.iter(_W + "t", hyphen))


class Sections:
    """Text gathered under the heading it follows."""

    def __init__(self) -> None:
        self.title = ""
        self._current: tuple[str, list[str]] = ("", [])
        self._done: list[tuple[str, list[str]]] = []

    def heading(self, text: str, title: bool = False) -> None:
        if not text:
            return
        self.title = text if title else (self.title or text)  # a Title paragraph, else the first heading
        self._done.append(self._current)
        self._current = (text, [text])

    def add(self, text: str) -> None:
        if text.strip():
            self._current[1].append(text.strip())

    def pieces(self) -> Pieces:
        return [("\n\n".join(lines), {"section": name} if name else {})
                for name, lines in [*self._done, self._current] if any(line.strip() for line in lines)]


def markdown_images(text: str) -> list[tuple[str, str]]:
    """(src, alt text, title and the caption line under it) of each image a Markdown text shows."""
    return [(bracketed or bare, ". ".join(part for part in (alt.strip(), title.strip(), caption.strip()) if part))
            for alt, bracketed, bare, title, _, caption in _MD_IMAGE.findall(text)]
