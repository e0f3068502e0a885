"""A search hit: the chunk found and why it was found."""
from __future__ import annotations

from pydantic import BaseModel, Field


class Hit(BaseModel):
    """One retrieved chunk with its fused score and its 1-based rank in each retriever."""

    id: str
    doc_id: str
    source: str
    title: str = ""
    text: str
    score: float
    ranks: dict[str, int] = Field(default_factory=dict)
    metadata: dict = Field(default_factory=dict)
    path: list[str] = Field(default_factory=list)  # graph hits: the names that led here


def chunk_hit(chunk: dict, score: float = 0.0, ranks: dict[str, int] | None = None) -> Hit:
    """A stored chunk (a dict with id, doc_id, source, title, text and metadata) as a Hit."""
    return Hit(id=chunk["id"], doc_id=chunk["doc_id"], source=chunk["source"], title=chunk["title"],
               text=chunk["text"], score=score, ranks=ranks or {}, metadata=chunk["metadata"])
