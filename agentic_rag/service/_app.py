"""The WSGI application over one knowledge base: routing by the route table, keys, JSON errors,
metrics; the endpoints themselves are answered by the parts it holds (asking, documents, chat)."""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from pathlib import Path

from pydantic import ValidationError

from ..core import AgenticRAGError, Config, ConfigurationError, RetrievalError, as_config, first_problem
from ..kb import KnowledgeBase, KnowledgeBaseBackend
from ..models import Model
from ..tools import OffTool, Tool
from ._access import Access
from ._ask import Asking
from ._cache import AnswerCache
from ._chat_endpoint import ChatEndpoint
from ._conversations import ConversationStore
from ._documents import Documents
from ._http import (
    DATABASE_FAILED,
    MODEL_ID,
    REASONS,
    SENT_PATH,
    Handler,
    Reply,
    ServiceError,
    StartResponse,
    error_body,
    log,
    respond,
)
from ._metrics import Metrics
from ._openapi import openapi
from ._parts import Parts, ServiceLimits
from ._routes import SERVICE_ROUTES, Need, endpoint_label, service_routes
from ._served import ServedKnowledgeBase


class Service:
    """A WSGI application over one knowledge base: `Service(...)(environ, start_response)`.

    With `kb_dir`, the knowledge base is read from that folder, reloaded before a request whenever
    another process saved a new generation there, and every write is saved there (a delta segment)
    before the reply. Without it, `kb` is served from memory and writes stay in memory."""

    def __init__(self, model: Model, kb_dir: str | Path | None = None, kb: KnowledgeBaseBackend | None = None,
                 tools: Iterable[Tool | OffTool] = (), config: Config | None = None, model_name: str = "offline",
                 read_keys: Iterable[str] = (), write_keys: Iterable[str] = (), limits: ServiceLimits | None = None,
                 cache_size: int = 1024, cache_ttl_s: float = 300.0,
                 loader: Callable[[Path], KnowledgeBase] | None = None, multiprocess_dir: str | None = None,
                 state_dir: str | Path | None = None, metrics: Metrics | None = None, name: str = "default"):
        cache = AnswerCache(cache_size, cache_ttl_s)
        served = ServedKnowledgeBase(kb_dir, kb, cache, loader)
        self.parts = Parts(model, tuple(tools), as_config(config), model_name, limits or ServiceLimits(), served,
                           cache, metrics or Metrics(multiprocess_dir),  # a collections app shares one Metrics
                           Access(read_keys, write_keys, name))
        # conversations: in state_dir, shared by every process serving with it; else this service's own
        # temporary folder, removed with it
        self._state_tmp = tempfile.TemporaryDirectory(prefix="agentic-rag-state-") if state_dir is None else None
        self.conversations = ConversationStore(
            state_dir if state_dir is not None else self._state_tmp.name,  # type: ignore[union-attr]
            self.limits.max_conversations, self.limits.conversation_idle_s, self.limits.conversation_wait_s)
        self.asking = Asking(self.parts)
        self.documents = Documents(self.parts)
        self.chat = ChatEndpoint(self.parts, self.asking, self.conversations)
        # (method, path) -> (the handler, the key it needs), from the route table
        self._handlers: dict[tuple[str, str], tuple[Handler, Need]] = {
            (route.method, route.path): (attrgetter(route.handler)(self), route.need) for route in SERVICE_ROUTES}

    @property
    def limits(self) -> ServiceLimits:
        """What one request may ask (settable: every endpoint reads it at each request)."""
        return self.parts.limits

    @limits.setter
    def limits(self, limits: ServiceLimits) -> None:
        self.parts.limits = limits

    @property
    def metrics(self) -> Metrics:
        """The figures this service counts (shared with the other services of a collections app)."""
        return self.parts.metrics

    @property
    def name(self) -> str:
        """The collection it serves, in a collections app ("default" alone)."""
        return self.parts.access.name

    @property
    def served(self) -> ServedKnowledgeBase:
        """The knowledge base it serves, its generation and its writes."""
        return self.parts.served

    def current(self) -> tuple[KnowledgeBaseBackend, str | None]:
        """The knowledge base and its generation, taken together (see ServedKnowledgeBase.current)."""
        return self.parts.served.current()

    # -- WSGI --------------------------------------------------------------------------------------

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        endpoint = endpoint_label(self._sent_path(environ))
        try:
            handler, need = self._route("GET" if method == "HEAD" else method, path, self._sent_path(environ))
            self.parts.access.authorize(environ, need)
            status, body, headers = handler(environ)
        except Exception as exc:  # every failure is a JSON reply (see _failed), never a traceback
            status, body, headers = self._failed(exc, method, path)
        labels = (endpoint, str(status))
        self.metrics.requests.labels(*labels).inc()
        if isinstance(body, Iterator):  # a stream: latency counts until its last byte
            start_response(f"{status} {REASONS[status]}", [("Content-Type", "text/event-stream; charset=utf-8"),
                                                            ("Cache-Control", "no-cache"), *headers])
            return self._timed(body, labels, started)
        kind = "text/plain; version=0.0.4" if path == "/metrics" and status == 200 else "application/json"
        self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)
        reply = respond(start_response, status, body, headers, kind)
        return [] if method == "HEAD" else reply

    def _failed(self, exc: Exception, method: str, path: str) -> Reply:
        """The reply to a request that raised `exc`: its own status for a ServiceError, 400 for bad
        input, the database's status when it failed, else a 500 whose message shows no server path
        (never a traceback to the client: that is logged here). At the MCP endpoint the body is a
        JSON-RPC error as well (error_body)."""
        public = self.parts.served.public
        if isinstance(exc, ServiceError):
            return exc.status, error_body(exc.kind, str(exc), path), exc.headers
        if isinstance(exc, ValidationError):
            return 400, error_body("invalid_request", first_problem(exc), path), []
        if isinstance(exc, tuple(DATABASE_FAILED)):
            log.error("request %s %s: %s", method, path, exc)
            status, kind, retry = next(reply for cls, reply in DATABASE_FAILED.items() if isinstance(exc, cls))
            return status, error_body(kind, public(str(exc)), path), list(retry)
        if isinstance(exc, (ConfigurationError, RetrievalError)):  # bad input, or nothing to search (an empty base)
            return 400, error_body("invalid_request", public(str(exc)), path), []
        if isinstance(exc, AgenticRAGError):
            log.error("request %s %s failed: %s", method, path, exc)
            return 500, error_body("internal_error", public(str(exc)), path), []
        log.error("request %s %s failed", method, path, exc_info=exc)
        return 500, error_body("internal_error", "the server failed on this request; see its log", path), []

    def _timed(self, stream: Iterator[bytes], labels: tuple[str, str], started: float) -> Iterator[bytes]:
        try:
            yield from stream
        finally:
            self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)

    def _route(self, method: str, path: str, shown: str) -> tuple[Handler, Need]:
        """The handler of (method, path) and the key it needs; a refusal names `shown`, the path sent."""
        routes = service_routes(path)
        for route in routes:
            if route.method == method:
                return self._handlers[(route.method, route.path)]
        if routes:
            allowed = ", ".join(route.method for route in routes)
            raise ServiceError(405, "method_not_allowed", f"{method} {shown}: use {allowed}", [("Allow", allowed)])
        raise ServiceError(404, "not_found", "no such endpoint; see /openapi.json")

    @staticmethod
    def _sent_path(environ: dict) -> str:
        """The path as the client sent it (a collections app passes on its own part of it)."""
        sent: str = environ.get(SENT_PATH) or environ.get("PATH_INFO", "/")
        return sent

    # -- the endpoints a Service answers itself ----------------------------------------------------

    def models(self, environ: dict) -> Reply:
        """GET /v1/models: the one model the chat endpoint accepts."""
        return 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0,
                                                 "owned_by": "agentic-rag"}]}, []

    def health(self, environ: dict) -> Reply:
        """GET /healthz: up, the generation served and its size."""
        kb, generation = self.current()
        return 200, {"status": "ok", "generation": generation, "documents": kb.document_count, "chunks": len(kb)}, []

    def metrics_text(self, environ: dict) -> Reply:
        """GET /metrics: the figures in the Prometheus text format."""
        return 200, self.metrics.text(), []

    def openapi(self, environ: dict | None) -> Reply:
        """GET /openapi.json: the OpenAPI document, written from the route table."""
        return 200, openapi(), []
