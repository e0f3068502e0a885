"""/openapi.json: the route table (_routes) as an OpenAPI 3.1 document, with the schemas of the
requests and replies from the pydantic models."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
from ._routes import ROUTES, Route
from ._schemas import ChatExtra, ErrorReply

# models no route names as its request or reply, listed for clients: a chat reply's agentic_rag
# object, and every error's body
_ALSO = (ChatExtra, ErrorReply)


def ref(model: type[BaseModel]) -> dict:
    """A JSON reference to `model`'s schema in the document's components."""
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def operation(route: Route) -> dict[str, Any]:
    """One route as an OpenAPI operation: its summary, body, replies, key and path parameters."""
    content = ref(route.reply) if route.reply else {"type": "object"}
    described: dict[str, Any] = {"summary": route.summary, "responses": {
        "200": {"description": "OK", "content": {"application/json": {"schema": content}}},
        "default": {"description": "an error", "content": {"application/json": {"schema": ref(ErrorReply)}}}}}
    if route.request:
        described["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(route.request)}}}
    if route.need is not None:
        described["security"] = [{"key": []}]
    named = [name for name in ("name", "id") if f"{{{name}}}" in route.path]
    if named:
        described["parameters"] = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                                   for name in named]
    return described


@lru_cache(maxsize=1)
def openapi() -> dict:
    """The OpenAPI 3.1 document of the service."""
    models: list[type[BaseModel]] = []
    for model in [m for route in ROUTES for m in (route.request, route.reply) if m] + list(_ALSO):
        if model not in models:
            models.append(model)
    _, schemas = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = operation(route)
    return {"openapi": "3.1.0", "info": {"title": "agentic_rag", "version": __version__}, "paths": paths,
            "components": {"schemas": schemas.get("$defs", {}),
                           "securitySchemes": {"key": {"type": "http", "scheme": "bearer"}}}}
