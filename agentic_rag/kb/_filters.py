"""Metadata filters: equality, membership and ranges, applied before ranking.

    {"type": "ticket"}                                   equality
    {"department": ["support", "qa"]}                    membership
    {"date": {"gte": "2024-01-01", "lt": "2025-01-01"}}  range (ISO dates compare as strings)

Every condition must hold. Fields are read from a chunk's metadata, plus `doc_id`, `source`
and `title`. A filter becomes a row mask; a retriever fits the mask to its own row count with
`fit_mask`, because each retriever grows its arrays ahead of the rows in use.
"""
from __future__ import annotations

import operator

import numpy as np

from .._errors import ConfigurationError

_RANGE = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def check_filters(filters: dict | None) -> dict:
    """Validate a filter spec and return it; a bad one raises with the fix."""
    if filters is None:
        return {}
    if not isinstance(filters, dict):
        raise ConfigurationError(f"filters must be a dict like {{'type': 'ticket'}}, not {type(filters).__name__}")
    for field, condition in filters.items():
        if isinstance(condition, dict):
            unknown = set(condition) - set(_RANGE)
            if unknown or not condition:
                raise ConfigurationError(
                    f"filter on {field!r} has unknown range operators {sorted(unknown) or '(none)'}; "
                    f"use {', '.join(_RANGE)}")
    return filters


def _comparable(value, bound):
    """Compare numbers as numbers and everything else as strings."""
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        try:
            return float(value), bound
        except (TypeError, ValueError):
            return None, None
    return str(value), str(bound)


def _holds(value, condition) -> bool:
    if value is None:
        return False
    if isinstance(condition, dict):
        for name, bound in condition.items():
            left, right = _comparable(value, bound)
            if left is None or not _RANGE[name](left, right):
                return False
        return True
    if isinstance(condition, (list, tuple, set, frozenset)):
        return str(value) in {str(c) for c in condition}
    return str(value) == str(condition)


def matches(fields: dict, filters: dict) -> bool:
    """True when every condition in `filters` holds for the given fields."""
    return all(_holds(fields.get(field), condition) for field, condition in filters.items())


def filter_mask(chunks: list[dict | None], filters: dict) -> np.ndarray:
    """One bool per row: the chunk is live and every condition holds for it."""
    return np.array([chunk is not None and matches({**chunk["metadata"], "doc_id": chunk["doc_id"],
                                                    "source": chunk["source"], "title": chunk["title"]}, filters)
                     for chunk in chunks], bool)


def fit_mask(allowed: np.ndarray, length: int) -> np.ndarray:
    """`allowed` cut or padded to `length` rows; a row past its end is not allowed."""
    fitted = np.zeros(length, bool)
    shared = min(length, len(allowed))
    fitted[:shared] = allowed[:shared]
    return fitted
