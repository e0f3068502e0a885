"""PDF text extractors measured on real PDFs: pypdf, pypdfium2 and pdfminer.six (each skipped, with
a note, when it is not installed). Per PDF and extractor: the share of 1000-character windows of the
extracted text that hold a run of 40+ Latin letters without a space (words run together: they
neither embed nor match a keyword search); the share of extracted words (3+ lowercase letters)
found in /usr/share/dict/words (Debian's wamerican); extraction time; peak Python memory
(tracemalloc: pypdfium2's own buffers are in C and not counted, noted in the report); and whether
the extractor reads the PDF's printed page labels (/PageLabels).

    python -m agentic_rag.eval.pdf_extractors --out reports/pdf-extractors [PDF ...]

Without PDFs it reads the Debian FAQ of the realdocs set, the test fixtures, the examples and every
PDF (or .pdf.gz, unpacked to a temporary folder) under /usr/share/doc.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import re
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from ..kb.ingestion import UNSPACED
from ._report import write_report

WORD = re.compile(r"\b[a-z]{3,}\b")
WINDOW = 1000
DICT = Path("/usr/share/dict/words")
FAQ = Path(__file__).resolve().parents[3] / "shared/data/realdocs/docs/pdf/debian-faq.en.pdf"


def _pypdf(data: bytes) -> tuple[list[str], bool]:
    import io

    import pypdf
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")
    labels = bool(reader.page_labels) and "/PageLabels" in reader.root_object
    return [page.extract_text() or "" for page in reader.pages], labels


def _pypdfium2(data: bytes) -> tuple[list[str], bool]:
    import pypdfium2
    pdf = pypdfium2.PdfDocument(data)
    try:
        texts = []
        for page in pdf:
            textpage = page.get_textpage()
            texts.append(textpage.get_text_bounded())
            textpage.close()
            page.close()
        labels = any(pdf.get_page_label(i) for i in range(len(pdf)))
        return texts, labels
    finally:
        pdf.close()


def _pdfminer(data: bytes) -> tuple[list[str], bool]:
    import io

    from pdfminer.high_level import extract_text
    text = extract_text(io.BytesIO(data))
    return text.split("\f"), False  # pdfminer's high-level API gives no page labels


EXTRACTORS: dict[str, tuple[str, Callable[[bytes], tuple[list[str], bool]]]] = {
    "pypdf": ("pypdf", _pypdf), "pypdfium2": ("pypdfium2", _pypdfium2), "pdfminer.six": ("pdfminer", _pdfminer)}


def unspaced_share(text: str) -> tuple[int, int]:
    """(windows holding a 40+ letter run, windows) over 1000-character windows of the text."""
    windows = [text[i:i + WINDOW] for i in range(0, len(text), WINDOW)] or [""]
    return sum(bool(UNSPACED.search(w)) for w in windows), len(windows)


def dictionary_share(text: str, words: set[str]) -> float | None:
    """The share of the text's lowercase words (3+ letters) in the dictionary; None without one."""
    found = WORD.findall(text)
    return round(sum(w in words for w in found) / len(found), 4) if words and found else None


def measure(path: Path, fn: Callable[[bytes], tuple[list[str], bool]], words: set[str]) -> dict:
    data = path.read_bytes()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        pages, labels = fn(data)
    except Exception as exc:  # a damaged or encrypted fixture: the row says so
        tracemalloc.stop()
        return {"error": f"{exc.__class__.__name__}: {str(exc)[:80]}"}
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    text = "\n".join(pages)
    bad, windows = unspaced_share(text)
    return {"pages": len(pages), "chars": len(text), "unspaced_windows": bad, "windows": windows,
            "unspaced_share": round(bad / windows, 4), "dict_share": dictionary_share(text, words),
            "seconds": round(seconds, 3), "peak_mb": round(peak / 2**20, 1), "page_labels": labels}


def default_pdfs(work: Path) -> list[Path]:
    root = Path(__file__).resolve().parents[2]
    found = [FAQ] if FAQ.exists() else []
    found += sorted((root / "tests/fixtures/docs").glob("*.pdf")) + sorted((root / "examples/data").rglob("*.pdf"))
    for path in sorted(Path("/usr/share/doc").rglob("*.pdf*")):
        if path.name.endswith(".pdf"):
            found.append(path)
        elif path.name.endswith(".pdf.gz"):
            out = work / f"{path.parent.name}-{path.name[:-3]}"
            out.write_bytes(gzip.decompress(path.read_bytes()))
            found.append(out)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--out", default="reports/pdf-extractors")
    args = parser.parse_args(argv)
    words = {w.strip().lower() for w in DICT.read_text(errors="replace").splitlines()} if DICT.exists() else set()
    notes = [] if words else [f"no {DICT} (apt-get install wamerican): no dictionary column"]
    names = []
    for name, (module, _fn) in EXTRACTORS.items():
        if importlib.util.find_spec(module) is None:
            notes.append(f"{name} not installed: skipped (pip install {name})")
        else:
            names.append(name)
    with tempfile.TemporaryDirectory() as tmp:
        pdfs = args.pdfs or default_pdfs(Path(tmp))
        rows = {str(p.name): {n: measure(p, EXTRACTORS[n][1], words) for n in names} for p in pdfs}
    totals = {}
    for n in names:
        ok = [r[n] for r in rows.values() if "error" not in r[n]]
        bad, windows = sum(r["unspaced_windows"] for r in ok), sum(r["windows"] for r in ok)
        totals[n] = {"unspaced_share": round(bad / max(windows, 1), 4),
                     "seconds": round(sum(r["seconds"] for r in ok), 2),
                     "peak_mb_max": max((r["peak_mb"] for r in ok), default=0.0),
                     "failed": sum("error" in r[n] for r in rows.values())}
    notes.append("peak_mb is Python allocations (tracemalloc); pypdfium2's C buffers are not counted")
    lines = ["# PDF text extraction", "", "Share of 1000-char windows with a 40+ letter run without a space "
             "(lower is better) / share of words in the dictionary / seconds / peak MB; labels: reads /PageLabels.", "",
             "| PDF | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for pdf, row in rows.items():
        cells = [row[n].get("error") or (f"{row[n]['unspaced_share']:.1%} / {row[n]['dict_share'] or 0:.1%} / "
                                         f"{row[n]['seconds']}s / {row[n]['peak_mb']}MB"
                                         + (" / labels" if row[n]["page_labels"] else "")) for n in names]
        lines.append(f"| {pdf} | " + " | ".join(cells) + " |")
    lines.append("| **all** | " + " | ".join(f"{totals[n]['unspaced_share']:.1%} / {totals[n]['seconds']}s, "
                                              f"{totals[n]['failed']} failed" for n in names) + " |")
    lines += ["", *(f"- {note}" for note in notes)]
    write_report(args.out, {"rows": rows, "totals": totals, "notes": notes}, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
