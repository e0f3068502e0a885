"""The HTML reader: a page's visible text by block, without scripts, styles and navigation; h1-h6
start sections; a list item's first line starts with "- "; table rows become lines of cells joined by
' | '; the images it shows are kept with their alt text and caption. Linear in the page, however deep
its elements nest."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser

from ._loaders import Pieces, Sections
from ._unreadable import Unreadable, printable

# a class or id naming navigation: nav, navbar, navheader (DocBook), nav-footer, navigation; not naval-history
_NAV = re.compile(r"(?:^|\s)nav(?:bar|header|footer|menu|igation|links?)?(?:$|\s|[-_])", re.I)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_IMPLIED_END = {"li", "p", "dt", "dd", "tr", "td", "th", "option"}  # their end tag may be left out
_COMMENT_END = re.compile(r"--\s*>")
_SECTION_END = re.compile(r"]\s*]\s*>")     # of <![CDATA[ and the other standard marked sections
_IE_SECTION_END = re.compile(r"]\s*>")      # of <![if ...]>, <![else]>, <![endif]>
_SECTION_NAME = re.compile(r"[a-zA-Z][-_.a-zA-Z0-9]*")
_SECTION_ENDS = {**dict.fromkeys(("temp", "cdata", "ignore", "include", "rcdata"), _SECTION_END),
                 **dict.fromkeys(("if", "else", "endif"), _IE_SECTION_END)}
_RAW_TEXT_END = re.compile(r"</\s*(?:script|style)\s*>", re.I)  # ends the elements the parser reads raw
# captions copied into a page's image descriptions total at most this many characters, or the page's
# length if more: a caption goes to each image of its figure, and one figure of 10,000 would copy it
# 10,000 times
_CAPTION_FLOOR = 1_000_000


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
    parser = _HTMLText(caption_chars=max(len(text), _CAPTION_FLOOR))
    try:
        parser.feed(_closable(text))
        parser.close()
    except Exception as exc:  # the standard library's parser asserts on a few malformed constructs
        raise Unreadable(f"not readable HTML ({printable(exc)})") from None
    parser.flush()
    return "".join(parser.title) or parser.sections.title, parser.sections.pieces(), parser.images


def _closable(text: str) -> str:
    """The page with each '<' that opens a construct no terminator follows written &lt;, and the
    '<'s up to the next '>' with it: the standard library's parser takes them as that text anyway,
    but only after searching the rest of the page for a terminator once for each of them (quadratic:
    750 KB of '<!--x>' took 104 s). Where the last of each terminator starts is found once."""
    last = {pattern: _last_start(pattern, text) for pattern in (_COMMENT_END, _SECTION_END, _IE_SECTION_END)}
    last_gt = text.rfind(">")
    out: list[str] = []
    start, text_until = 0, -1
    for at in _lts(text):
        if at <= text_until:  # inside text the parser makes of an unterminated construct
            if _RAW_TEXT_END.match(text, at):
                continue  # a </script> there stays an end tag: written &lt; it would hide the rest of the page
        elif at < last_gt and _terminated(text, at, last):
            continue
        else:
            found = text.find(">", at)
            text_until = len(text) if found < 0 else found
        out += (text[start:at], "&lt;")
        start = at + 1
    return "".join(out) + text[start:] if out else text


def _lts(text: str) -> Iterator[int]:
    """Where each '<' of the text is, in order."""
    at = text.find("<")
    while at >= 0:
        yield at
        at = text.find("<", at + 1)


def _last_start(pattern: re.Pattern, text: str) -> int:
    """Where the last match of `pattern` starts (-1: none); matches of these patterns never overlap."""
    start = -1
    for match in pattern.finditer(text):
        start = match.start()
    return start


def _terminated(text: str, at: int, last: dict) -> bool:
    """Whether the construct the '<' at `at` opens (a '>' follows it) has its terminator after it."""
    if text.startswith("<!--", at):
        return last[_COMMENT_END] >= at + 4
    if text.startswith("<![", at):
        name = _SECTION_NAME.match(text, at + 3)
        end = _SECTION_ENDS.get(name.group().lower()) if name else None
        return end is None or last[end] >= at + 3  # an unknown kind is refused by the parser (Unreadable)
    return True


class _HTMLText(HTMLParser):
    """Visible text by block, without scripts, styles and navigation; h1-h6 start sections; table
    rows become lines of cells joined by ' | '; <img> alt text is kept per image, and its figure's
    caption (its first <figcaption>, given at </figure>) while `caption_chars` last."""

    SKIP = {"script", "style", "noscript", "template", "nav", "svg", "iframe", "select"}
    BLOCKS = {"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "blockquote", "pre",
              "table", "tr", "br", "hr", "figure", "figcaption", "header", "footer", "aside", "form", "address"}

    def __init__(self, caption_chars: int):
        super().__init__(convert_charrefs=True)
        self.sections = Sections()
        self.title: list[str] = []     # joined once: += on an attribute copies the title each time
        self.images: list[tuple[str, str]] = []
        self._skip: list[str] = []     # the skipped element we are in, then the elements open inside it
        self._skipping: Counter[str] = Counter()  # how many of each tag are in _skip: an end tag is matched in O(1)
        self._line: list[str] = []
        self._heading: list[str] | None = None
        self._in_title = False
        self._pre = 0
        self._figure: list[tuple[list[int], list[str]]] = []  # per open <figure>: its images, its caption
        self._caption: list[str] | None = None
        self._caption_chars = caption_chars
        self._item = False             # an <li> began: its first line is marked as a list item
        self._cells = 0                # open <td>/<th>
        self._row = 0                  # cells begun in the current row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        if self._skip:
            if len(self._skip) == 1 and tag == self._skip[0] and tag in _IMPLIED_END:
                self._end_skip(tag)  # a sibling starts: the skipped one ended without its end tag
            else:
                if tag not in _VOID and not (tag in _IMPLIED_END and self._skip[-1] == tag and len(self._skip) > 1):
                    self._push_skip(tag)  # the elements open inside the skipped one
                return
        if tag == "title":
            self._in_title = True
        if tag in ("tr", "table"):
            self._cells = self._row = 0
        if tag == "br" and self._heading is not None:
            self._heading.append(" ")
        named = f"{given.get('class') or ''} {given.get('id') or ''}"
        if tag in self.SKIP or given.get("role") == "navigation" or "hidden" in given or _NAV.search(named):
            if tag not in _VOID:  # a void element holds nothing: passing it over is enough
                self._push_skip(tag)
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
            self._item = self._item or tag == "li"  # <li><p>: the paragraph is the item's first line
        if tag == "pre":
            self._pre += 1
        elif tag == "figure":
            self._figure.append(([], []))
        elif tag == "figcaption":
            self._caption = []
        elif tag == "img" and (src := given.get("src")):
            if self._figure:
                self._figure[-1][0].append(len(self.images))
            self.images.append((src, " ".join(filter(None, [given.get("alt"), given.get("title")]))))

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if self._skipping[tag]:  # it, and whatever was left open inside it, end
                self._end_skip(tag)
                return
            if self._skip[0] not in _IMPLIED_END:
                return  # a stray end tag inside the skipped element
            self._skip.clear()  # its parent ends (</ul> after a skipped <li>): so did it
            self._skipping.clear()
        if tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") and self._heading is not None:
            self.sections.heading(" ".join("".join(self._heading).split()), title=False)
            self._heading = None
        elif tag == "figcaption" and self._caption is not None:
            if self._figure and not self._figure[-1][1]:  # a figure has one caption: its first
                self._figure[-1][1].append(" ".join("".join(self._caption).split()))
            self._caption = None
        elif tag == "figure" and self._figure:
            self._figure_done()
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag in ("td", "th"):
            self._cells = max(0, self._cells - 1)
        elif tag in ("tr", "table"):
            self._cells = self._row = 0
        if tag in self.BLOCKS and not self._cells:
            self.flush()

    def _push_skip(self, tag: str) -> None:
        self._skip.append(tag)
        self._skipping[tag] += 1

    def _end_skip(self, tag: str) -> None:
        """Close the innermost open `tag` of the skipped ones and all opened inside it: each tag is
        popped once, so a page's skipping is linear in its tags however deep they nest."""
        while self._skip:
            popped = self._skip.pop()
            self._skipping[popped] -= 1
            if popped == tag:
                return

    def _figure_done(self) -> None:
        """The innermost figure ends: its caption is given to each of its images, each image's once."""
        images, caption = self._figure.pop()
        for i in images if caption and caption[0] else []:
            if self._caption_chars < len(caption[0]):
                return
            self._caption_chars -= len(caption[0])
            src, alt = self.images[i]
            self.images[i] = (src, f"{alt}. {caption[0]}" if alt else caption[0])

    def close(self) -> None:
        super().close()
        while self._figure:  # a figure left open ends with the page
            self._figure_done()

    def handle_data(self, data: str) -> None:
        if self._in_title and not self._skip:
            self.title.append(data.strip())
            return
        if self._skip:
            return
        for sink in (self._heading, self._caption):
            if sink is not None:
                sink.append(data)
        if self._heading is None:
            self._line.append(data if self._pre else re.sub(r"\s+", " ", data))

    def flush(self) -> None:
        line = "".join(self._line)
        self._line = []
        if line.strip():
            line = line if self._pre else re.sub(r" {2,}", " ", line.strip())
            self.sections.add(f"- {line}" if self._item and not self._pre else line)
            self._item = False
