"""How a step asks a model: render the prompt, send the request, validate the reply."""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from pydantic import BaseModel

from ..models import Model, ModelRequest, answer_text, has_capability
from ._prompts import render

Reply = TypeVar("Reply", bound=BaseModel)


def ask(model: Model, task: str, schema: type[Reply], inputs: dict,
        on_token: Callable[[str], object] | None = None) -> Reply:
    """One model call for `task`; the same facts go as messages (for LLMs) and as inputs (for rules).
    `on_token` (generation only) receives the answer as it is produced, or whole from a model
    that cannot stream."""
    messages = render(task, schema.model_json_schema(), **inputs)
    request = ModelRequest(task=task, messages=messages, inputs=inputs, schema=schema)
    if on_token is None:
        return _as_schema(model.complete(request), schema)
    if has_capability(model, "streams"):
        return _as_schema(model.stream_answer(request, on_token)[0], schema)
    reply = model.complete(request)
    on_token(answer_text(reply))
    return _as_schema(reply, schema)


def _as_schema(reply: BaseModel, schema: type[Reply]) -> Reply:
    """The reply as the type it is: the model protocol promises an instance of the request's schema."""
    return cast(Reply, reply)
