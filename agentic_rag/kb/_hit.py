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
