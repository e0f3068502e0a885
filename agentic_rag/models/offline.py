"""The offline model: transparent rules in place of a language model, computed from each
request's structured inputs (the rendered messages are ignored). Its answers are extractive."""
from __future__ import annotations

from pydantic import BaseModel

from ..errors import ModelError
from . import extractive, planning
from .protocol import ModelRequest

_TASKS = {"route": planning.route, "rewrite": planning.rewrite, "decompose": planning.decompose,
          "grade": extractive.grade, "generate": extractive.generate, "judge": extractive.judge,
          "repair": extractive.repair}


class OfflineModel:
    """A real, modest extractive system that needs no network and no weights."""

    name = "offline"
    note = "offline extractive model: answers are sentences quoted from the sources"

    def complete(self, request: ModelRequest) -> BaseModel:
        """Answer the request's task from its inputs."""
        rule = _TASKS.get(request.task)
        if rule is None:
            raise ModelError(f"the offline model has no rule for task {request.task!r}; tasks: {', '.join(_TASKS)}")
        return request.schema.model_validate(rule(request.inputs).model_dump())
