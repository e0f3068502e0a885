"""Readers that turn a file's bytes into text with its structure: PDF pages (pypdf), Word headings
and tables (python-docx), HTML headings and tables (the standard library's parser), and the images a
Markdown or HTML document shows with their alt text and caption. Each reader returns a title and
its pieces, (text, metadata) in reading order: a page ({"page": 3}) or a section ({"section":
"Login"}); chunks never cross a piece. pypdf and python-docx come with the `docs` extra."""
from __future__ import annotations

import io
import re
from html.parser import HTMLParser

DOCS_EXTRA = "pip install 'agentic-rag[docs]'"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")
_MD_IMAGE = re.compile(r'!\[([^\]]*)\]\(\s*(?:<([^>\n]+)>|([^)\s]+))(?:\s+"([^"]*)")?\s*\)'
                       r'(?:[ \t]*\n[ \t]*([*_])(.+?)\5[ \t]*$)?', re.M)


ENCRYPTED = "encrypted PDF: decrypt it first (e.g. qpdf --decrypt --password=... in.pdf out.pdf)"
# a class or id naming navigation: nav, navbar, navheader (DocBook), nav-footer, navigation; not naval-history
_NAV = re.compile(r"(?:^|\s)nav(?:bar|header|footer|menu|igation|links?)?(?:$|\s|[-_])", re.I)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_IMPLIED_END = {"li", "p", "dt", "dd", "tr", "td", "th", "option"}  # their end tag may be left out


class Unreadable(Exception):
    """Why a file cannot be indexed, in one line that says what to do."""


Pieces = list[tuple[str, dict]]


def read_pdf(data: bytes) -> tuple[str, Pieces]:
    """One piece a page with text. Encrypted (unless its user password is empty) and scanned PDFs
    (no text layer on any page) are refused, never indexed as empty documents."""
    try:
        import pypdf
    except ImportError:
        raise Unreadable(f"reading PDF needs the docs extra: {DOCS_EXTRA}") from None
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opened(reader):
            raise Unreadable(ENCRYPTED)
        pages = [_page_text(page) for page in reader.pages]
        title = str((reader.metadata or {}).get("/Title") or "").strip()
    except Unreadable:
        raise
    except (pypdf.errors.DependencyError, pypdf.errors.FileNotDecryptedError):  # a cipher it cannot run unaided
        raise Unreadable(ENCRYPTED) from None
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise Unreadable(f"not a readable PDF ({_printable(exc)})") from None
    if pages and all(text is None for text in pages):
        raise Unreadable("not a readable PDF: no page's text could be read")
    pieces = [(text, {"page": n}) for n, text in enumerate(pages, 1) if text and text.strip()]
    if not pieces:
        raise Unreadable(f"scanned PDF: none of its {len(pages)} pages has a text layer; run OCR on it first "
                         f"(e.g. ocrmypdf in.pdf out.pdf)")
    return title, pieces


def _page_text(page) -> str | None:
    """A page's text layer; None for a page too damaged to read (the others are still indexed)."""
    try:
        return page.extract_text() or ""
    except Exception:  # a corrupt content stream
        return None


def _printable(exc: Exception) -> str:
    """An exception in one printable line: a damaged file's bytes left out."""
    text = "".join(c if c.isprintable() else "?" for c in str(exc))[:120]
    return f"{exc.__class__.__name__}: {text}"


def _opened(reader) -> bool:
    """Whether an encrypted PDF opens with the empty user password (permissions-only encryption)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # a cipher pypdf cannot run without the cryptography package is still encrypted
        return False


def read_docx(data: bytes) -> tuple[str, Pieces]:
    """Paragraphs and tables in order; each heading starts a section; each table row becomes one
    line, its cells joined by ' | '."""
    try:
        import docx
    except ImportError:
        raise Unreadable(f"reading Word files needs the docs extra: {DOCS_EXTRA}") from None
    try:
        document = docx.Document(io.BytesIO(data))
        names = {style.style_id: style.name for style in document.styles}  # paragraph.style scans them all
        sections = _Sections()
        for block in document.iter_inner_content():
            if isinstance(block, docx.table.Table):
                for row in block.rows:
                    merged = {id(cell._tc): cell for cell in row.cells}  # a merged cell is listed once a column
                    sections.add(" | ".join(cell.text.strip() for cell in merged.values()))
                continue
            style = names.get(block._p.style, "") or ""
            if style == "Title" or style.startswith("Heading"):
                sections.heading(block.text.strip(), title=style == "Title")
            else:
                sections.add(block.text)
        title = (document.core_properties.title or "").strip()
    except Exception as exc:  # not a zip, not a Word document, a damaged part
        raise Unreadable(f"not a readable Word .docx file ({_printable(exc)})") from None
    return title or sections.title, sections.pieces()


class _Sections:
    """Text gathered under the heading it follows."""

    def __init__(self):
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


def decode_html(data: bytes, fallback: str | None = None) -> str:
    """HTML bytes as text: by its byte-order mark (UTF-8 or UTF-16), else the charset its <meta>
    declares, else UTF-8, else `fallback` (--encoding); a byte the charset does not allow becomes
    U+FFFD, as in a browser."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    declared = re.search(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", data[:4096], re.I)
    if declared is None:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            declared_name = fallback or "utf-8"
    else:
        declared_name = declared.group(1).decode("ascii")
    try:
        return data.decode(declared_name, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def read_html(text: str) -> tuple[str, Pieces, list[tuple[str, str]]]:
    """The page's title, its sections, and (src, alt text and caption) of each image it shows."""
    parser = _HTMLText()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # the standard library's parser asserts on a few malformed constructs
        raise Unreadable(f"not readable HTML ({_printable(exc)})") from None
    parser.flush()
    return parser.page_title or parser.sections.title, parser.sections.pieces(), parser.images


class _HTMLText(HTMLParser):
    """Visible text by block, without scripts, styles and navigation; h1-h6 start sections; table
    rows become lines of cells joined by ' | '; <img> alt text and <figcaption> are kept per image."""

    SKIP = {"script", "style", "noscript", "template", "nav", "svg", "iframe", "select"}
    BLOCKS = {"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "blockquote", "pre",
              "table", "tr", "br", "hr", "figure", "figcaption", "header", "footer", "aside", "form", "address"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections = _Sections()
        self.page_title = ""
        self.images: list[tuple[str, str]] = []
        self._skip: list[str] = []     # the skipped element we are in, then the elements open inside it
        self._line: list[str] = []
        self._heading: list[str] | None = None
        self._in_title = False
        self._pre = 0
        self._figure: list[list] = []  # per open <figure>: its images' indexes, then its caption's words
        self._caption: list[str] | None = None
        self._cells = 0                # open <td>/<th>
        self._row = 0                  # cells begun in the current row

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self._skip:
            if len(self._skip) == 1 and tag == self._skip[0] and tag in _IMPLIED_END:
                self._skip.pop()  # a sibling starts: the skipped one ended without its end tag
            else:
                if tag not in _VOID and not (tag in _IMPLIED_END and self._skip[-1] == tag and len(self._skip) > 1):
                    self._skip.append(tag)  # the elements open inside the skipped one
                return
        if tag == "title":
            self._in_title = True
        if tag in ("tr", "table"):
            self._cells = self._row = 0
        if tag == "br" and self._heading is not None:
            self._heading.append(" ")
        named = f"{attrs.get('class') or ''} {attrs.get('id') or ''}"
        if tag in self.SKIP or attrs.get("role") == "navigation" or "hidden" in attrs or _NAV.search(named):
            if tag not in _VOID:  # a void element holds nothing: passing it over is enough
                self._skip.append(tag)
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.flush()
            self._heading = []
        elif tag in ("td", "th"):
            self._cells += 1
            self._row += 1
            if self._row > 1:
                self._line.append(" | ")
        elif tag in self.BLOCKS and self._cells and tag not in ("tr", "table"):
            self._line.append(" ")  # a paragraph or line break inside a cell stays in its row
        elif tag in self.BLOCKS:
            self.flush()
        if tag == "pre":
            self._pre += 1
        elif tag == "figure":
            self._figure.append([])
        elif tag == "figcaption":
            self._caption = []
        elif tag == "img" and attrs.get("src"):
            if self._figure:
                self._figure[-1].append(len(self.images))
            self.images.append((attrs["src"], " ".join(filter(None, [attrs.get("alt"), attrs.get("title")]))))

    def handle_endtag(self, tag):
        if self._skip:
            if tag in self._skip:  # it, and whatever was left open inside it, end
                del self._skip[len(self._skip) - 1 - self._skip[::-1].index(tag):]
                return
            if self._skip[0] not in _IMPLIED_END:
                return  # a stray end tag inside the skipped element
            self._skip.clear()  # its parent ends (</ul> after a skipped <li>): so did it
        if tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") and self._heading is not None:
            self.sections.heading(" ".join("".join(self._heading).split()), title=False)
            self._heading = None
        elif tag == "figcaption" and self._caption is not None:
            self._caption_done(" ".join("".join(self._caption).split()))
        elif tag == "figure" and self._figure:
            self._figure.pop()
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag in ("td", "th"):
            self._cells = max(0, self._cells - 1)
        elif tag in ("tr", "table"):
            self._cells = self._row = 0
        if tag in self.BLOCKS and not self._cells:
            self.flush()

    def _caption_done(self, caption: str) -> None:
        for i in self._figure[-1] if self._figure else []:
            src, alt = self.images[i]
            self.images[i] = (src, f"{alt}. {caption}" if alt else caption)
        self._caption = None

    def handle_data(self, data):
        if self._in_title and not self._skip:
            self.page_title += data.strip()
            return
        if self._skip:
            return
        for sink in (self._heading, self._caption):
            if sink is not None:
                sink.append(data)
        if self._heading is None:
            self._line.append(data if self._pre else re.sub(r"\s+", " ", data))

    def flush(self):
        line = "".join(self._line)
        self._line = []
        if line.strip():
            self.sections.add(line if self._pre else re.sub(r" {2,}", " ", line.strip()))


def markdown_images(text: str) -> list[tuple[str, str]]:
    """(src, alt text, title and the caption line under it) of each image a Markdown text shows."""
    return [(bracketed or bare, ". ".join(part for part in (alt.strip(), title.strip(), caption.strip()) if part))
            for alt, bracketed, bare, title, _, caption in _MD_IMAGE.findall(text)]
