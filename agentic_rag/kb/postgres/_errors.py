"""What the PostgreSQL knowledge base says when the server refuses: the URL with its passwords
masked, and one line for a value text cannot hold, a right the role lacks, or ar_ tables that are
not (or no longer) an agentic-rag schema, each naming the fix."""
from __future__ import annotations

import re

from ...core import AccessDenied, ConfigurationError, RetrievalError


def safe_url(url: str) -> str:
    """The URL without its passwords, in the user part or as a parameter (a folder's path as it is)."""
    url = re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)
    return re.sub(r"([?&](?:ssl)?password=)[^&]*", r"\1***", url)


def first_line(exc: Exception) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def data_error(exc: Exception, given: str) -> ConfigurationError:
    """A value PostgreSQL refused, as one line naming what to change."""
    first = first_line(exc)
    if "NUL" in first or "0x00" in first:
        return ConfigurationError(f"PostgreSQL text cannot hold NUL characters; remove them from {given}")
    return ConfigurationError(f"PostgreSQL cannot store this value: {first}; change it in {given} "
                              f"(e.g. a NaN in metadata)")


def foreign_schema(url: str, why: str) -> RetrievalError:
    """The error for a database whose ar_ tables are not an agentic-rag schema (or a damaged one)."""
    return RetrievalError(f"{safe_url(url)} does not hold an agentic-rag knowledge base's schema, or it is "
                          f"damaged ({why}); give a new, empty database (or drop its ar_ tables) and index again")


def no_right(url: str, exc: Exception, doing: str) -> AccessDenied:
    """The one-line error for a role that lacks a right, naming it and who can grant it."""
    first = first_line(exc)
    if "extension" in first.lower():
        fix = "have the database's owner (or a superuser) run CREATE EXTENSION vector; in it, then open it again"
    elif doing == "write":
        fix = ("connect as a role that may write (INSERT, UPDATE, DELETE on the ar_ tables), or only search "
               "with this one")
    else:
        fix = ("open it once as the database's owner, who creates the schema, and grant this role SELECT on the "
               "ar_ tables (and INSERT, UPDATE, DELETE to write)")
    return AccessDenied(f"{safe_url(url)}: this role may not {doing} the knowledge base ({first}); {fix}")
