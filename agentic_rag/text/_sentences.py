"""Sentences: the boundaries text is cut at (paragraphs, lines, sentence ends in Chinese and
English, clauses and spaces), shared by the chunker and every reader of sentences."""
from __future__ import annotations

import re
from collections.abc import Iterator

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


def split_sentences(text: str) -> list[str]:
    """Sentences (Chinese and English ends) in order. A line break inside a paragraph joins its
    lines (hard-wrapped text) unless the next line starts a list item, a heading or a table row."""
    pieces: list[str] = []
    for paragraph in _cut_after(text, LEVELS[0]):
        lines = re.sub(r"\n(?![ \t]*(?:[-*•#|>]|\d+[.)、]))[ \t]*", " ", paragraph.strip())
        for line in lines.split("\n"):
            pieces.extend(s for s in _cut_after(line, LEVELS[2]) if s.strip())
    return pieces
