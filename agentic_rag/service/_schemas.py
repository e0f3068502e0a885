"""The service's requests and replies as pydantic models: they check every request and give
/openapi.json its schemas."""
from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from ..core import SEARCH_MODES, ConfigurationError
from ..kb.indexes import check_filters


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _filters(value: dict | None) -> dict | None:
    """Checked as every search checks them (check_filters: their shape, at most MAX_FILTER_VALUES
    values, bounded texts), here so that a bad filter is a 400 before any work starts."""
    try:
        return check_filters(value) if value is not None else None
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


class RunSettings(_Strict):
    """Settings a request may lower, never raise, for its own run (the server's are the bounds);
    strict: `true` or `"2"` is not a number of rounds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    max_rounds: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=500)
    deadline_s: float | None = Field(default=None, gt=0)
    max_completion_tokens: int | None = Field(default=None, ge=1)  # each model call's completion limit


class AskRequest(_Strict):
    question: str = Field(min_length=1)
    filters: dict | None = None
    settings: RunSettings = RunSettings()
    cache: StrictBool = True
    stream: StrictBool = False

    _check_filters = field_validator("filters")(_filters)


class SearchRequest(_Strict):
    query: str = Field(min_length=1)
    k: int = Field(5, ge=1, le=100)
    mode: Literal[SEARCH_MODES] = "hybrid"  # type: ignore[valid-type]
    filters: dict | None = None

    _check_filters = field_validator("filters")(_filters)


class DocumentIn(_Strict):
    """A document as text, or as a file: `file` holds its bytes in base64 and `filename` (default: the
    id) names it, its suffix choosing the reader (.pdf, .docx, .html, .md, .txt); an image file
    needs its description in `text`."""

    id: str = Field(min_length=1, max_length=512)
    text: str = ""
    file: str = ""
    filename: str = ""
    title: str = ""
    source: str = ""
    metadata: dict = {}

    @model_validator(mode="after")
    def _text_or_file(self) -> DocumentIn:
        if not self.text and not self.file:
            raise ValueError(f"document {self.id!r} has neither text nor a file: give one")
        return self


class DocumentsRequest(_Strict):
    documents: list[DocumentIn] = Field(min_length=1)

    @field_validator("documents")
    @classmethod
    def _utf8(cls, documents: list[DocumentIn]) -> list[DocumentIn]:
        """Every document must be writable as UTF-8 (a lone surrogate is not)."""
        for document in documents:
            try:
                json.dumps(document.model_dump(), ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"document {document.id!r} holds text that is not valid Unicode") from None
        return documents


class WriteReply(BaseModel):
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    generation: str


class ChatMessage(BaseModel):
    """A user or assistant turn, or a system (or developer) message: the instructions."""

    role: Literal["user", "assistant", "system", "developer"]
    content: str | list | None = None


_Limit = Annotated[int | None, Field(default=None, ge=1, strict=True)]


class ChatRequest(BaseModel):  # other OpenAI fields (temperature, user, ...) are accepted and ignored
    """The whole conversation is `messages` (the last user message is the question), unless
    `conversation_id` names one the service keeps (then send only the new message);
    `"conversation": true` starts one. `max_tokens` (or `max_completion_tokens`) lowers the
    completion limit of the agent's model calls."""

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False
    max_tokens: _Limit = None
    max_completion_tokens: _Limit = None
    conversation_id: str | None = Field(default=None, min_length=1, max_length=100)
    conversation: StrictBool = False


class ChatExtra(BaseModel):
    """The `agentic_rag` object of a chat reply (and of a stream's last chunk)."""

    stop_reason: str
    abstained: bool
    generation: str | None
    cached: bool
    standalone: str = Field(description="the question as the run answered it: a follow-up written to stand alone")
    conversation_id: str | None = Field(description="send it back to continue; null unless the request started "
                                                    "or continued a conversation")
    answer_reason: str | None = Field(description="what the model said of its answer (the offline model: that "
                                                  "it quotes and follows no instructions)")


class ErrorBody(BaseModel):
    type: str
    message: str


class ErrorReply(BaseModel):
    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok"]
    generation: str | None
    documents: int
    chunks: int
