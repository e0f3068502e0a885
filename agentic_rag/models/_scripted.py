"""A model for tests: queued replies per task, and a record of every call."""
from __future__ import annotations

import json
import threading
from collections import deque

from pydantic import BaseModel

from ..core import ModelError
from ._protocol import ModelRequest, complete_with_repair, count_reply, prompt_tokens


class ScriptedModel:
    """Returns queued replies per task, in order; records every request in `calls`.

    A reply may be a schema instance, a dict, a string (the text of an LLM's reply) or an exception
    (raised). Replies are treated as an LLM's: sent as text, validated against the schema, and an
    invalid one gets one repair attempt, which takes the next queued reply. A reply longer than the
    request's `max_tokens` is cut off (invalid), as a real model's would be. `default` replies serve
    a task whose queue is empty; without one, an empty queue is an error.
    """

    name = "scripted"
    reports_usage = True  # counts every send, repairs and cut-off replies included
    streams = False

    def __init__(self, replies: dict[str, list] | None = None, default: dict | None = None):
        self._queues = {task: deque(items) for task, items in (replies or {}).items()}
        self._default = default or {}
        self._lock = threading.Lock()
        self.calls: list[ModelRequest] = []

    def tasks(self) -> list[str]:
        """The task of every call so far, in order."""
        return [call.task for call in self.calls]

    def _next(self, task: str) -> object:
        with self._lock:
            queue = self._queues.get(task)
            if queue:
                return queue.popleft()
        if task in self._default:
            return self._default[task]
        raise ModelError(f"ScriptedModel has no reply left for task {task!r}; queue one in replies={{{task!r}: [...]}}")

    def complete(self, request: ModelRequest) -> BaseModel:
        """Pop the next reply for the request's task and return it as the schema."""
        return self.complete_with_usage(request)[0]

    def complete_with_usage(self, request: ModelRequest) -> tuple[BaseModel, dict]:
        """The validated reply and its tokens by tiktoken: every send's prompt and reply, a reply
        cut off counting as the limit. A failure carries the same count in its `usage`."""
        with self._lock:
            self.calls.append(request)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}

        def send(messages: list[dict]) -> str:
            text = _as_text(self._next(request.task))
            count_reply(request, prompt_tokens(messages), text, usage=usage)
            return text

        try:
            return complete_with_repair(request, send), usage
        except ModelError as exc:
            exc.usage = usage
            raise


def _as_text(reply: object) -> str:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False, default=str)
