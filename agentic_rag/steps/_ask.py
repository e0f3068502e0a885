"""How a step asks a model: render the prompt, send the request, validate the reply."""
from __future__ import annotations

from pydantic import BaseModel

from .._prompts import render
from ..models._protocol import Model, ModelRequest, has_capability


def ask(model: Model, task: str, schema: type[BaseModel], inputs: dict, on_token=None) -> BaseModel:
    """One model call for `task`; the same facts go as messages (for LLMs) and as inputs (for rules).
    `on_token` (generation only) receives the answer as it is produced, or whole from a model
    that cannot stream."""
    messages = render(task, schema.model_json_schema(), **inputs)
    request = ModelRequest(task=task, messages=messages, inputs=inputs, schema=schema)
    if on_token is None:
        return model.complete(request)
    if has_capability(model, "streams"):
        return model.stream_answer(request, on_token)[0]
    reply = model.complete(request)
    on_token(reply.answer)
    return reply
