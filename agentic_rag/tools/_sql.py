"""SQL over a SQLite file, read-only twice over: opened with mode=ro, and an authorizer that
allows reading only (no writes, ATTACH, PRAGMA or schema changes); one statement per call, a row
limit, a time limit and a size limit (no blob makers, printf padding or native pointers; on Python
3.11+ no string or blob over 1 MB), and temporary data (sorts, DISTINCT, materialised subqueries)
kept in memory under a memory limit instead of written to disk. A language model writes one
SELECT (`sql_tool`); offline, the user registers named, parameterised queries selected by
question patterns (`named_query`)."""
from __future__ import annotations

import ctypes
import functools
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..core import ConfigurationError, Evidence, ToolError
from ._registry import Tool

# a recursive WITH can double a string past any size in a few steps; only a length cap (setlimit, Python
# 3.11+) stops that, so without one recursion is refused
_CAPPED = hasattr(sqlite3.Connection, "setlimit")
_RECURSIVE = getattr(sqlite3, "SQLITE_RECURSIVE", 33)
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, _RECURSIVE}
# one call allocates gigabytes, or pads a string for seconds, before the progress handler ever runs,
# so the time limit cannot stop it: blob makers and printf-style width padding (format is printf).
# fts3_tokenizer(name) returns a native pointer (an address to aim an exploit at) and, with two
# arguments, installs one as a tokenizer: code execution; load_extension loads native code (Python
# turns it off; denied here as well); rtreenode and rtreedepth are SQLite's debugging readers of raw
# node blobs, of no use to a question
_DENIED_FUNCTIONS = {"randomblob", "zeroblob", "printf", "format", "fts3_tokenizer", "load_extension",
                     "rtreenode", "rtreedepth"}
_MAX_LENGTH = 1 << 20  # bytes in one string or blob (SQLITE_LIMIT_LENGTH): stops doubling by || or recursion


@functools.cache  # a fact about the process's SQLite library, looked up once
def _heap_meter() -> Callable[[], int] | None:
    """SQLite's own count of the heap it holds in this process (sqlite3_memory_used), or None when
    the library Python uses cannot be reached or does not count (built without memory statistics)."""
    import _sqlite3

    for name in (_sqlite3.__file__, "sqlite3") if sys.platform == "win32" else (_sqlite3.__file__,):
        try:
            used = ctypes.CDLL(name).sqlite3_memory_used
        except (OSError, AttributeError):
            continue
        used.restype, used.argtypes = ctypes.c_int64, []
        probe = sqlite3.connect(":memory:")
        try:  # a library other than the one Python uses, or one that does not count, says 0
            if probe.execute("SELECT 1").fetchone() and used() > 0:
                return used
        finally:
            probe.close()
    return None


def _authorize(action: int, arg1: str | None, arg2: str | None, *rest: str | None) -> int:
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY  # for SQLITE_FUNCTION the second argument is the function's name
    if action == _RECURSIVE and not _CAPPED:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _check_database(path: Path) -> None:
    """An empty file, or one that is not SQLite, fails when opened and names itself, not at the first query."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigurationError(f"database {path} is not a SQLite file ({exc}); give one such as "
                                 f"examples/data/db/shop.sqlite") from None
    if not tables:
        raise ConfigurationError(f"database {path} holds no tables (an empty file?); give one such as "
                                 f"examples/data/db/shop.sqlite")


class _Guard:
    """The progress handler: a non-zero return stops the query, past its time or its memory. Its
    temporary data is held in memory (temp_store), where SQLite's heap count sees it: on disk a
    2-second sort wrote 1.3 GB. Without that count it stays on disk, bounded by time alone."""

    def __init__(self, db: sqlite3.Connection, time_limit_s: float, memory_limit_mb: float):
        self.deadline = time.monotonic() + time_limit_s
        self.used = _heap_meter()
        if self.used is not None:
            db.execute("PRAGMA temp_store = MEMORY")
            self.ceiling = self.used() + int(memory_limit_mb * (1 << 20))  # the heap is the process's
        self.reason = ""

    def __call__(self) -> int:
        if time.monotonic() > self.deadline:
            self.reason = "took longer than the time limit"
        elif self.used is not None and self.used() > self.ceiling:
            self.reason = "needed more than the memory limit (sorting or grouping too many rows?)"
        return int(bool(self.reason))


class SQLDatabase:
    """A read-only SQLite database; a connection per query, so threads share nothing."""

    def __init__(self, path: str | Path, row_limit: int = 50, time_limit_s: float = 2.0,
                 memory_limit_mb: float = 128):
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigurationError(
                f"database not found: {self.path}; build it with python examples/data/db/build_db.py")
        if not memory_limit_mb > 0:
            raise ConfigurationError(f"memory_limit_mb = {memory_limit_mb!r}; give a positive size in MB")
        _check_database(self.path)
        self.row_limit, self.time_limit_s, self.memory_limit_mb = row_limit, time_limit_s, memory_limit_mb

    def query(self, sql: str, parameters: tuple | dict = ()) -> list[dict]:
        """Rows of one read-only statement, at most row_limit of them; anything else raises ToolError."""
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.time_limit_s)
        guard = None
        try:
            db.row_factory = sqlite3.Row
            guard = _Guard(db, self.time_limit_s, self.memory_limit_mb)  # before the authorizer denies PRAGMA
            db.set_authorizer(_authorize)
            if _CAPPED:  # Python 3.11+; before that recursion and the blob makers are denied above
                db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_LENGTH)  # type: ignore[attr-defined]  # 3.11+, as checked
            db.set_progress_handler(guard, 1000)
            return [dict(row) for row in db.execute(sql, parameters).fetchmany(self.row_limit)]
        except (sqlite3.DatabaseError, sqlite3.ProgrammingError, sqlite3.Warning) as exc:
            reason = (guard.reason if guard else "") or str(exc)  # the guard's when it stopped the query
            raise ToolError(f"query refused or failed: {reason}") from None
        finally:
            db.close()

    def schema(self) -> str:
        """The CREATE statements of the tables, to show a model what it may query."""
        return "\n".join(r["sql"] for r in self.query("SELECT sql FROM sqlite_master WHERE type = 'table'"))


def _rows_text(rows: list[dict]) -> str:
    return "; ".join(", ".join(f"{k} {v}" for k, v in row.items()) for row in rows) or "no rows"


class _SQLArguments(BaseModel):
    query: str


def sql_tool(db: SQLDatabase) -> Tool:
    """One SELECT written by a language model; the schema goes into the tool's description."""
    return Tool("sql", f"one read-only SQLite SELECT over these tables:\n{db.schema()}",
                lambda query: _rows_text(db.query(query)), arguments=lambda q, e: None,
                parameters=_SQLArguments, kind="database")


def named_query(db: SQLDatabase, name: str, description: str, sql: str, parameters: type[BaseModel],
                patterns: tuple[str, ...], arguments: Callable[[str, list[Evidence]], dict | None],
                render: Callable[[list[dict]], str] = _rows_text, empty: str = "no rows") -> Tool:
    """A parameterised query the offline route selects by its patterns; arguments are bound, never pasted."""
    def run(**values: Any) -> str:
        rows = db.query(sql, values)
        if not rows:
            raise ToolError(empty.format(**values))
        return render(rows)

    return Tool(name, description, run, patterns, arguments, parameters, kind="database")
