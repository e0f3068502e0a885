"""Recursive splitting: paragraphs, lines, sentence ends (Chinese and English), spaces."""
from __future__ import annotations

import re

# Each level cuts right after its separator, so punctuation stays at the end of its piece.
_LEVELS = (
    re.compile(r"\n[ \t]*\n\s*"),                                   # paragraphs
    re.compile(r"\n\s*"),                                           # lines
    re.compile(r"[。！？；]+[”’」』）)\"']*\s*|[.!?;]+[\"')\]]*(?:\s+|$)"),  # sentence ends
    re.compile(r"[，、,：:]\s*|\s+"),                                # clauses, then spaces
)


def _cut_after(text: str, pattern: re.Pattern) -> list[str]:
    pieces, start = [], 0
    for match in pattern.finditer(text):
        if match.end() > start:
            pieces.append(text[start:match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _split(text: str, size: int, level: int = 0) -> list[str]:
    """Pieces of at most `size` characters, each cut at the coarsest boundary that allows it."""
    if len(text) <= size:
        return [text]
    if level == len(_LEVELS):
        return [text[i:i + size] for i in range(0, len(text), size)]
    pieces = []
    for piece in _cut_after(text, _LEVELS[level]):
        pieces.extend(_split(piece, size, level + 1))
    return pieces


def chunk_text(text: str, size: int = 800, overlap: int = 100) -> list[str]:
    """Merge pieces into chunks of at most `size` characters; each chunk repeats up to
    `overlap` characters of whole pieces (sentences, where there are) from the one before."""
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for piece in _split(text, size):
        if current and length + len(piece) > size:
            chunks.append("".join(current))
            while current and (length > overlap or length + len(piece) > size):
                length -= len(current.pop(0))
        current.append(piece)
        length += len(piece)
    if current:
        chunks.append("".join(current))
    return [c.strip() for c in chunks if c.strip()]


def split_sentences(text: str) -> list[str]:
    """Sentences (Chinese and English ends) in order. A line break inside a paragraph joins its
    lines (hard-wrapped text) unless the next line starts a list item, a heading or a table row."""
    pieces = []
    for paragraph in _cut_after(text, _LEVELS[0]):
        lines = re.sub(r"\n(?![ \t]*(?:[-*•#|>]|\d+[.)、]))[ \t]*", " ", paragraph.strip())
        for line in lines.split("\n"):
            pieces.extend(s for s in _cut_after(line, _LEVELS[2]) if s.strip())
    return pieces
