"""A per-run meter around any model: calls, tokens and milliseconds per task, and the budget."""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..core import BudgetExceeded, Config, cost_usd, new_usage, tracing
from ._protocol import (
    Model,
    ModelRequest,
    answer_text,
    budget_tokens,
    count_reply,
    has_capability,
    prompt_tokens,
    reply_tokens,
    shown,
    trusted_tokens,
)

__all__ = ["BudgetExceeded", "Meter", "new_usage", "margin"]

MIN_REPLY = 32  # a call whose reply could not have even this many tokens is not made: it would be cut off


def margin(prompt: int, messages: int) -> int:
    """Room kept for a provider that counts a prompt higher than tiktoken does: its chat framing
    (about 4 tokens a message; 8 are kept) and a tenth of the prompt for another tokenizer, or a
    schema a structured-output server adds to the prompt."""
    return prompt // 10 + 8 * messages


class Meter:
    """Wraps a model for one run. Token counts come from the model's usage when it reports it
    (`reports_usage`: an API's counts, or the scripted model's) and the counts can be true (see
    trusted_tokens), else prompt = the rendered messages and completion = the reply's JSON, counted
    with tiktoken; tiktoken's count of every call is kept too (`counted_*`), and the model's own
    (`reported_*`, even a count too large to bill). Each call gets a completion limit,
    `max_completion_tokens` or what the budget has left (by `budget_used`) after its prompt and a
    margin if that is less; a call that cannot fit is refused before it is sent, and a call after
    which the billed or the reported count passes the budget ends the run (BudgetExceeded). Each
    call carries the run's `deadline` (time.monotonic()), which a model that waits on a server keeps."""

    reports_usage = False  # its counts are in `usage`, not returned per call
    streams = True         # stream_answer streams when the model does, else hands the answer over whole

    def __init__(self, model: Model, budget: int | None = None, usage: dict | None = None,
                 prices: dict | None = None, max_completion_tokens: int = Config.max_completion_tokens,
                 deadline: float | None = None):
        self.model = model
        self.budget = budget
        self.usage = usage if usage is not None else new_usage()
        for key, value in new_usage().items():  # a state saved before these keys existed
            self.usage.setdefault(key, value)
        self.prices = prices
        self.max_completion_tokens = max_completion_tokens
        self.deadline = deadline
        self._lock = threading.Lock()  # independent sub-queries may call from several threads

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def tokens_used(self) -> int:
        """Prompt plus completion tokens so far."""
        return self.usage["prompt_tokens"] + self.usage["completion_tokens"]

    @property
    def budget_used(self) -> int:
        """What the budget is checked against: the billed tokens, or the servers' own count when it is
        more (a provider bills by its count, even one too large to believe, which is billed by tiktoken's)."""
        return max(self.tokens_used, self.usage["reported_prompt_tokens"] + self.usage["reported_completion_tokens"])

    def complete(self, request: ModelRequest) -> BaseModel:
        """Forward the request, counting it; raise BudgetExceeded before a call that cannot fit."""
        return self._call(request, None)

    def stream_answer(self, request: ModelRequest, on_token: Callable[[str], object]) -> tuple[BaseModel, None]:
        """As complete, handing the answer to `on_token` as the model produces it (whole, if it cannot stream)."""
        return self._call(request, on_token), None

    def limit(self, request: ModelRequest) -> ModelRequest:
        """The request with its completion limit and allowance set from the budget, and the run's
        deadline; BudgetExceeded when the prompt and a minimal reply do not fit in what is left."""
        prompt = prompt_tokens(request.messages)
        if self.budget is None:
            return dataclasses.replace(request, max_tokens=self.max_completion_tokens, allowance=None,
                                       deadline=self.deadline)
        with self._lock:
            allowance = self.budget - self.budget_used - margin(prompt, len(request.messages))
        limit = min(self.max_completion_tokens, allowance - prompt)
        if limit < min(MIN_REPLY, self.max_completion_tokens):
            raise BudgetExceeded(f"{request.task} needs {prompt} prompt tokens and room for a reply; "
                                 f"{self.budget_used} of {self.budget} are used")
        return dataclasses.replace(request, max_tokens=limit, allowance=allowance, deadline=self.deadline)

    def _call(self, request: ModelRequest, on_token: Callable[[str], object] | None) -> BaseModel:
        request = self.limit(request)
        with tracing.span(f"chat {self.model.name}", {"gen_ai.operation.name": "chat", "gen_ai.request.model":
                                                    self.model.name, "agentic_rag.task": request.task},
                        kind="client") as span:
            before = self.usage["prompt_tokens"], self.usage["completion_tokens"], self.usage["cost_usd"]
            reply = self._metered(request, on_token)
            tracing.set_attributes(span, {"gen_ai.usage.input_tokens": self.usage["prompt_tokens"] - before[0],
                                        "gen_ai.usage.output_tokens": self.usage["completion_tokens"] - before[1],
                                        "agentic_rag.cost_usd": self.usage["cost_usd"] - before[2]})
            return reply

    def _metered(self, request: ModelRequest, on_token: Callable[[str], object] | None) -> BaseModel:
        prompt, start = prompt_tokens(request.messages), time.perf_counter()
        try:
            if on_token is not None and has_capability(self.model, "streams"):
                reply, reported = self.model.stream_answer(request, on_token)
                on_token = None
            elif has_capability(self.model, "reports_usage"):
                reply, reported = self.model.complete_with_usage(request)
            else:
                reply, reported = self.model.complete(request), None
            text = reply.model_dump_json()
            if not (reported and reported.get("prompt_tokens")):  # the model did not count: a reply past the limit
                count_reply(request, prompt, text)                  # is invalid (raises), as an API's would be
            own = _counted(reported) or {"prompt_tokens": prompt, "completion_tokens": min(
                reply_tokens(text, request.max_tokens), request.max_tokens)}
        except Exception as exc:  # a failed call is metered like any other
            spent = getattr(exc, "usage", None) or {}
            own = _counted(spent) or (spent if trusted_tokens(spent.get("prompt_tokens"), spent.get(
                "completion_tokens", 0)) else {"prompt_tokens": prompt, "completion_tokens": 0})
            self._record(request.task, spent, own, start)
            self._within_budget(request.task, exc)
            raise
        self._record(request.task, reported, own, start)
        self._within_budget(request.task)
        if on_token is not None:
            on_token(answer_text(reply))
        return reply

    def _within_budget(self, task: str, cause: Exception | None = None) -> None:
        """A call the model counted past the budget (a provider's count above the margin) ends the run."""
        if self.budget is not None and self.budget_used > self.budget:
            raise BudgetExceeded(f"the {task} call was counted past the budget by the model's server: "
                                 f"{self.budget_used} of {self.budget} tokens are used") from cause

    def _record(self, task: str, reported: dict | None, own: dict, start: float) -> None:
        """Add one call: billed by the model's own count when it can be as sent, else by tiktoken's
        (`own`); the model's own whole count is kept (reported_*) either way."""
        ms = (time.perf_counter() - start) * 1000
        reported = reported or {}
        invalid = list(reported.get("invalid_usage", []))
        figures: tuple[Any, Any] = (reported.get("prompt_tokens"), reported.get("completion_tokens", 0))  # as sent
        trusted = bool(figures[0]) and trusted_tokens(*figures)
        if figures[0] and not trusted:
            invalid.append({"task": task, "prompt_tokens": shown(figures[0]), "completion_tokens": shown(figures[1])})
        prompt, completion = figures if trusted else (own["prompt_tokens"], own["completion_tokens"])
        if "counted_prompt_tokens" in reported:  # the API client keeps its server's figures apart
            sent = (reported.get("reported_prompt_tokens", 0), reported.get("reported_completion_tokens", 0))
        else:  # other models' figures are their own
            sent = (budget_tokens(figures[0]), budget_tokens(figures[1]))
        cost = reported.get("cost_usd") if trusted and "cost_usd" in reported else \
            cost_usd(self.model.name, prompt, completion, self.prices)
        with self._lock:
            usage = self.usage
            usage["model_calls"] += 1
            usage["prompt_tokens"] += prompt
            usage["completion_tokens"] += completion
            usage["cost_usd"] += cost
            usage["counted_prompt_tokens"] += own["prompt_tokens"]
            usage["counted_completion_tokens"] += own["completion_tokens"]
            usage["reported_prompt_tokens"] += sent[0]
            usage["reported_completion_tokens"] += sent[1]
            usage["invalid_usage"] += invalid
            if self.budget is not None and self.budget_used > self.budget:  # a provider counted past our margin
                usage["overshoot_tokens"] = self.budget_used - self.budget
            by_task = usage["by_task"].setdefault(task, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                         "ms": 0.0})
            by_task["calls"] += 1
            by_task["prompt_tokens"] += prompt
            by_task["completion_tokens"] += completion
            by_task["ms"] = round(by_task["ms"] + ms, 3)


def _counted(reported: dict | None) -> dict | None:
    """tiktoken's count of every request a model sent for one call, when it kept one (the API client does)."""
    if reported and "counted_prompt_tokens" in reported:
        return {"prompt_tokens": reported["counted_prompt_tokens"],
                "completion_tokens": reported["counted_completion_tokens"]}
    return None
