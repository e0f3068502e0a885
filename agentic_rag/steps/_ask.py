"""How a step asks a model: render the prompt, send the request, validate the reply."""
from __future__ import annotations

from pydantic import BaseModel

from ..models.protocol import Model, ModelRequest
from ..prompts import render


def ask(model: Model, task: str, schema: type[BaseModel], inputs: dict) -> BaseModel:
    """One model call for `task`; the same facts go as messages (for LLMs) and as inputs (for rules)."""
    messages = render(task, schema.model_json_schema(), **inputs)
    return model.complete(ModelRequest(task=task, messages=messages, inputs=inputs, schema=schema))
