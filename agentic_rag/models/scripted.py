"""A model for tests: queued replies per task, and a record of every call."""
from __future__ import annotations

import json
import threading
from collections import deque

from pydantic import BaseModel

from ..errors import ModelError
from .protocol import ModelRequest, complete_with_repair


class ScriptedModel:
    """Returns queued replies per task, in order; records every request in `calls`.

    A reply may be a schema instance, a dict (validated), a string (parsed like an LLM's text,
    with one repair attempt that takes the next queued reply) or an exception (raised).
    `default` replies serve a task whose queue is empty; without one, an empty queue is an error.
    """

    name = "scripted"

    def __init__(self, replies: dict[str, list] | None = None, default: dict | None = None):
        self._queues = {task: deque(items) for task, items in (replies or {}).items()}
        self._default = default or {}
        self._lock = threading.Lock()
        self.calls: list[ModelRequest] = []

    def tasks(self) -> list[str]:
        """The task of every call so far, in order."""
        return [call.task for call in self.calls]

    def _next(self, task: str):
        with self._lock:
            queue = self._queues.get(task)
            if queue:
                return queue.popleft()
        if task in self._default:
            return self._default[task]
        raise ModelError(f"ScriptedModel has no reply left for task {task!r}; queue one in replies={{{task!r}: [...]}}")

    def complete(self, request: ModelRequest) -> BaseModel:
        """Pop the next reply for the request's task and return it as the schema."""
        with self._lock:
            self.calls.append(request)
        reply = self._next(request.task)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, str):
            first = iter([reply])
            # a repair request takes the next queued reply, as a real model would answer again
            return complete_with_repair(request, lambda _messages: next(first, None) or _as_text(self._next(request.task)))
        if isinstance(reply, BaseModel):
            reply = reply.model_dump()
        return request.schema.model_validate(reply)


def _as_text(reply) -> str:
    if isinstance(reply, Exception):
        raise reply
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    return reply if isinstance(reply, str) else json.dumps(reply)
