"""A per-run meter around any model: calls, tokens and milliseconds per task, and the budget."""
from __future__ import annotations

import threading
import time

from pydantic import BaseModel

from ..accounting import cost_usd, count_tokens
from ..errors import AgenticRAGError
from .protocol import Model, ModelRequest


class BudgetExceeded(AgenticRAGError):
    """The next call would take the run past its token budget."""


def new_usage() -> dict:
    """An empty usage record (JSON-serialisable)."""
    return {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "by_task": {}}


class Meter:
    """Wraps a model for one run. Token counts come from the API's usage when the model reports
    it (`complete_with_usage`), else prompt = the rendered messages and completion = the reply's
    JSON, counted with tiktoken; a call that would pass the budget is refused before it is sent."""

    def __init__(self, model: Model, budget: int | None = None, usage: dict | None = None,
                 prices: dict | None = None):
        self.model = model
        self.budget = budget
        self.usage = usage if usage is not None else new_usage()
        self.prices = prices
        self._lock = threading.Lock()  # independent sub-queries may call from several threads

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def tokens_used(self) -> int:
        """Prompt plus completion tokens so far."""
        return self.usage["prompt_tokens"] + self.usage["completion_tokens"]

    def complete(self, request: ModelRequest) -> BaseModel:
        """Forward the request, counting it; raise BudgetExceeded before a call that cannot fit."""
        return self._call(request, None)

    def stream_answer(self, request: ModelRequest, on_token) -> tuple[BaseModel, None]:
        """As complete, handing the answer to `on_token` as the model produces it (whole, if it cannot stream)."""
        return self._call(request, on_token), None

    def _call(self, request: ModelRequest, on_token) -> BaseModel:
        prompt = sum(count_tokens(m.get("content", "")) for m in request.messages)
        with self._lock:
            if self.budget is not None and self.tokens_used + prompt > self.budget:
                raise BudgetExceeded(f"{request.task} needs {prompt} prompt tokens; {self.tokens_used} of "
                                     f"{self.budget} are used")
        start = time.perf_counter()
        with_usage = getattr(self.model, "complete_with_usage", None)
        if on_token is not None and hasattr(self.model, "stream_answer"):
            reply, reported = self.model.stream_answer(request, on_token)
        else:
            reply, reported = with_usage(request) if with_usage else (self.model.complete(request), None)
            if on_token is not None:
                on_token(reply.answer)
        ms = (time.perf_counter() - start) * 1000
        completion = count_tokens(reply.model_dump_json())
        cost = cost_usd(self.model.name, prompt, completion, self.prices)
        if reported and reported.get("prompt_tokens"):  # the API's own count wins over ours
            prompt, completion = reported["prompt_tokens"], reported["completion_tokens"]
            cost = reported.get("cost_usd", cost_usd(self.model.name, prompt, completion, self.prices))
        with self._lock:
            usage = self.usage
            usage["model_calls"] += 1
            usage["prompt_tokens"] += prompt
            usage["completion_tokens"] += completion
            usage["cost_usd"] += cost
            task = usage["by_task"].setdefault(request.task, {"calls": 0, "prompt_tokens": 0,
                                                              "completion_tokens": 0, "ms": 0.0})
            task["calls"] += 1
            task["prompt_tokens"] += prompt
            task["completion_tokens"] += completion
            task["ms"] = round(task["ms"] + ms, 3)
        return reply
