"""What each step returns and each model task must produce (validated with pydantic)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator


class RouteDecision(BaseModel):
    """Where the next round goes, and why."""

    route: Literal["direct", "vector", "multi_hop", "tool"]
    source: Literal["vector", "graph", "pagerank", "web"] = "vector"
    tool: str | None = None
    arguments: dict = Field(default_factory=dict)
    filters: dict = Field(default_factory=dict)
    reason: str = ""
    by: str = "rules"  # "rules" or "model": who decided


class Rewrite(BaseModel):
    """A reformulated search query."""

    query: str
    reason: str = ""


class Condensed(BaseModel):
    """A follow-up question written to stand alone; `readings` are other ways its reference may be
    read, for the knowledge base to decide between (condense_query)."""

    standalone: str
    readings: list[str] = Field(default_factory=list)
    reason: str = ""


class SubQuery(BaseModel):
    """One search of a decomposition; `depends_on` lists the sub-queries it needs first."""

    query: str
    depends_on: list[int] = Field(default_factory=list)


class Decomposition(BaseModel):
    """Sub-queries that together cover the question."""

    subqueries: list[SubQuery] = Field(default_factory=list)
    reason: str = ""


class Grade(BaseModel):
    """Whether the evidence suffices to answer, and what is missing."""

    score: float = Field(ge=0.0, le=1.0)
    sufficient: bool
    missing: list[str] = Field(default_factory=list)
    reason: str = ""
    by: str = "rules"


class Answer(BaseModel):
    """An answer whose [n] markers point into the evidence shown."""

    answer: str
    reason: str = ""


class GradedAnswer(Answer):
    """An answer and, in the same reply, a grade of the evidence it was drawn from: asked for when
    the deterministic check is unsure, so that grading costs no call of its own. A score below the
    threshold sends the loop on to another round or a refusal; at or above it the loop answers, as
    a separate grader's would, and the answer must still pass the faithfulness check. No score:
    the model did not grade."""

    evidence_score: float | None = Field(default=None, ge=0.0, le=1.0)
    missing: list[str] = Field(default_factory=list)
    grade_reason: str = ""

    @field_validator("evidence_score", mode="before")
    @classmethod
    def _unusable_score_is_none(cls, value: object) -> float | None:
        """A score that is no number in [0, 1] is no grade (it is asked apart); the answer still counts."""
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1 else None


class Faithfulness(BaseModel):
    """How well the evidence supports the answer, and whether it answers everything asked."""

    score: float = Field(ge=0.0, le=1.0)
    unsupported: list[str] = Field(default_factory=list)
    complete: bool = True
    missing: list[str] = Field(default_factory=list)
    reason: str = ""
    by: str = "rules"


class Triple(BaseModel):
    """One fact of a passage: subject, relation, object."""

    subject: str
    relation: str
    object: str


class Triples(BaseModel):
    """The facts a passage states, for the knowledge graph."""

    triples: list[Triple] = Field(default_factory=list)
