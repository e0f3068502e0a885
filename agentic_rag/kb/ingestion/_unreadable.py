"""Why a file cannot be read, in one line: the error every reader raises (Unreadable) and the
reasons they share. Its own module so that the readers (_loaders, _ocr, _html, _gzip, _files)
import it without importing each other."""
from __future__ import annotations

from ...core import AgenticRAGError


class Unreadable(AgenticRAGError):
    """Why a file cannot be indexed, in one line that says what to do. Caught where files are read:
    loading skips the file with this reason, and the service answers 400 with it."""


def too_large(size: int, max_bytes: int, what: str = "") -> str:
    """The reason a file past the size limit is skipped."""
    return (f"{what}{size:,} bytes, past the file-size limit of {max_bytes:,} bytes: raise it with --max-file-size "
            f"BYTES (max_file_bytes=) or split the file")


def printable(exc: Exception) -> str:
    """An exception in one printable line: a damaged file's bytes left out."""
    text = "".join(c if c.isprintable() else "?" for c in str(exc))[:120]
    return f"{exc.__class__.__name__}: {text}"
