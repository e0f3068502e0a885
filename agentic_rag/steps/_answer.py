"""generate_answer and the citation check: every [n] must point at evidence that was shown."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..core import Answer, Evidence, GradedAnswer, ModelOutputError
from ..kb.embedders import Embedder
from ..models import Model
from ._ask import ask
from ._prompts import GRADING

_CITATION = re.compile(r"\s?\[(\d+)\]")


def generate_answer(question: str, evidence: Sequence[Evidence], model: Model, parts: Sequence[str] = (),
                    weights: dict[str, float] | None = None, on_token: Callable[[str], object] | None = None,
                    grade: bool = False, embedder: Embedder | None = None, instructions: str = "") -> Answer:
    """An answer citing the evidence as [1] [2]...; `parts` are the sub-questions it must cover,
    `weights` the key terms' idf; `on_token` receives the draft as it is generated. With `grade`,
    the same reply grades the evidence too (a GradedAnswer; see folded_grade). `embedder` (the
    knowledge base's) goes to the model with the inputs: a rule-based model may rank sentences with
    it; a language model's prompt does not carry it. `instructions` (a chat's system message) go
    to the model as a system message of their own."""
    schema = GradedAnswer if grade else Answer
    inputs: dict = {"question": question, "evidence": evidence, "parts": list(parts), "weights": weights or {},
              "grading": GRADING if grade else ""}
    if embedder is not None:
        inputs["embedder"] = embedder
    if instructions:
        inputs["instructions"] = instructions
    try:
        return ask(model, "generate", schema, inputs, on_token)
    except ModelOutputError as exc:
        return schema(answer="", reason=f"fallback: {exc}")


def verify_citations(answer: str, evidence: Sequence[Evidence]) -> tuple[str, list[dict], list[int]]:
    """Remove markers that point at no evidence; return the answer, the cited evidence (each with
    its number `n`) and the removed numbers."""
    removed = sorted({int(n) for n in _CITATION.findall(answer) if not 0 < int(n) <= len(evidence)})
    cleaned = _CITATION.sub(lambda m: m.group(0) if 0 < int(m.group(1)) <= len(evidence) else "", answer)
    cited = sorted({int(n) for n in _CITATION.findall(cleaned)})
    citations = [dict(evidence[n - 1], n=n) for n in cited]
    return cleaned.strip(), citations, removed


def number_citations(answer: str, citations: Sequence[dict]) -> tuple[str, list[dict]]:
    """The final answer and its citations numbered 1..k in the order the answer first cites them,
    each marker rewritten to match: a marker is its evidence's position in what the model was shown,
    so an answer citing only [2] becomes one citing [1], and [3] then [1] become [1] then [2].
    Markers that name no citation are left as they are; so is an answer with no citations."""
    by_position = {c["n"]: c for c in citations}
    order: dict[int, int] = {}
    for marker in _CITATION.finditer(answer):
        if (position := int(marker.group(1))) in by_position:
            order.setdefault(position, len(order) + 1)

    def renumber(marker: re.Match) -> str:
        position = int(marker.group(1))
        return marker.group(0).replace(f"[{position}]", f"[{order[position]}]") if position in order \
            else marker.group(0)

    return _CITATION.sub(renumber, answer), [dict(by_position[p], n=n) for p, n in order.items()]
