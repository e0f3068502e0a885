"""The service's requests and replies as pydantic models: they check every request and give
/openapi.json its schemas."""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from .._config import SEARCH_MODES
from .._errors import ConfigurationError
from ..kb.indexes._filters import check_filters


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
    def _text_or_file(self):
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
    role: str
    content: str | list | None = None


class ChatRequest(BaseModel):  # other OpenAI fields (temperature, user, ...) are accepted and ignored
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False


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
