"""OpenAI-compatible chat models (OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama): structured
output with fallbacks, a completion limit on every request, the SDK's retries, usage and cost from
the API, clear errors."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import openai
from pydantic import BaseModel

from .._accounting import cost_usd
from .._errors import ConfigurationError, ModelError
from .._openai_api import Endpoint, call_error, make_client
from ._protocol import ModelRequest, complete_with_repair, cut_off, prompt_tokens, reply_tokens

JUDGE_TASKS = ("route", "grade", "judge", "decompose", "rewrite", "repair")
_MODES = ("json_schema", "json_object", "text")  # tried in this order; a server that refuses one gets the next
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

    def __post_init__(self):
        if not self.model or self.model == "offline":
            raise ConfigurationError(f"OpenAIChatModel needs a model name, not {self.model!r}")
        self.name = self.model
        self._client = make_client(self.endpoint)
        self._mode = _MODES[0]
        self._limit_field = _LIMIT_FIELDS[0]
        self._lock = threading.Lock()

    def _temperature(self, task: str) -> float:
        return self.temperature.get(task, 0.0 if task in JUDGE_TASKS else self.default_temperature)

    def _create(self, request: ModelRequest, last_resort: bool, **kwargs):
        """One API call with the request's completion limit, in the field this endpoint takes: a 400
        that names max_completion_tokens (or any 400 when nothing else is left to change) switches
        this model object to max_tokens for good, as the output mode is kept."""
        while True:
            field = self._limit_field
            try:
                return self._client.chat.completions.create(**kwargs, **{field: request.max_tokens})
            except openai.BadRequestError as exc:
                refused = last_resort or field in str(getattr(exc, "message", exc))
                if field == _LIMIT_FIELDS[-1] or not refused:
                    raise
                with self._lock:
                    self._limit_field = _LIMIT_FIELDS[-1]

    def _chat(self, request: ModelRequest, messages: list[dict], usage: dict) -> str:
        while True:
            mode = self._mode
            kwargs = {"model": self.model, "messages": messages, "temperature": self._temperature(request.task)}
            if mode == "json_schema":
                kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": request.schema.__name__, "schema": request.schema.model_json_schema()}}
            elif mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            try:
                response = self._create(request, mode == "text", **kwargs)
            except openai.BadRequestError as exc:
                if mode == "text":
                    raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
                with self._lock:  # this server does not take this output mode: use the next one from now on
                    if self._mode == mode:
                        self._mode = _MODES[_MODES.index(mode) + 1]
                continue
            except openai.OpenAIError as exc:
                raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
            choice = response.choices[0]
            text = choice.message.content or ""
            counted = _counted(request, messages, text, choice.finish_reason, response.usage)
            usage["prompt_tokens"] += counted["prompt_tokens"]
            usage["completion_tokens"] += counted["completion_tokens"]
            if choice.finish_reason == "length" or counted["completion_tokens"] > request.max_tokens:
                raise cut_off(request)  # the server cut it, or ignored the limit
            return text

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

    def stream_answer(self, request: ModelRequest, on_token) -> tuple[BaseModel, dict]:
        """Generate as plain text, handing each piece to `on_token` as it arrives (server-sent events)."""
        messages = request.messages + [{"role": "user", "content": "Reply with the answer text only, with its [n] "
                                                                    "citations; no JSON."}]
        pieces, finish, reported = [], None, None
        try:
            stream = self._create(request, True, model=self.model, messages=messages, stream=True,
                                  temperature=self._temperature(request.task), stream_options={"include_usage": True})
            for chunk in stream:
                reported = chunk.usage or reported
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_token(choice.delta.content)
        except openai.OpenAIError as exc:
            raise call_error(exc, f"the streamed {request.task} call to {self.model}", self.endpoint) from None
        text = "".join(pieces)
        usage = self._priced(_counted(request, messages, text, finish, reported))
        if finish == "length" or usage["completion_tokens"] > request.max_tokens:
            error = cut_off(request)
            error.usage = usage
            raise error
        return request.schema.model_validate({"answer": text.strip()}), usage


def _counted(request: ModelRequest, messages: list[dict], text: str, finish: str | None, reported) -> dict:
    """One request's tokens: the server's counts, or ours when it sends none (a reply cut off
    counting as the limit)."""
    if reported is not None and reported.prompt_tokens:
        return {"prompt_tokens": reported.prompt_tokens, "completion_tokens": reported.completion_tokens or 0}
    completion = request.max_tokens if finish == "length" else reply_tokens(text, request.max_tokens)
    return {"prompt_tokens": prompt_tokens(messages), "completion_tokens": completion}
