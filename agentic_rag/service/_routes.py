"""The route table: every endpoint of the service declared once (method, path, the handler that
answers it, the key it needs, its request and reply models). A Service routes by it, a collections
app dispatches /v1/collections/{name}/... by it, metrics and spans name endpoints by it, and
/openapi.json is written from it (_openapi)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from ._schemas import AskRequest, ChatRequest, DocumentsRequest, Health, SearchRequest, WriteReply

Need = Literal["read", "write"] | None  # the key a route needs: None for a route open to anyone


@dataclass(frozen=True)
class Route:
    """One endpoint. `path` may end in a parameter ("/v1/documents/{id}"), which takes the rest of the
    path; `handler` names the attribute of the application that answers it (dotted: an endpoint
    object's method), and a collection's route `forwards` to the Service route that answers it."""

    method: str
    path: str
    handler: str
    need: Need
    summary: str
    request: type[BaseModel] | None = None
    reply: type[BaseModel] | None = None  # None: a free-form JSON object
    forwards: Route | None = None

    @property
    def prefix(self) -> str:
        """The path before its last parameter (the whole path when it has none)."""
        return self.path[:self.path.index("{")] if self.path.endswith("}") else self.path

    def matches(self, path: str) -> bool:
        """Whether `path` is this route's (its parameter, if any, taking the rest of the path)."""
        return path.startswith(self.prefix) if self.path.endswith("}") else path == self.path


ASK = Route("POST", "/v1/ask", "asking.ask", "read",
            "Answer a question (stream: server-sent events draft, answer, done)", AskRequest)
SEARCH = Route("POST", "/v1/search", "asking.search", "read", "Search the knowledge base", SearchRequest)
ADD = Route("POST", "/v1/documents", "documents.add", "write",
            "Add or replace documents (a write key; saved before the reply)", DocumentsRequest, WriteReply)
DELETE = Route("DELETE", "/v1/documents/{id}", "documents.delete", "write", "Delete a document (a write key)",
               reply=WriteReply)
MCP = Route("POST", "/mcp", "asking.mcp", "read", "Model Context Protocol, streamable HTTP: tools search, ask, "
            "list_documents, get_document and the documents as resources (JSON-RPC; no sessions)")
HEALTH = Route("GET", "/healthz", "health", None, "Up, generation and size (no key needed)", reply=Health)

# the endpoints of one knowledge base's Service, in the order /openapi.json lists them
SERVICE_ROUTES = (
    ASK, SEARCH, ADD, DELETE, MCP,
    Route("POST", "/v1/chat/completions", "chat.reply", "read",
          "OpenAI-compatible chat completion: the agent as a model; messages are the conversation, or "
          "conversation_id one the service keeps (its reply's agentic_rag object: ChatExtra)", ChatRequest),
    Route("GET", "/v1/models", "models", "read", "The models /v1/chat/completions accepts"),
    HEALTH,
    Route("GET", "/metrics", "metrics_text", "read", "Prometheus text format"),
    Route("GET", "/openapi.json", "openapi", None, "This document: the endpoints and their schemas (no key needed)"),
)

COLLECTIONS = "/v1/collections"


def _on_collection(route: Route, summary: str, need: Need = None) -> Route:
    """`route` on one collection of a collections app: /v1/collections/{name} before its path."""
    return Route(route.method, f"{COLLECTIONS}/{{name}}{route.path.removeprefix('/v1')}", "", need or route.need,
                 summary, route.request, route.reply, forwards=route)


# the endpoints a collections app adds: the list, and each collection's own endpoints
COLLECTION_ROUTES = (
    Route("GET", COLLECTIONS, "listing", "read", "The collections the key may read, with its grants"),
    _on_collection(ASK, "As /v1/ask, on one collection"),
    _on_collection(SEARCH, "As /v1/search, on one collection"),
    _on_collection(ADD, "As /v1/documents, on one collection (a key that writes it)"),
    _on_collection(DELETE, "Delete a document of one collection"),
    _on_collection(HEALTH, "One collection's generation and size", need="read"),
)
# one collection's MCP endpoint (its own MCP server, within the key's scope), answered by its Service's /mcp
MCP_ON_COLLECTION = Route("POST", "/mcp/{name}", "", "read", "As /mcp, on one collection", forwards=MCP)
ROUTES = SERVICE_ROUTES + COLLECTION_ROUTES + (MCP_ON_COLLECTION,)


def _collection_endpoints() -> dict[str, tuple[str, Need]]:
    """The first part of a path after /v1/collections/{name}/ -> (the Service path it is answered
    at, the grant it needs on the collection, whatever the method)."""
    endpoints: dict[str, tuple[str, Need]] = {}
    for route in COLLECTION_ROUTES:
        if route.forwards is not None:
            head = route.path.split("/")[4]
            inner = route.forwards.path.removesuffix("/{id}")
            endpoints.setdefault(head, (inner, route.need))  # documents and documents/{id} agree (a test says so)
    return endpoints


COLLECTION_ENDPOINTS = _collection_endpoints()
# those whose path goes on after them ("documents/{id}")
WITH_ID = {r.path.split("/")[4] for r in COLLECTION_ROUTES if r.forwards is not None and r.path.endswith("}")}
# "ask, search, documents, documents/{id} and healthz": what a collection has, for a 404 that says so
COLLECTION_PATHS = [r.path.split("/", 4)[4] for r in COLLECTION_ROUTES if r.forwards is not None]
COLLECTION_HAS = ", ".join(COLLECTION_PATHS[:-1]) + " and " + COLLECTION_PATHS[-1]


def collection_route(method: str, path: str) -> Route | None:
    """The collection route of `method` at `path`, a path as the table writes it ({name}, {id})."""
    return next((r for r in COLLECTION_ROUTES if (r.method, r.path) == (method, path)), None)


def service_routes(path: str) -> list[Route]:
    """The Service routes whose path `path` is, in the table's order (one per method)."""
    return [route for route in SERVICE_ROUTES if route.matches(path)]


def endpoint_label(path: str) -> str:
    """A path as metrics and spans name it: its endpoint, never a collection's name, a document's id or
    a path a client made up ("other")."""
    if path.startswith(MCP_ON_COLLECTION.prefix):
        return MCP_ON_COLLECTION.path
    if path.startswith(COLLECTIONS + "/"):
        head, _, document = path[len(COLLECTIONS) + 1:].partition("/")[2].partition("/")
        if head not in COLLECTION_ENDPOINTS or (document and head not in WITH_ID):
            return "other"
        return f"{COLLECTIONS}/{{name}}/" + head + ("/{id}" if document else "")
    routes = service_routes(path)
    if routes:
        return routes[0].path
    return path if path == COLLECTIONS else "other"


def route_listing() -> str:
    """The route table as text, one route a line: method, path, handler (or the path a collection's
    route forwards to), the key it needs, request and reply models."""
    lines = []
    for r in ROUTES:
        handler = r.handler or f"-> {r.forwards.path if r.forwards else ''}"
        models = [m.__name__ if m else "-" for m in (r.request, r.reply)]
        lines.append(f"{r.method:<7}{r.path:<39}{handler:<22}{r.need or 'none':<6}{models[0]:<17}{models[1]}")
    return "\n".join(lines)
