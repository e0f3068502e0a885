"""A model set sends each task to its own model (a small one to judge, a large one to answer)."""
from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from ._protocol import Model, ModelRequest, answer_text, has_capability


class ModelSet:
    """Implements the model protocol by delegating each task to the model named for it. Both
    capabilities are declared: each call uses the task's model's, or falls back without it."""

    reports_usage = True
    streams = True

    def __init__(self, default: Model, **by_task: Model):
        self.default = default
        self.by_task = by_task
        parts = [f"default={default.name}"] + [f"{task}={model.name}" for task, model in by_task.items()]
        self.name = f"set({', '.join(parts)})"

    def model_for(self, task: str) -> Model:
        """The model that serves `task`."""
        return self.by_task.get(task, self.default)

    def complete(self, request: ModelRequest) -> BaseModel:
        """Forward the request to the task's model."""
        return self.model_for(request.task).complete(request)

    def complete_with_usage(self, request: ModelRequest) -> tuple[BaseModel, dict | None]:
        """Forward, keeping the API usage of models that report it."""
        model = self.model_for(request.task)
        if has_capability(model, "reports_usage"):
            return model.complete_with_usage(request)
        return model.complete(request), None

    def stream_answer(self, request: ModelRequest, on_token: Callable[[str], object]) -> tuple[BaseModel, dict | None]:
        """Stream through the task's model when it can; otherwise hand over the whole answer at once."""
        model = self.model_for(request.task)
        if has_capability(model, "streams"):
            return model.stream_answer(request, on_token)
        reply, usage = self.complete_with_usage(request)
        on_token(answer_text(reply))
        return reply, usage
