"""Checks of what a saved segment holds, before it is used: a file whose checksum in the manifest was
rewritten with it (a careless hand, a tool that "repairs" JSON) must fail in one line naming that
file, never crash the loader, a search, or the process (hnswlib reads its file unchecked).

What is checked: every file's shape (JSON types, array shapes and dtypes), every row, id and count
against the chunks and the manifest, BM25 term frequencies against document lengths and, for a
sample of chunks, against their text; vectors are finite and of unit length (embedders return
L2-normalised rows), and hnswlib's file is parsed and checked in full before hnswlib reads it
(the index files' checks live with the indexes: indexes/_checks; the chunks' and documents' here).
What is not: a file rewritten consistently with other values (other texts and their postings, all
vectors negated), which no check short of rebuilding can tell from the real thing.
"""
from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...core import RetrievalError
from ..indexes import require

# what a damaged file raises while it is parsed (RecursionError: JSON nested past Python's stack)
LOAD_ERRORS = (ValueError, KeyError, TypeError, IndexError, AttributeError, OSError, RuntimeError, EOFError,
               OverflowError, MemoryError, zipfile.BadZipFile, zlib.error)


@contextmanager
def reading(path: Path | str) -> Iterator[None]:
    """Turn a damaged file's error into one RetrievalError naming it (its segment folder and name)."""
    try:
        yield
    except LOAD_ERRORS as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise RetrievalError(f"{path} cannot be read ({why}); rebuild it into a new folder with: "
                             f"agentic-rag index PATH --kb NEW_DIR") from None


def check_chunk(chunk: dict, low: int, high: int) -> int:
    """A saved chunk's row (taken out of it), which must lie in [low, high), and its fields' types."""
    require(type(chunk) is dict, "a line is not a JSON object")
    row, get = chunk.pop("row", None), chunk.get
    require(type(row) is int and low <= row < high, f"row {row!r} is not in [{low}, {high})")
    require(type(get("id")) is type(get("doc_id")) is type(get("text")) is type(get("source"))
             is type(get("title")) is str and type(get("metadata")) is dict,
             f"row {row} lacks a field or has one of another type")  # one expression: a load reads every row
    return row


def check_documents(docs: Any, name: str = "documents") -> dict:
    """documents.json (or a delta's changed documents): doc id -> {"hash": str, "rows": [int, ...]}."""
    require(isinstance(docs, dict) and all(isinstance(d, dict) and isinstance(d.get("hash"), str)
                                            and isinstance(d.get("rows"), list)
                                            and all(type(r) is int for r in d["rows"]) for d in docs.values()),
             f"{name} are not documents with a hash and rows")
    return docs
