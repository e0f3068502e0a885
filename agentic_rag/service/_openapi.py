"""/openapi.json: the endpoints, with the schemas of their requests and replies from the pydantic models."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
from ._schemas import (
    AskRequest,
    ChatExtra,
    ChatRequest,
    DocumentsRequest,
    ErrorReply,
    Health,
    SearchRequest,
    WriteReply,
)

_OPEN = ("/healthz", "/openapi.json")  # the endpoints no key guards
_ENDPOINTS = [  # (method, path, summary, request model, reply model or None for a free-form object)
    ("post", "/v1/ask", "Answer a question (stream: server-sent events draft, answer, done)", AskRequest, None),
    ("post", "/v1/search", "Search the knowledge base", SearchRequest, None),
    ("post", "/v1/documents", "Add or replace documents (a write key; saved before the reply)", DocumentsRequest,
     WriteReply),
    ("delete", "/v1/documents/{id}", "Delete a document (a write key)", None, WriteReply),
    ("post", "/v1/chat/completions", "OpenAI-compatible chat completion: the agent as a model; messages are the "
     "conversation, or conversation_id one the service keeps (its reply's agentic_rag object: ChatExtra)",
     ChatRequest, None),
    ("get", "/v1/models", "The models /v1/chat/completions accepts", None, None),
    ("get", "/healthz", "Up, generation and size (no key needed)", None, Health),
    ("get", "/metrics", "Prometheus text format", None, None),
    ("get", "/v1/collections", "The collections the key may read, with its grants", None, None),
    ("post", "/v1/collections/{name}/ask", "As /v1/ask, on one collection", AskRequest, None),
    ("post", "/v1/collections/{name}/search", "As /v1/search, on one collection", SearchRequest, None),
    ("post", "/v1/collections/{name}/documents", "As /v1/documents, on one collection (a key that writes it)",
     DocumentsRequest, WriteReply),
    ("delete", "/v1/collections/{name}/documents/{id}", "Delete a document of one collection", None, WriteReply),
    ("get", "/v1/collections/{name}/healthz", "One collection's generation and size", None, Health),
]


def ref(model) -> dict:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


@lru_cache(maxsize=1)
def openapi() -> dict:
    """The OpenAPI 3.1 document of the service."""
    models: list[type[BaseModel]] = [AskRequest, SearchRequest, DocumentsRequest, ChatRequest, ChatExtra, WriteReply,
                                     Health, ErrorReply]
    _, schemas = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")
    paths: dict = {}
    for method, path, summary, request, reply in _ENDPOINTS:
        operation: dict[str, Any] = {"summary": summary, "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref(reply) if reply
                                                                          else {"type": "object"}}}},
            "default": {"description": "an error", "content": {"application/json": {"schema": ref(ErrorReply)}}}}}
        if request:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(request)}}}
        if path not in _OPEN:
            operation["security"] = [{"key": []}]
        named = [name for name in ("name", "id") if f"{{{name}}}" in path]
        if named:
            operation["parameters"] = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                                       for name in named]
        paths.setdefault(path, {})[method] = operation
    return {"openapi": "3.1.0", "info": {"title": "agentic_rag", "version": __version__}, "paths": paths,
            "components": {"schemas": schemas.get("$defs", {}),
                           "securitySchemes": {"key": {"type": "http", "scheme": "bearer"}}}}
