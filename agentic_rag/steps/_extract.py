"""triple_extractor: a language model reads each chunk into subject-relation-object triples for the graph."""
from __future__ import annotations

from collections.abc import Callable

from ..core import ModelOutputError, Triples
from ..models import Model
from ._ask import ask


def triple_extractor(model: Model) -> Callable[[str, str], list[tuple[str, str, str]]]:
    """A function for KnowledgeBase(extract_triples=...): (title, text) -> triples; a chunk whose
    reply stays invalid after the repair request contributes none."""
    def extract(title: str, text: str) -> list[tuple[str, str, str]]:
        try:
            reply = ask(model, "extract", Triples, {"title": title, "text": text})
        except ModelOutputError:
            return []
        return [(t.subject, t.relation, t.object) for t in reply.triples]

    return extract
