"""Answer correctness by containment (the RGB benchmark's rule, as ../shared/data/README.md gives it)."""
from __future__ import annotations

import re
import unicodedata

_LATIN = re.compile(r"[A-Za-z0-9]")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def contains(answer: str, expected: str) -> bool:
    """Case-insensitive containment; a string with Latin letters or digits must stand on word
    boundaries, so "it" does not match inside "with"."""
    answer, expected = _norm(answer), _norm(expected).strip()
    if not expected:
        return False
    if _LATIN.search(expected[0]) or _LATIN.search(expected[-1]):
        left = r"(?<![a-z0-9])" if _LATIN.match(expected[0]) else ""
        right = r"(?![a-z0-9])" if _LATIN.match(expected[-1]) else ""
        return re.search(left + re.escape(expected) + right, answer) is not None
    return expected in answer


def answer_correct(answer: str, parts: list) -> bool:
    """True when, for every required part, at least one of its acceptable strings occurs."""
    if not parts:
        return False
    for part in parts:
        options = [part] if isinstance(part, str) else part
        if not any(contains(answer, option) for option in options):
            return False
    return True
