"""OpenAI-compatible chat models (OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama): structured
output with fallbacks, the SDK's retries, usage and cost from the API, clear errors."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping

import openai
from pydantic import BaseModel

from ..errors import ConfigurationError, ModelError
from .protocol import ModelRequest, complete_with_repair

JUDGE_TASKS = ("route", "grade", "judge", "decompose", "rewrite", "repair")
_MODES = ("json_schema", "json_object", "text")  # tried in this order; a server that refuses one gets the next


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call: base URL (None = OpenAI), key (None is fine for local servers),
    timeout in seconds, and retries (the SDK's: 408, 409, 429 and 5xx, honouring retry-after)."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2


def endpoint_from_env(environ: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                      timeout: float = 60.0, max_retries: int = 2) -> Endpoint:
    """Explicit values first, then AGENTIC_RAG_BASE_URL / AGENTIC_RAG_API_KEY, then OPENAI_BASE_URL /
    OPENAI_API_KEY. Called by the command line, once, with os.environ: nothing reads it at import."""
    return Endpoint(base_url=base_url or environ.get("AGENTIC_RAG_BASE_URL") or environ.get("OPENAI_BASE_URL"),
                    api_key=api_key or environ.get("AGENTIC_RAG_API_KEY") or environ.get("OPENAI_API_KEY"),
                    timeout=timeout, max_retries=max_retries)


def make_client(endpoint: Endpoint) -> openai.OpenAI:
    """An SDK client for the endpoint (one per model object: no global client)."""
    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "no-key-needed",
                         timeout=endpoint.timeout, max_retries=endpoint.max_retries)


def call_error(exc: Exception, what: str, endpoint: Endpoint) -> ModelError:
    """One clear line for a failed call, naming the call and the fix where there is one."""
    where = endpoint.base_url or "the OpenAI API"
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"{what} timed out after {endpoint.timeout:g} s at {where} (and {endpoint.max_retries} retries)")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"{what} could not reach {where}: check the base URL (--base-url or AGENTIC_RAG_BASE_URL)")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError(f"{what} was refused by {where} (HTTP 401): set AGENTIC_RAG_API_KEY or OPENAI_API_KEY")
    if isinstance(exc, openai.APIStatusError):
        message = str(getattr(exc, "message", exc)).splitlines()[0][:200]
        return ModelError(f"{what} failed at {where} with HTTP {exc.status_code}: {message}")
    return ModelError(f"{what} failed: {exc.__class__.__name__}: {exc}")


@dataclass
class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible endpoint. `temperature` maps task to temperature
    (judging tasks default to 0); `price` is USD per million (input, output) tokens."""

    model: str
    endpoint: Endpoint = field(default_factory=Endpoint)
    temperature: dict = field(default_factory=dict)
    default_temperature: float = 0.2
    price: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        if not self.model or self.model == "offline":
            raise ConfigurationError(f"OpenAIChatModel needs a model name, not {self.model!r}")
        self.name = self.model
        self._client = make_client(self.endpoint)
        self._mode = _MODES[0]
        self._lock = threading.Lock()

    def _temperature(self, task: str) -> float:
        return self.temperature.get(task, 0.0 if task in JUDGE_TASKS else self.default_temperature)

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
                response = self._client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                if mode == "text":
                    raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
                with self._lock:  # this server does not take this output mode: use the next one from now on
                    if self._mode == mode:
                        self._mode = _MODES[_MODES.index(mode) + 1]
                continue
            except openai.OpenAIError as exc:
                raise call_error(exc, f"the {request.task} call to {self.model}", self.endpoint) from None
            if response.usage is not None:
                usage["prompt_tokens"] += response.usage.prompt_tokens or 0
                usage["completion_tokens"] += response.usage.completion_tokens or 0
            return response.choices[0].message.content or ""

    def complete_with_usage(self, request: ModelRequest) -> tuple[BaseModel, dict]:
        """The validated reply (one repair request on invalid output) and the API's token usage."""
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        reply = complete_with_repair(request, lambda messages: self._chat(request, messages, usage))
        usage["cost_usd"] = (usage["prompt_tokens"] * self.price[0] + usage["completion_tokens"] * self.price[1]) / 1e6
        return reply, usage

    def complete(self, request: ModelRequest) -> BaseModel:
        """The validated reply."""
        return self.complete_with_usage(request)[0]

    def stream_answer(self, request: ModelRequest, on_token) -> tuple[BaseModel, dict]:
        """Generate as plain text, handing each piece to `on_token` as it arrives (server-sent events)."""
        messages = request.messages + [{"role": "user", "content": "Reply with the answer text only, with its [n] "
                                                                    "citations; no JSON."}]
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        pieces = []
        try:
            stream = self._client.chat.completions.create(model=self.model, messages=messages, stream=True,
                                                          temperature=self._temperature(request.task),
                                                          stream_options={"include_usage": True})
            for chunk in stream:
                if chunk.usage is not None:
                    usage.update(prompt_tokens=chunk.usage.prompt_tokens or 0,
                                 completion_tokens=chunk.usage.completion_tokens or 0)
                for choice in chunk.choices:
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_token(choice.delta.content)
        except openai.OpenAIError as exc:
            raise call_error(exc, f"the streamed {request.task} call to {self.model}", self.endpoint) from None
        usage["cost_usd"] = (usage["prompt_tokens"] * self.price[0] + usage["completion_tokens"] * self.price[1]) / 1e6
        return request.schema.model_validate({"answer": "".join(pieces).strip()}), usage
