"""OpenAI-compatible chat models (OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama): structured
output with fallbacks, a completion limit on every request, retries and waits cut to the run's
deadline, usage and cost from the API (checked), clear errors. The `openai` SDK is imported where
a call is made, not at import."""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..core import (
    ConfigurationError,
    DeadlineExceeded,
    Endpoint,
    ModelError,
    bounded,
    call_error,
    cost_usd,
    make_client,
    send,
)
from ._protocol import (
    ModelRequest,
    budget_tokens,
    complete_with_repair,
    count_reply,
    prompt_tokens,
    reply_tokens,
    shown,
    trusted_tokens,
)

if TYPE_CHECKING:
    from openai.types import CompletionUsage

JUDGE_TASKS = ("condense", "route", "grade", "judge", "decompose", "rewrite", "repair")
_MODES = ("json_schema", "json_object", "text")  # tried in this order; a server that refuses one gets the next
_MODE_WORDS = ("response_format", "json_schema", "json_object")  # what a 400 refusing an output mode names
_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")  # the current name of the completion limit, then the old one


@dataclass
class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible endpoint. `temperature` maps task to temperature
    (judging tasks default to 0); `price` is USD per million (input, output) tokens."""

    model: str
    endpoint: Endpoint = field(default_factory=Endpoint)
    temperature: dict = field(default_factory=dict)
    default_temperature: float = 0.2
    price: tuple[float, float] = (0.0, 0.0)

    reports_usage = True  # the API's token counts, priced (not annotated: capabilities are not dataclass fields)
    streams = True        # generation as server-sent events

    def __post_init__(self) -> None:
        if not self.model or self.model == "offline":
            raise ConfigurationError(f"OpenAIChatModel needs a model name, not {self.model!r}")
        self.name = self.model
        self._client = make_client(self.endpoint)
        self._mode = _MODES[0]
        self._limit_field = _LIMIT_FIELDS[0]
        self._lock = threading.Lock()

    def _temperature(self, task: str) -> float:
        return self.temperature.get(task, 0.0 if task in JUDGE_TASKS else self.default_temperature)

    def _create(self, request: ModelRequest, **kwargs: Any) -> Any:
        """One API call with the request's completion limit, in the field this endpoint takes (its reply
        is the SDK's ChatCompletion, or a Stream of chunks when `kwargs` ask to stream: hence Any). Only a
        400 whose message names max_completion_tokens is retried, once, with max_tokens; a retry that
        succeeds makes this model object send max_tokens from then on, as it keeps the output mode."""
        import openai

        field = self._limit_field
        try:
            return self._send(request, **kwargs, **{field: request.max_tokens})
        except openai.BadRequestError as exc:
            if field != _LIMIT_FIELDS[0] or not _names(exc, (field,)):
                raise
        response = self._send(request, **kwargs, **{_LIMIT_FIELDS[1]: request.max_tokens})
        self._keep("_limit_field", _LIMIT_FIELDS, _LIMIT_FIELDS[1])
        return response

    def _send(self, request: ModelRequest, **kwargs: Any) -> Any:
        """One request with the endpoint's retries, each try and pause cut to the request's deadline."""
        return send(self.endpoint, f"the {request.task} call to {self.model}", request.deadline,
                    lambda timeout: self._client.chat.completions.create(**kwargs, timeout=timeout))

    def _keep(self, attribute: str, order: tuple, value: str) -> None:
        """Remember a setting that worked; a later one in `order` another call found first stays."""
        with self._lock:
            if order.index(value) > order.index(getattr(self, attribute)):
                setattr(self, attribute, value)

    def _chat(self, request: ModelRequest, messages: list[dict], usage: dict) -> str:
        """One reply's text in the first output mode this server takes, starting from the one kept: a 400
        that names the response format moves to the next mode; any other error is raised."""
        import openai

        mode = self._mode
        while True:
            try:
                response = self._create(request, **self._arguments(request, messages, mode))
                break
            except openai.BadRequestError as exc:
                if mode == _MODES[-1] or not _names(exc, _MODE_WORDS):
                    raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
                mode = _MODES[_MODES.index(mode) + 1]
            except openai.OpenAIError as exc:
                raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
        self._keep("_mode", _MODES, mode)
        choice = response.choices[0]
        text = choice.message.content or ""
        _count(request, messages, text, choice.finish_reason, response.usage, usage)
        return text

    def _arguments(self, request: ModelRequest, messages: list[dict], mode: str) -> dict:
        kwargs = {"model": self.model, "messages": messages, "temperature": self._temperature(request.task)}
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.schema.__name__, "schema": request.schema.model_json_schema()}}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _priced(self, usage: dict) -> dict:
        return dict(usage, cost_usd=cost_usd(self.model, usage["prompt_tokens"], usage["completion_tokens"],
                                             {self.model: self.price}))

    def complete_with_usage(self, request: ModelRequest) -> tuple[BaseModel, dict]:
        """The validated reply (one repair request on invalid output) and the API's token usage; a
        failure carries the usage of the requests it made."""
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        try:
            reply = complete_with_repair(request, lambda messages: self._chat(request, messages, usage))
        except ModelError as exc:
            exc.usage = self._priced(usage)
            raise
        return reply, self._priced(usage)

    def complete(self, request: ModelRequest) -> BaseModel:
        """The validated reply."""
        return self.complete_with_usage(request)[0]

    def stream_answer(self, request: ModelRequest, on_token: Callable[[str], object]) -> tuple[BaseModel, dict]:
        """Generate as plain text, handing each piece to `on_token` as it arrives (server-sent events)."""
        import openai

        messages = request.messages + [{"role": "user", "content": "Reply with the answer text only, with its [n] "
                                                                    "citations; no JSON."}]
        pieces, finish, reported = [], None, None
        what = f"the streamed {request.task} call to {self.model}"
        try:
            stream = self._create(request, model=self.model, messages=messages, stream=True,
                                  temperature=self._temperature(request.task), stream_options={"include_usage": True})
            for chunk in bounded(request.deadline, what, lambda: stream):  # a stream that stalls is closed
                reported = chunk.usage or reported
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_token(choice.delta.content)
        except openai.OpenAIError as exc:
            raise call_error(exc, what, self.endpoint) from None
        except DeadlineExceeded as exc:  # what came before the deadline is counted, by tiktoken (no server count)
            limit = request.max_tokens
            counted = (prompt_tokens(messages), min(reply_tokens("".join(pieces), limit), limit))
            exc.usage = self._priced({"prompt_tokens": counted[0], "completion_tokens": counted[1],
                                      "counted_prompt_tokens": counted[0], "counted_completion_tokens": counted[1]})
            raise
        text, usage = "".join(pieces), {"prompt_tokens": 0, "completion_tokens": 0}
        try:
            _count(request, messages, text, finish, reported, usage)
        except ModelError as exc:
            exc.usage = self._priced(usage)
            raise
        return request.schema.model_validate({"answer": text.strip()}), self._priced(usage)


def _names(exc: Exception, words: tuple[str, ...]) -> bool:
    """Whether an error's message names one of `words` (a server refusing a field names it)."""
    message = str(getattr(exc, "message", exc)).lower()
    return any(word in message for word in words)


def _count(request: ModelRequest, messages: list[dict], text: str, finish: str | None,
           reported: CompletionUsage | None, usage: dict) -> None:
    """Add one request's tokens to `usage`: billed by the server's counts, or by tiktoken's when it
    sends none or counts that cannot be billed as sent (listed in usage["invalid_usage"]). The server's
    own whole counts, however large, are kept apart (reported_*: the meter budgets by them too); a
    reply the server cut off (finish "length") or past the limit raises (count_reply)."""
    sent: tuple[Any, Any] = (getattr(reported, "prompt_tokens", None),  # as the server wrote them
                             getattr(reported, "completion_tokens", None) or 0)
    served = reported is not None and bool(sent[0])
    trusted = served and trusted_tokens(*sent)
    if served and not trusted:
        usage.setdefault("invalid_usage", []).append(
            {"task": request.task, "prompt_tokens": shown(sent[0]), "completion_tokens": shown(sent[1])})
    counted = (prompt_tokens(messages), min(reply_tokens(text, request.max_tokens), request.max_tokens))
    usage["counted_prompt_tokens"] = usage.get("counted_prompt_tokens", 0) + counted[0]  # tiktoken's, always
    usage["counted_completion_tokens"] = usage.get("counted_completion_tokens", 0) + counted[1]
    # the server's own figures, however written, kept apart from what is billed: the budget holds against them
    usage["reported_prompt_tokens"] = usage.get("reported_prompt_tokens", 0) + budget_tokens(sent[0])
    usage["reported_completion_tokens"] = usage.get("reported_completion_tokens", 0) + budget_tokens(sent[1])
    count_reply(request, sent[0] if trusted else counted[0], text,
                reported=sent[1] if trusted else None, cut=finish == "length", usage=usage)
