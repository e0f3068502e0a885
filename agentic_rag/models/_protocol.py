"""The one model protocol: a request carries the task, the rendered messages, the same facts as
structured inputs, the schema the reply must fit, and the reply's token limit."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeGuard, cast, overload

from pydantic import BaseModel, ValidationError

from ..core import Answer, Config, ConfigurationError, ModelOutputError, count_tokens

TASKS = ("condense", "route", "rewrite", "decompose", "grade", "generate", "judge", "repair", "extract")
MAX_REPORTED_TOKENS = 10_000_000  # a call's count past this (ten times the largest context on offer) is not billed


@dataclass(frozen=True)
class ModelRequest:
    """One call: `messages` are what an LLM sees; `inputs` are the same facts for rule-based models.
    `max_tokens` limits each reply (a longer one is cut off, and invalid); `allowance`, when set, is
    what every send of this call together (prompts and replies, by tiktoken) may spend: the room
    the run's budget has left. `deadline`, when set, is the time.monotonic() by which the call
    must end (the run's `deadline_s`): a model that waits on a server cuts its timeouts, retries
    and pauses to it and raises DeadlineExceeded past it; one that computes its reply ignores it.
    The per-run meter sets all three."""

    task: str
    messages: list[dict]
    inputs: dict = field(default_factory=dict)
    schema: type[BaseModel] = BaseModel
    max_tokens: int = Config.max_completion_tokens
    allowance: int | None = None
    deadline: float | None = None


class Model(Protocol):
    """Anything that answers a ModelRequest with an instance of its schema.

    Optional capabilities are declared as class attributes, never probed for; a model that does not
    declare one has not got it (see `has_capability`):
    - `reports_usage = True`: it has `complete_with_usage(request) -> (reply, usage)`, `usage` being
      its own count, `{"prompt_tokens", "completion_tokens"}` and optionally `"cost_usd"`, which the
      meter records in place of tiktoken's; a failure may carry the same dict as `exc.usage`.
    - `streams = True`: it has `stream_answer(request, on_token) -> (reply, usage or None)`, handing
      the answer's text to `on_token` piece by piece as it is produced.
    """

    @property
    def name(self) -> str:
        """What traces and prices know the model by."""

    def complete(self, request: ModelRequest) -> BaseModel:
        """Reply to one request (raise ModelError or ModelOutputError on failure)."""


class UsageReportingModel(Model, Protocol):
    """A model that declares `reports_usage = True`."""

    def complete_with_usage(self, request: ModelRequest) -> tuple[BaseModel, dict | None]:
        """Reply to one request with the model's own count of its tokens, or None."""


class StreamingModel(Model, Protocol):
    """A model that declares `streams = True`."""

    def stream_answer(self, request: ModelRequest,
                      on_token: Callable[[str], object]) -> tuple[BaseModel, dict | None]:
        """Reply to a generate request, handing the answer's text to `on_token` as it comes."""


CAPABILITIES = ("reports_usage", "streams")


@overload
def has_capability(model: object, capability: Literal["reports_usage"]) -> TypeGuard[UsageReportingModel]: ...
@overload
def has_capability(model: object, capability: Literal["streams"]) -> TypeGuard[StreamingModel]: ...
@overload
def has_capability(model: object, capability: str) -> bool: ...
def has_capability(model: object, capability: str) -> bool:
    """Whether `model` declares an optional capability (one of CAPABILITIES); undeclared is False."""
    if capability not in CAPABILITIES:
        raise ConfigurationError(f"unknown model capability {capability!r}; capabilities: {', '.join(CAPABILITIES)}")
    return bool(getattr(model, capability, False))


def answer_text(reply: BaseModel) -> str:
    """The answer a model that cannot stream hands to `on_token` whole: only a generate reply, an
    Answer, is ever streamed."""
    return cast(Answer, reply).answer


def prompt_tokens(messages: list[dict]) -> int:
    """The tokens of the messages' contents, by tiktoken (the meter's count of a prompt)."""
    return sum(count_tokens(str(m.get("content") or "")) for m in messages)


def whole_tokens(*figures: object) -> bool:
    """Whether reported token counts are whole numbers, not negative: counts a provider bills by,
    however large (a negative one, a float, a bool or a string is no count at all)."""
    return all(type(f) is int and f >= 0 for f in figures)


def budget_tokens(figure: Any) -> int:
    """A reported count as the budget holds against it: a provider bills by its own count however it
    writes it, so any number of tokens not below zero counts (a float rounded up, a text of a number
    read, one past a float's range as 10**18); a negative one, NaN, a bool or no number counts 0."""
    if isinstance(figure, bool):
        return 0
    if isinstance(figure, int):
        return max(figure, 0)
    try:
        value = float(figure)
    except (TypeError, ValueError, OverflowError):
        return 0
    return 10 ** 18 if value == math.inf else math.ceil(value) if value > 0 else 0  # NaN > 0 is false


def trusted_tokens(*figures: Any) -> bool:
    """Whether reported token counts can be billed as sent: whole numbers up to MAX_REPORTED_TOKENS
    (a larger one is the provider's, kept and budgeted, but billed by tiktoken's count; see Meter)."""
    return whole_tokens(*figures) and all(f <= MAX_REPORTED_TOKENS for f in figures)


def shown(figure: object) -> int | str:
    """A reported figure as the trace keeps it: an int as it is, anything else as its repr (JSON-safe)."""
    return figure if type(figure) is int else repr(figure)


def reply_tokens(text: str, limit: int) -> int:
    """The tokens of a reply, exact up to `limit`; past it, at least limit + 1 (a 5 MB reply is not
    counted whole: its first 16 characters a token already pass the limit)."""
    head = text[:16 * (limit + 1)]
    tokens = count_tokens(head)
    return tokens if tokens > limit or len(head) == len(text) else count_tokens(text)


def count_reply(request: ModelRequest, prompt: int, text: str, reported: int | None = None, cut: bool = False,
                usage: dict | None = None) -> dict:
    """One reply's tokens, {"prompt_tokens", "completion_tokens"}, added to `usage` when given. The
    completion is `reported` (a server's count, kept as it is) or the reply's by tiktoken, a reply
    past the request's limit counting as the limit. A reply past the limit, or `cut` (the server
    stopped it there), is invalid: raise ModelOutputError carrying `usage` (or this count) as `.usage`."""
    limit = request.max_tokens
    tokens = reported if reported is not None else limit if cut else reply_tokens(text, limit)
    counted = {"prompt_tokens": prompt, "completion_tokens": tokens if reported is not None else min(tokens, limit)}
    if usage is not None:
        usage["prompt_tokens"] += counted["prompt_tokens"]
        usage["completion_tokens"] += counted["completion_tokens"]
    if cut or tokens > limit:
        error = ModelOutputError(f"the {request.task} reply was cut off at its limit of {limit} tokens")
        error.usage = usage if usage is not None else counted
        raise error
    return counted


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
    except (ValueError, TypeError, RecursionError, ValidationError) as exc:
        raise ModelOutputError(f"reply does not fit {schema.__name__}: {str(exc).splitlines()[0]}") from None


def complete_with_repair(request: ModelRequest, send: Callable[[list[dict]], str]) -> BaseModel:
    """Send the messages; on an invalid reply ask once for a corrected one, if the request's
    allowance has room for another prompt and reply; then raise."""
    reply = send(request.messages)
    try:
        return parse_reply(reply, request.schema)
    except ModelOutputError as first:
        fix = (f"Your reply was not valid: {first}. Reply again with only a JSON object that fits this "
               f"schema:\n{json.dumps(request.schema.model_json_schema())}")
        messages = request.messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": fix}]
        if request.allowance is not None:
            spent = prompt_tokens(request.messages) + min(reply_tokens(reply, request.max_tokens), request.max_tokens)
            if spent + prompt_tokens(messages) + request.max_tokens > request.allowance:
                raise ModelOutputError(f"{first}; the token budget has no room for a repair request") from None
        return parse_reply(send(messages), request.schema)
