"""The library's error tree: every error it raises on purpose is an AgenticRAGError."""
from __future__ import annotations

from typing import Any


class AgenticRAGError(Exception):
    """Base class: catch this to handle any error the library raises on purpose."""


class ConfigurationError(AgenticRAGError):
    """A setting, flag or argument has a bad value; the message names it and the fix."""


class AccessDenied(ConfigurationError):
    """The database role lacks a right (to create the extension or the schema, read or write): the
    server's setup, not the caller's input; the message names the right and who can grant it."""


class ModelError(AgenticRAGError):
    """A model call failed (network, server, timeout) after its retries. `usage`, when the model
    knows it, holds the tokens the failed call spent (prompt_tokens, completion_tokens), so that a
    failed call is metered like any other."""

    usage: dict | None = None


class ModelOutputError(ModelError):
    """A model replied with output that does not fit the expected schema, or was cut off at its limit."""


class BudgetExceeded(AgenticRAGError):
    """The next model call cannot fit in what is left of the run's token budget; inside a run this
    ends it with stop_reason "token_budget"."""


class DeadlineExceeded(ModelError):
    """A model call was cut off by the run's deadline (`deadline_s`), or not made because it had
    passed; inside a run this ends it with stop_reason "deadline", not "error"."""


class RetrievalError(AgenticRAGError):
    """The knowledge base cannot serve a search: missing, empty, corrupted or mismatched."""


class WriteConflict(RetrievalError):
    """A write met another writer: a process holds the folder's writer lock past the wait, or saved
    the folder since this knowledge base was loaded. Nothing was written; reload and retry."""


class ConnectionLost(RetrievalError):
    """The connection to PostgreSQL dropped and the one retry could not bring it back (it dropped
    again, or the server could not be reached). A write cut off before its commit wrote nothing; only
    one cut off during its commit may or may not have been saved, and the message says which."""


class ToolError(AgenticRAGError):
    """A tool was unknown, given bad arguments, or failed."""


class StorageError(AgenticRAGError):
    """A knowledge base's folder could not be written: no space left, a read-only or unwritable
    folder, a file size limit. `errno` is the cause's code (errno.ENOSPC, ...), `folder` the folder
    as given, and `cause` the cause in words; the message says all three and the fix."""

    errno: int | None = None
    folder: str = ""
    cause: str = ""


def first_problem(exc: Any, whole: str = "body") -> str:
    """A pydantic ValidationError's first problem on one line, "where: what" (`whole` when it is about
    the whole input rather than one field)."""
    first = exc.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc']) or whole}: {first['msg']}"
