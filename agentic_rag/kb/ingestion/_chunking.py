"""Chunking: a text cut at the coarsest boundary that fits (paragraphs, lines, sentence ends,
clauses, spaces) and merged into overlapping chunks; a document's chunks never cross a page or section."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._documents import Document

from collections.abc import Iterator

from ...text import LEVELS, cuts


def _split(text: str, size: int, level: int = 0) -> Iterator[str]:
    """Pieces of at most `size` characters, each cut at the coarsest boundary that allows it."""
    if len(text) <= size:
        yield text
    elif level == len(LEVELS):
        yield from (text[i:i + size] for i in range(0, len(text), size))
    else:
        for piece in cuts(text, LEVELS[level]):
            yield from _split(piece, size, level + 1)


def iter_chunks(text: str, size: int = 800, overlap: int = 100) -> Iterator[str]:
    """Merge pieces into chunks of at most `size` characters; each chunk repeats up to
    `overlap` characters of whole pieces (sentences, where there are) from the one before.
    A generator: a long text is never held as all its pieces at once."""
    current: list[str] = []
    length = 0
    for piece in _split(text, size):
        if current and length + len(piece) > size:
            if chunk := "".join(current).strip():
                yield chunk
            while current and (length > overlap or length + len(piece) > size):
                length -= len(current.pop(0))
        current.append(piece)
        length += len(piece)
    if current and (chunk := "".join(current).strip()):
        yield chunk


def chunk_text(text: str, size: int = 800, overlap: int = 100) -> list[str]:
    """The chunks of iter_chunks as a list."""
    return list(iter_chunks(text, size, overlap))


def document_chunks(document: Document, size: int = 800, overlap: int = 100) -> Iterator[tuple[str, dict]]:
    """(text, metadata) of each chunk of a Document: a chunk never crosses one of its parts (a page,
    a section) and its metadata is the document's with its part's added."""
    parts = list(document.parts) or [(0, {})]
    if parts[0][0] > 0:
        parts.insert(0, (0, {}))
    ends = [start for start, _ in parts[1:]] + [len(document.text)]
    for (start, meta), end in zip(parts, ends, strict=True):
        for chunk in iter_chunks(document.text[start:end], size, overlap):
            yield chunk, {**document.metadata, **meta}
