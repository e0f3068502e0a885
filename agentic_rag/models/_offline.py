"""The offline model: transparent rules in place of a language model, computed from each
request's structured inputs (the rendered messages are ignored). Its answers are extractive."""
from __future__ import annotations

from pydantic import BaseModel

from ..core import GradedAnswer, ModelError, Triples
from ..text import names, split_sentences
from . import _extractive as extractive
from . import _planning as planning
from ._protocol import ModelRequest


def _extract(inputs: dict) -> Triples:
    """Names that share a sentence, related as 'appears with' (the offline graph's own rule)."""
    found = []
    for sentence in split_sentences(inputs["text"]):
        parts = names(sentence)[:12]
        found += [{"subject": a, "relation": "appears with", "object": b}
                  for i, a in enumerate(parts) for b in parts[i + 1:]]
    return Triples.model_validate({"triples": found})


def _generate(inputs: dict) -> GradedAnswer:
    """The extractive answer; asked to grade too, the offline grade of the same evidence with it."""
    answer = extractive.generate(inputs).model_dump()
    if inputs.get("instructions"):
        answer["reason"] += "; the application's instructions were not followed: the offline model only quotes"
    if inputs.get("grading") and inputs.get("evidence"):
        grade = extractive.grade(inputs)
        answer.update(evidence_score=grade.score, missing=grade.missing, grade_reason=grade.reason)
    return GradedAnswer(**answer)


_TASKS = {"condense": planning.condense,
          "route": planning.route, "rewrite": planning.rewrite, "decompose": planning.decompose,
          "grade": extractive.grade, "generate": _generate, "judge": extractive.judge,
          "repair": extractive.repair, "extract": _extract}


class OfflineModel:
    """A real, modest extractive system that needs no network and no weights."""

    name = "offline"
    note = "offline extractive model: answers are sentences quoted from the sources"
    reports_usage = False  # the meter counts its replies with tiktoken
    streams = False        # its answer is handed over whole

    def complete(self, request: ModelRequest) -> BaseModel:
        """Answer the request's task from its inputs."""
        rule = _TASKS.get(request.task)
        if rule is None:
            raise ModelError(f"the offline model has no rule for task {request.task!r}; tasks: {', '.join(_TASKS)}")
        return request.schema.model_validate(rule(request.inputs).model_dump())
