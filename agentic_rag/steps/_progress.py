"""detect_convergence and detect_stall: whether a round moved the evidence on, from its ids and texts alone."""
from __future__ import annotations

from ..core import Evidence
from ..text import adds_needed


def detect_convergence(round_no: int, top: list[str], last_top: list[str], new_ids: list[str],
                       threshold: float = 0.8) -> bool:
    """Whether a round after the first found nothing new, or its best passage ids (`top`) overlap the
    round before's (`last_top`) by a Jaccard index of at least `threshold`."""
    overlap = len(set(top) & set(last_top)) / max(1, len(set(top) | set(last_top)))
    return round_no > 1 and (not new_ids or overlap >= threshold)


def detect_stall(question: str, grade: dict | None, missing: list[str], graded: list[Evidence],
                 found: list[Evidence]) -> bool:
    """Whether a round under an insufficient `grade` of the `graded` evidence brings into view
    (`found`: its best passages) none that holds a key term of the question, or of what was
    `missing`, that the graded evidence lacked: grading again could only say the same."""
    return bool(grade and not grade["sufficient"] and not adds_needed(question, missing, graded, found))
