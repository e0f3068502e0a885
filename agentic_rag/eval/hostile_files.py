"""Hostile files through `load_documents`, as `agentic-rag index` reads them: each one built in a
temporary folder at --scale of the size that cost minutes or gigabytes before the readers were
made linear and files past a size limit skipped unread, and read in a process of its own; its
time reading, that process's peak memory (VmHWM) and what came of it.

    python -m agentic_rag.eval.hostile_files --out reports/hostile-files
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from ..kb.ingestion import MAX_FILE_BYTES
from ._report import write_report

_CHILD = ("import json, sys, time; from agentic_rag.kb import load_documents; "
          "from agentic_rag.eval.scale import _peak_mb; skipped = []; start = time.perf_counter(); "
          "loaded = load_documents(sys.argv[1], on_skip=lambda w, r: skipped.append(r), "
          "max_file_bytes=int(sys.argv[2])); "
          "print(json.dumps({'seconds': time.perf_counter() - start, 'peak_mb': _peak_mb(), "
          "'documents': len(loaded.documents), 'chars': sum(len(d.text) for d in loaded.documents), "
          "'skipped': skipped}))")
_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_DOCX_PARTS = {
    "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
    'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
    'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
    'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    '</Types>',
    "_rels/.rels": '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
    'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
    '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'}


def write_docx(path: Path, body: Callable[[Callable[[str], object]], object]) -> None:
    """A minimal Word file whose document body `body(write)` writes, streamed (deflated) into the zip."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in _DOCX_PARTS.items():
            archive.writestr(name, text)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            def write(text: str) -> None:
                part.write(text.encode("utf-8"))
            write(f'<?xml version="1.0" encoding="UTF-8"?><w:document {_W}><w:body>')
            body(write)
            write("</w:body></w:document>")


def empty_paragraphs(path: Path, count: int) -> None:
    """A .docx of one paragraph of text and `count` empty ones (6 bytes each unpacked, almost none packed)."""
    def body(write: Callable[[str], object]) -> None:
        write("<w:p><w:r><w:t>The dock opens at six.</w:t></w:r></w:p>")
        for _ in range(count // 100_000):
            write("<w:p/>" * 100_000)
        write("<w:p/>" * (count % 100_000))
    write_docx(path, body)


def zip_bomb(path: Path, unpacked: int) -> None:
    """A .docx whose one paragraph holds `unpacked` bytes of spaces: a few hundred KB packed per 100 MB."""
    def body(write: Callable[[str], object]) -> None:
        write("<w:p><w:r><w:t>")
        for _ in range(unpacked // 1_000_000):
            write(" " * 1_000_000)
        write("</w:t></w:r></w:p>")
    write_docx(path, body)


def _cell(text: str, properties: str = "") -> str:
    run = f"<w:r><w:t>{text}</w:t></w:r>" if text else ""
    return f"<w:tc>{f'<w:tcPr>{properties}</w:tcPr>' if properties else ''}<w:p>{run}</w:p></w:tc>"


def wide_span(path: Path, span: int) -> None:
    """A .docx table of one row: a cell spanning `span` grid columns, then one more cell."""
    cells = _cell("Dock", f'<w:gridSpan w:val="{span}"/>') + _cell("The dock opens at six.")
    write_docx(path, lambda write: write(f"<w:tbl><w:tr>{cells}</w:tr></w:tbl>"))


def merged_rows(path: Path, rows: int) -> None:
    """A .docx table whose first cell is merged down over `rows` rows, each with a cell of its own."""
    def body(write: Callable[[str], object]) -> None:
        first = _cell("Dock", '<w:vMerge w:val="restart"/>') + _cell("The dock opens at six.")
        write(f"<w:tbl><w:tr>{first}</w:tr>")
        later = _cell("", "<w:vMerge/>") + _cell("row")
        for _ in range(rows - 1):
            write(f"<w:tr>{later}</w:tr>")
        write("</w:tbl>")
    write_docx(path, body)


def figure_captions(count: int) -> str:
    """A page of one figure holding `count` images, each followed by a caption."""
    unit = '<img src="dock.png" alt="Dock"><figcaption>The dock opens at six.</figcaption>'
    return f"<figure>{unit * count}</figure>"


def deep_jsonl(path: Path, depth: int) -> None:
    """A .jsonl file of one line nested `depth` lists deep, then a good line."""
    path.write_text("[" * depth + "]" * depth + '\n{"id": "dock", "text": "The dock opens at six."}\n')


def nested_nav(depth: int) -> str:
    """A page whose navigation holds `depth` nested <div>s, then one paragraph of text."""
    return "<nav>" + "<div>" * depth + "menu" + "</div>" * depth + "</nav><p>The dock opens at six.</p>"


def sparse(path: Path, size: int, head: bytes = b"") -> None:
    """A file of `size` bytes that takes no disk: `head`, then a hole."""
    path.write_bytes(head)
    os.truncate(path, size)


_PARA = "<p>The dock opens at six.</p>"
# name -> (file name, its count at scale 1, how it is built with a count, what it is)
CASES: dict[str, tuple[str, int, Callable[[Path, int], object], str]] = {
    "nav-nested-divs": ("nav.html", 100_000, lambda p, n: p.write_text(nested_nav(n)),
                        "{n:,} <div>s nested in a skipped <nav>"),
    "html-unclosed-tags": ("tags.html", 100_000, lambda p, n: p.write_text("<p>The dock.</p>" + "<a" * n),
                           "{n:,} '<a' that no '>' closes"),
    "html-unclosed-comments": ("comments.html", 125_000, lambda p, n: p.write_text(_PARA + "<!--x>" * n),
                               "{n:,} '<!--x>' that no '-->' closes"),
    "html-unclosed-cdata": ("cdata.html", 40_000, lambda p, n: p.write_text(_PARA + "<![CDATA[x>" * n),
                            "{n:,} '<![CDATA[x>' that no ']]>' closes"),
    "html-figure-captions": ("figure.html", 4_800, lambda p, n: p.write_text(figure_captions(n)),
                             "one <figure> of {n:,} images, each with a <figcaption>"),
    "html-title-pieces": ("title.html", 500_000, lambda p, n: p.write_text(f"<title>{'abc<b>' * n}</title>{_PARA}"),
                          "a <title> of {n:,} pieces ('abc<b>')"),
    "md-image-brackets": ("images.md", 50_000, lambda p, n: p.write_text("# Dock\n\n" + "![a](" * n),
                          "{n:,} Markdown images begun, never ended ('![a](')"),
    "md-heading-hashes": ("heading.md", 50_000, lambda p, n: p.write_text("# a" + "#" * n + "b\n\ntext"),
                          "a Markdown heading of {n:,} '#'"),
    "docx-empty-paragraphs": ("empty.docx", 3_000_000, empty_paragraphs, "{n:,} empty paragraphs"),
    "docx-wide-span": ("span.docx", 20_000_000, wide_span, "a table cell spanning {n:,} columns"),
    "docx-merged-rows": ("merged.docx", 9_000, merged_rows, "a table cell merged down over {n:,} rows"),
    "jsonl-deep-line": ("deep.jsonl", 1_000_000, deep_jsonl, "a .jsonl line nested {n:,} lists deep"),
    "docx-zip-bomb": ("bomb.docx", 1_000_000_000, zip_bomb, "a paragraph that unpacks to {n:,} bytes"),
    "sparse-txt": ("big.txt", 2_000_000_000, sparse, "{n:,} bytes of text (sparse)"),
    "sparse-html": ("big.html", 2_000_000_000, lambda p, n: sparse(p, n, b"<html><body><p>"),
                    "{n:,} bytes of HTML (sparse)"),
    "sparse-pdf": ("big.pdf", 2_000_000_000, lambda p, n: sparse(p, n, b"%PDF-1.4\n"), "{n:,} bytes of PDF (sparse)"),
}


def run_case(name: str, work: Path, scale: float, max_file_bytes: int, timeout: float) -> dict:
    """Build one case's file and read it in a child process."""
    filename, count, build, what = CASES[name]
    count = max(1, int(count * scale))
    what = what.format(n=count)
    folder = work / name
    folder.mkdir()
    build(folder / filename, count)
    size = (folder / filename).stat().st_size
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(max_file_bytes)], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"case": name, "what": what, "bytes": size, "outcome": f"stopped after {timeout:g} s", "seconds": None,
                "peak_mb": None}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"case": name, "what": what, "bytes": size, "outcome": f"failed: {last}", "seconds": None,
                "peak_mb": None}
    child = json.loads(done.stdout.strip().splitlines()[-1])
    outcome = (f"skipped: {child['skipped'][0]}" if child["skipped"] else
               f"{child['documents']} document, {child['chars']:,} characters")
    return {"case": name, "what": what, "bytes": size, "outcome": outcome, "seconds": round(child["seconds"], 3),
            "peak_mb": round(child["peak_mb"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="of each case's size (1: the sizes named)")
    parser.add_argument("--max-file-size", type=int, default=MAX_FILE_BYTES, metavar="BYTES",
                        help="the file-size limit to read with (default %(default)s, as index)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a case may take before it is stopped")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these (default: all)")
    parser.add_argument("--out", default="reports/hostile-files")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        rows = [run_case(name, Path(work), args.scale, args.max_file_size, args.timeout)
                for name in args.case or CASES]
    report = {"scale": args.scale, "max_file_bytes": args.max_file_size, "cases": rows}
    lines = [f"# Hostile files through load_documents (scale {args.scale:g}, file-size limit "
             f"{args.max_file_size:,} bytes): seconds reading, peak memory, outcome", "",
             "| case | file | bytes | seconds | peak memory MB | outcome |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['what']} | {r['bytes']:,} | {r['seconds']} | {r['peak_mb']} | {r['outcome']} |"
              for r in rows]
    write_report(args.out, report, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
