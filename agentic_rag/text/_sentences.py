"""Sentences: the boundaries text is cut at (paragraphs, lines, sentence ends in Chinese and
English, clauses and spaces), shared by the chunker and every reader of sentences."""
from __future__ import annotations

import re
from collections.abc import Iterator

from ._tokenize import CJK

# Each level cuts right after its separator, so punctuation stays at the end of its piece.
LEVELS = (
    re.compile(r"\n[ \t]*\n\s*"),                                   # paragraphs
    re.compile(r"\n\s*"),                                           # lines
    re.compile(r"[。！？；]+[”’」』）)\"']*\s*|[.!?;]+[\"')\]]*(?:\s+|$)"),  # sentence ends
    re.compile(r"[，、,：:]\s*|\s+"),                                # clauses, then spaces
)


def cuts(text: str, pattern: re.Pattern) -> Iterator[str]:
    """The text cut right after each match of the pattern, piece by piece."""
    start = 0
    for match in pattern.finditer(text):
        if match.end() > start:
            yield text[start:match.end()]
            start = match.end()
    if start < len(text):
        yield text[start:]


def _cut_after(text: str, pattern: re.Pattern) -> list[str]:
    return list(cuts(text, pattern))


# a line break inside a paragraph, unless the next line starts a list item, a heading or a table row
_WRAP = re.compile(r"([ \t]*)\n(?![ \t]*(?:[-*•#|>]|\d+[.)、]))[ \t]*")
_IDEOGRAPH = re.compile(f"[{CJK}]")
# punctuation written in Chinese text: CJK symbols (。、「」《》), full-width forms (，！？：（）), and the
# curly quotes, ellipsis and dash, which English uses too (so those count only beside an ideograph)
_CJK_PUNCT, _SHARED_PUNCT = re.compile("[\u3000-\u303f\uff00-\uffef]"), re.compile("[\u2018-\u201f\u2026\u2014]")


def _kind(char: str) -> str:
    return ("ideograph" if _IDEOGRAPH.match(char) else "chinese punctuation" if _CJK_PUNCT.match(char)
            else "shared punctuation" if _SHARED_PUNCT.match(char) else "other")


def _unspaced(before: str, after: str) -> bool:
    """Whether a line break between these two characters joins them with nothing: Chinese is
    written without spaces, so a break between two ideographs, or an ideograph and Chinese
    punctuation, is only where the line was wrapped."""
    kinds = {_kind(before), _kind(after)}
    return kinds <= {"ideograph", "chinese punctuation"} or kinds == {"ideograph", "shared punctuation"}


def _join_lines(paragraph: str) -> str:
    """The paragraph's wrapped lines as one: joined by a space, or by nothing inside Chinese text."""
    def join(m: re.Match) -> str:
        before, after = paragraph[m.start() - 1:m.start()], paragraph[m.end():m.end() + 1]
        return "" if before and after and _unspaced(before, after) else m.group(1) + " "
    return _WRAP.sub(join, paragraph)


def split_sentences(text: str) -> list[str]:
    """Sentences (Chinese and English ends) in order. A line break inside a paragraph joins its
    lines (hard-wrapped text) unless the next line starts a list item, a heading or a table row;
    between two Chinese characters (or one and Chinese punctuation) the join adds no space."""
    pieces: list[str] = []
    for paragraph in _cut_after(text, LEVELS[0]):
        lines = _join_lines(paragraph.strip())
        for line in lines.split("\n"):
            pieces.extend(s for s in _cut_after(line, LEVELS[2]) if s.strip())
    return pieces
