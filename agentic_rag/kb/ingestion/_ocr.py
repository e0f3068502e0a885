"""OCR for PDF pages that have no text layer (scans, pages printed to an image). Each such page is
rendered to a grayscale image by pypdfium2 (the `ocr` extra: a wheel with PDFium inside, no system
libraries) and recognised by the `tesseract` binary (English and Simplified Chinese) in a process of
its own, one page at a time, so a long scan never holds more than one page image in memory. The
binary is called directly (stdin/stdout) rather than through pytesseract: one dependency fewer, and
the timeout is ours. OCR is bounded: at most `max_pages` pages a file, `file_seconds` a file and
`page_seconds` a page; past any of them the file is refused in one line saying which limit."""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ._unreadable import Unreadable, printable

OCR_APT = "apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim"
OCR_EXTRA = "pip install 'agentic-rag[ocr]'"
LANGUAGES = "eng+chi_sim"
DPI = 200  # tesseract reads body text best at 200-300 dpi; 200 halves the pixels of 300 (see docs/benchmarks.md)
# one CJK ideograph or CJK punctuation/full-width form: tesseract puts a space between each two
_CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# (and a line break where a line of Chinese wraps, which is layout, not a word break; a blank line stays)
_CJK_GAP = re.compile(f"(?<=[{_CJK}])(?:[ \t]+|[ \t]*\n[ \t]*)(?=[{_CJK}])")


@dataclass(frozen=True)
class OcrLimits:
    """How much OCR one file may take: pages OCR'd, seconds in all, seconds for one page."""
    max_pages: int = 50
    file_seconds: float = 600.0
    page_seconds: float = 120.0


def missing() -> str | None:
    """What to install for OCR, or None when the tesseract binary and pypdfium2 are both there."""
    needs = []
    if _tesseract() is None:
        needs.append(OCR_APT)
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        needs.append(OCR_EXTRA)
    return " and ".join(needs) or None


def _tesseract() -> str | None:
    return shutil.which("tesseract")


def ocr_missing(data: bytes, pages: list[str | None],
                limits: OcrLimits = OcrLimits()) -> tuple[list[str | None], set[int]]:
    """`pages` (each page's text layer; "" for none, None for a damaged page) with the pages that
    have no text layer recognised by OCR, and the 0-based numbers of those pages. Without OCR
    installed a PDF with text pages keeps them alone; one with none is refused naming what to install."""
    blank = [i for i, text in enumerate(pages) if text is not None and not text.strip()]
    if not blank:
        return pages, set()
    needs = missing()
    if needs:
        if any(text and text.strip() for text in pages):
            return pages, set()  # the text pages are indexed, as before OCR existed
        raise Unreadable(f"scanned PDF: none of its {len(pages)} pages has a text layer; to OCR it: "
                         f"{needs} (or OCR it first: ocrmypdf in.pdf out.pdf)")
    if len(blank) > limits.max_pages:
        raise Unreadable(f"scanned PDF: {len(blank)} pages need OCR, past the limit of {limits.max_pages} a file: "
                         f"raise OcrLimits(max_pages=), split the file or OCR it first (ocrmypdf in.pdf out.pdf)")
    import pypdfium2

    out = list(pages)
    deadline = time.monotonic() + limits.file_seconds
    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:  # pypdf read it, PDFium cannot: no image to OCR
        raise Unreadable(f"scanned PDF: its pages cannot be rendered for OCR ({printable(exc)})") from None
    try:
        for i in blank:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unreadable(_file_limit(limits, i))
            out[i] = recognise(_page_image(document, i), min(limits.page_seconds, left), i + 1, limits)
            if time.monotonic() > deadline:
                raise Unreadable(_file_limit(limits, i + 1))
    finally:
        document.close()
    return out, set(blank)


def _file_limit(limits: OcrLimits, done: int) -> str:
    return (f"scanned PDF: OCR took over the limit of {limits.file_seconds:g} s a file (at page {done + 1}): "
            f"raise OcrLimits(file_seconds=), split the file or OCR it first (ocrmypdf in.pdf out.pdf)")


def _page_image(document: Any, index: int) -> bytes:
    """Page `index` rendered at DPI as a grayscale PGM image (a format tesseract reads from stdin)."""
    import pypdfium2

    try:
        page = document[index]
    except pypdfium2.PdfiumError as exc:
        raise Unreadable(f"scanned PDF: page {index + 1} cannot be rendered for OCR ({printable(exc)})") from None
    try:
        bitmap = page.render(scale=DPI / 72, grayscale=True)
        width, height, stride = bitmap.width, bitmap.height, bitmap.stride
        buffer = bytes(bitmap.buffer)
        channels = bitmap.n_channels
    finally:
        page.close()
    if channels != 1:  # a PDFium that renders gray as BGR(x): take one channel
        rows = b"".join(buffer[y * stride:y * stride + width * channels:channels] for y in range(height))
    elif stride != width:
        rows = b"".join(buffer[y * stride:y * stride + width] for y in range(height))
    else:
        rows = buffer
    return b"P5\n%d %d\n255\n" % (width, height) + rows


def recognise(image: bytes, seconds: float, page: int, limits: OcrLimits) -> str:
    """The text tesseract reads in one page image, spaces between CJK characters removed."""
    try:
        # one thread (env adds OMP_THREAD_LIMIT to the inherited environment): uploads are read side by side
        command = ["env", "OMP_THREAD_LIMIT=1", _tesseract() or "tesseract", "stdin", "stdout", "-l", LANGUAGES,
                   "--dpi", str(DPI)]
        done = subprocess.run(command, input=image, capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        raise Unreadable(f"scanned PDF: OCR of page {page} took over {seconds:g} s (the limit is "
                         f"{limits.page_seconds:g} s a page, {limits.file_seconds:g} s a file): raise "
                         f"OcrLimits(page_seconds=, file_seconds=) or OCR it first (ocrmypdf in.pdf out.pdf)") from None
    except OSError as exc:
        raise Unreadable(f"scanned PDF: tesseract could not run ({exc.strerror}): reinstall it: {OCR_APT}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1][:120] if said else f"exit status {done.returncode}"
        raise Unreadable(f"scanned PDF: tesseract failed on page {page} ({why}); "
                         f"check its languages: {OCR_APT}")
    return clean(done.stdout.decode("utf-8", "replace"))


def clean(text: str) -> str:
    """Tesseract's output without the spaces it puts between CJK characters (nor the line breaks
    where Chinese wraps), or its form feed."""
    return _CJK_GAP.sub("", text.replace("\f", "")).strip()
