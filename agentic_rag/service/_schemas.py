"""The service's requests and replies as pydantic models: they check every request and give
/openapi.json its schemas."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .._config import SEARCH_MODES


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunSettings(_Strict):
    """Settings a request may lower, never raise, for its own run (the server's are the bounds)."""

    max_rounds: int | None = Field(None, ge=1)
    token_budget: int | None = Field(None, ge=500)
    deadline_s: float | None = Field(None, gt=0)


class AskRequest(_Strict):
    question: str = Field(min_length=1)
    filters: dict | None = None
    settings: RunSettings = RunSettings()
    cache: bool = True
    stream: bool = False


class SearchRequest(_Strict):
    query: str = Field(min_length=1)
    k: int = Field(5, ge=1, le=100)
    mode: Literal[SEARCH_MODES] = "hybrid"  # type: ignore[valid-type]
    filters: dict | None = None


class DocumentIn(_Strict):
    id: str = Field(min_length=1, max_length=512)
    text: str = Field(min_length=1)
    title: str = ""
    source: str = ""
    metadata: dict = {}


class DocumentsRequest(_Strict):
    documents: list[DocumentIn] = Field(min_length=1)


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
    stream: bool = False


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
