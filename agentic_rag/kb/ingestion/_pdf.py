"""PDF pages as text, through pypdfium2 (PDFium, Chrome's PDF engine; the `docs` extra). Chosen by
measurement (docs/benchmarks.md, "PDF text extraction"): pypdf ran the words of whole lines together
on real PDFs (the Debian FAQ), PDFium spaces them and reads the printed page labels (/PageLabels).

Each page's text is a str, "" when the page has no text layer (a scan: the OCR branch decides what
to do with it) or None when the page is too damaged to read. A page whose text still holds a run of
40+ Latin letters without a space (words run together) is reported in a warning naming the file and
page, never indexed silently broken.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

UNSPACED = re.compile(r"[A-Za-z]{40,}")  # no English word is this long: words run together


@dataclass
class PdfText:
    """What a PDF holds: its title, each page's text (see the module) and printed label ("" if none)."""

    title: str
    pages: list[str | None]
    labels: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Encrypted(Exception):
    """The PDF needs a password to open."""


def extract(data: bytes) -> PdfText:
    """The PDF's pages; raises Encrypted, ImportError (no pypdfium2) or PDFium's error on a damaged file."""
    import pypdfium2

    try:
        pdf = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        if "password" in str(exc).lower():  # PDFium's FPDF_ERR_PASSWORD; an empty user password opens
            raise Encrypted from None
        raise
    try:
        title = str(pdf.get_metadata_dict().get("Title") or "").strip()
        pages = [_page_text(pdf, i) for i in range(len(pdf))]
        labels = [_label(pdf, i) for i in range(len(pdf))]
    finally:
        pdf.close()
    found = PdfText(title, pages, labels if any(labels) else [])
    for n, text in enumerate(pages, 1):
        if text and UNSPACED.search(text):
            found.warnings.append(f"page {n}: text looks unspaced (a run of 40+ letters without a space); "
                                  f"its search may miss words there")
    return found


def _page_text(pdf: Any, index: int) -> str | None:
    """A page's text with \\n line ends; "" for no text layer, None for a page PDFium cannot parse."""
    try:
        page = pdf[index]
        try:
            textpage = page.get_textpage()
            text = textpage.get_text_bounded()
            textpage.close()
            # nothing drawn at all: a broken content stream (a scan draws its image)
            if not text.strip() and next(iter(page.get_objects(max_depth=1)), None) is None:
                return None
            return text.replace("\r\n", "\n").replace("\r", "\n")
        finally:
            page.close()
    except Exception:  # a corrupt page object
        return None


def _label(pdf: Any, index: int) -> str:
    try:
        return str(pdf.get_page_label(index) or "")
    except Exception:  # a malformed /PageLabels tree: the physical number stands
        return ""
