"""The one model protocol: a request carries the task, the rendered messages, the same facts as
structured inputs, and the schema the reply must fit."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol

from pydantic import BaseModel, ValidationError

from ..errors import ModelOutputError

TASKS = ("route", "rewrite", "decompose", "grade", "generate", "judge", "repair", "extract")


@dataclass(frozen=True)
class ModelRequest:
    """One call: `messages` are what an LLM sees; `inputs` are the same facts for rule-based models."""

    task: str
    messages: list[dict]
    inputs: dict = field(default_factory=dict)
    schema: type[BaseModel] = BaseModel


class Model(Protocol):
    """Anything that answers a ModelRequest with an instance of its schema."""

    name: str

    def complete(self, request: ModelRequest) -> BaseModel:
        """Reply to one request (raise ModelError or ModelOutputError on failure)."""


def parse_reply(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate a model's text reply against the schema; JSON may sit inside a code fence or prose."""
    candidate = text.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", candidate, re.S)
    if fenced:
        candidate = fenced.group(1)
    elif not candidate.startswith("{"):
        start, end = candidate.find("{"), candidate.rfind("}")
        candidate = candidate[start:end + 1] if 0 <= start < end else candidate
    try:
        return schema.model_validate(json.loads(candidate))
    except (ValueError, ValidationError) as exc:
        raise ModelOutputError(f"reply does not fit {schema.__name__}: {str(exc).splitlines()[0]}") from None


def complete_with_repair(request: ModelRequest, send: Callable[[list[dict]], str]) -> BaseModel:
    """Send the messages; on an invalid reply ask once for a corrected one, then raise."""
    reply = send(request.messages)
    try:
        return parse_reply(reply, request.schema)
    except ModelOutputError as first:
        fix = (f"Your reply was not valid: {first}. Reply again with only a JSON object that fits this "
               f"schema:\n{json.dumps(request.schema.model_json_schema())}")
        messages = request.messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": fix}]
        return parse_reply(send(messages), request.schema)
