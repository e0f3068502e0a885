"""Metadata filters: equality, membership and ranges, applied before ranking.

    {"type": "ticket"}                                   equality
    {"department": ["support", "qa"]}                    membership
    {"date": {"gte": "2024-01-01", "lt": "2025-01-01"}}  range (ISO dates compare as strings)

Every condition must hold. Fields are read from a chunk's metadata, plus `doc_id`, `source`
and `title`. A metadata value that is a list (a document in several groups: {"groups": ["hr",
"all"]}) meets a condition when any of its members does. In a filter, a value, a member of a
list and a range bound are each one text, number or true/false, so a filter is at most two
levels deep. A filter's size is bounded before any chunk
is looked at (`check_filters`: both backends and the service check filters there). A filter
becomes a row mask; a retriever fits the mask to its own row count with `fit_mask`, because
each retriever grows its arrays ahead of the rows in use.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...core import ConfigurationError

_RANGE = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}
_LISTS = (list, tuple, set, frozenset)
MAX_FILTER_VALUES = 1_000   # values in one filter, all fields together (a field's value or bound is one)
MAX_FILTER_TEXT = 4_096     # characters in one text value or field name: a long path's length
MAX_FILTER_CHARS = 100_000  # characters in all of one filter's texts together
_MAX_INTEGER = 10 ** 100    # an integer's size (Python's are unbounded; its text would be compared)


def check_filters(filters: dict | None) -> dict:
    """Validate a filter spec and return it; a bad one raises with the fix."""
    if filters is None:
        return {}
    if not isinstance(filters, dict):
        raise ConfigurationError(f"filters must be a dict like {{'type': 'ticket'}}, not {type(filters).__name__}")
    count = filter_values(filters)  # counted before any value is read
    if count > MAX_FILTER_VALUES:
        raise ConfigurationError(f"the filters hold {count} values (every field's value, list member and range "
                                 f"bound counts); the limit is {MAX_FILTER_VALUES}: filter on fewer values")
    chars = 0
    for field, condition in filters.items():
        chars += _check_condition(field, condition)
        if chars > MAX_FILTER_CHARS:
            raise ConfigurationError(f"the filters' texts hold more than {MAX_FILTER_CHARS:,} characters in all; "
                                     f"filter on fewer or shorter values")
    return filters


def filter_values(filters: dict) -> int:
    """How many values a filter holds (each field's value, list member and range bound; an empty
    list is one), from the lengths alone; past MAX_FILTER_VALUES fields, just the field count."""
    if len(filters) > MAX_FILTER_VALUES:
        return len(filters)
    return sum(max(len(c), 1) if isinstance(c, (dict, *_LISTS)) else 1 for c in filters.values())


def _check_condition(field: str, condition: Any) -> int:
    """Check one field's condition; the number of characters its texts hold."""
    if not isinstance(field, str):
        raise ConfigurationError(f"filter field {field!r} is a {type(field).__name__}; field names are texts")
    chars = _check_value(field, field, "its name")
    if isinstance(condition, dict):
        unknown = set(condition) - set(_RANGE)
        if unknown or not condition:
            named = sorted(str(name)[:40] for name in unknown)
            raise ConfigurationError(
                f"filter on {field[:80]!r} has unknown range operators {named[:5] or '(none)'}"
                f"{' and more' if len(named) > 5 else ''}; use {', '.join(_RANGE)}")
        return chars + sum(_check_value(field, bound, f"its {name!r} bound") for name, bound in condition.items())
    if isinstance(condition, _LISTS):
        return chars + sum(_check_value(field, value, "a list member") for value in condition)
    return chars + _check_value(field, condition, "its value")


def _check_value(field: str, value: Any, what: str) -> int:
    """Refuse anything but one text, number or true/false; the characters a text holds."""
    where = f"filter on {field[:80]!r}: {what}"
    if isinstance(value, (dict, *_LISTS)):
        raise ConfigurationError(f"{where} is a {type(value).__name__}; it must be one text, number or true/false "
                                 f"(for any of several values give the field a list: {{'doc_id': ['a', 'b']}})")
    if not isinstance(value, (str, int, float)):  # bool is an int
        raise ConfigurationError(f"{where} is a {type(value).__name__}; give a text, number or true/false "
                                 f"(a date as its ISO text, '2026-03-10')")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"{where} is {value}; give a finite number")
    if isinstance(value, int) and abs(value) > _MAX_INTEGER:
        raise ConfigurationError(f"{where} is an integer of more than 100 digits; give a smaller one")
    if isinstance(value, str) and len(value) > MAX_FILTER_TEXT:
        raise ConfigurationError(f"{where} holds {len(value):,} characters; the limit is {MAX_FILTER_TEXT:,}")
    return len(value) if isinstance(value, str) else 0


def _comparable(value: Any, bound: Any) -> tuple[Any, Any]:
    """Compare numbers as numbers and everything else as strings."""
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        try:
            return float(value), bound
        except (TypeError, ValueError):
            return None, None
    return str(value), str(bound)


def _test(condition: Any) -> Callable[[object], bool]:
    """One field's condition as a test of its value, built once for every chunk it is tried on
    (a membership list becomes a set: a lookup per chunk, not a pass over the list)."""
    if isinstance(condition, dict):
        bounds = [(_RANGE[name], bound) for name, bound in condition.items()]

        def in_range(value: Any) -> bool:
            for holds, bound in bounds:
                left, right = _comparable(value, bound)
                if left is None or not holds(left, right):
                    return False
            return True
        return in_range
    if isinstance(condition, _LISTS):
        members = frozenset(str(c) for c in condition)
        return lambda value: str(value) in members
    wanted = str(condition)
    return lambda value: str(value) == wanted


def compile_filters(filters: dict, every_member: bool = False) -> Callable[[dict], bool]:
    """A test of a chunk's fields: true when every condition in (checked) `filters` holds; a list
    value holds a condition when one of its members does, or with `every_member` when it has
    members and each does (a document wholly inside a scope, not only partly)."""
    tests = [(field, _test(condition)) for field, condition in filters.items()]
    some = all if every_member else any

    def holds(value: object, test: Callable[[object], bool]) -> bool:
        if isinstance(value, _LISTS):
            return bool(value) and some(member is not None and test(member) for member in value)
        return value is not None and test(value)
    return lambda fields: all(holds(fields.get(field), test) for field, test in tests)


def matches(fields: dict, filters: dict, every_member: bool = False) -> bool:
    """True when every condition in `filters` holds for the given fields (compile_filters)."""
    return compile_filters(filters, every_member)(fields)


def chunk_fields(chunk: dict) -> dict:
    """A stored chunk's fields as filters read them: its metadata, doc_id, source and title."""
    return {**chunk["metadata"], "doc_id": chunk["doc_id"], "source": chunk["source"], "title": chunk["title"]}


def document_page(docs: Mapping[str, dict], chunks: list[dict | None], after: str, limit: int,
                  filters: Sequence[dict]) -> list[dict]:
    """Up to `limit` of `docs` (doc id -> {"rows": [...]}) after `after`, in code-point order, each with
    a live chunk every filter keeps: {"doc_id", "title", "source", "chunks"} (the first kept chunk's
    title and source, and how many are kept)."""
    page: list[dict] = []
    for doc_id in sorted(d for d in docs if d > after):
        if len(page) == limit:
            break
        if kept := kept_chunks(chunks, docs[doc_id]["rows"], filters):
            page.append({"doc_id": doc_id, "title": kept[0]["title"], "source": kept[0]["source"],
                         "chunks": len(kept)})
    return page


def kept_chunks(chunks: list[dict | None], rows: list[int], filters: Sequence[dict]) -> list[dict]:
    """The live chunks at `rows` that every filter keeps, in row order."""
    tests = [compile_filters(f) for f in filters if f]
    return [chunk for row in sorted(rows)
            if (chunk := chunks[row]) is not None and all(test(chunk_fields(chunk)) for test in tests)]


def filter_mask(chunks: list[dict | None], filters: dict) -> np.ndarray:
    """One bool per row: the chunk is live and every condition holds for it."""
    holds = compile_filters(filters)
    return np.array([chunk is not None and holds(chunk_fields(chunk)) for chunk in chunks], bool)


def fit_mask(allowed: np.ndarray, length: int) -> np.ndarray:
    """`allowed` cut or padded to `length` rows; a row past its end is not allowed."""
    fitted = np.zeros(length, bool)
    shared = min(length, len(allowed))
    fitted[:shared] = allowed[:shared]
    return fitted
