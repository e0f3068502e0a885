"""Several knowledge bases behind one server, each by its name: a collection is a Service of its own
(its own generation, reload, query cache and write lock); the keys, their scopes and the access log
are this app's. Its routes are the route table's (_routes): COLLECTION_ROUTES, /v1/collections and
/v1/collections/{name}/..., each passed on to the collection's Service at the path it forwards to;
and the Service's own, where "model" names the collection for the chat endpoint, /v1/models lists
one model per collection, and /healthz, /metrics and /openapi.json speak for all of them.

While there is one collection, the paths of one knowledge base (/v1/ask, ...) answer for it as
before, and its chat model may also be called "agentic-rag". A key's scope (_keys.Scope) goes to
the collection's Service in the WSGI environ (SCOPE), which keeps every search of the request to
the key's filter."""
from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core import ConfigurationError, tracing
from ..kb import KnowledgeBaseBackend
from ..models import Model
from ._app import Service
from ._http import (
    MODEL_ID,
    SCOPE,
    SENT_PATH,
    ServiceError,
    StartResponse,
    error_body,
    given_key,
    log,
    read_body,
    respond,
)
from ._keys import ALL, KeyRing, Scope
from ._metrics import Metrics
from ._routes import (
    COLLECTION_ENDPOINTS,
    COLLECTION_HAS,
    COLLECTIONS,
    MCP,
    MCP_ON_COLLECTION,
    WITH_ID,
    Need,
    collection_route,
    endpoint_label,
    service_routes,
)

access_log = logging.getLogger("agentic_rag.access")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
OPEN = Scope(key_id="-", digest="no key", read=frozenset({ALL}), write=frozenset({ALL}))  # a service without keys
# the paths of one knowledge base that a collection also has (/v1/ask, ..., and /v1/documents/{id} below)
_ONE_KB = tuple(inner for inner, _ in COLLECTION_ENDPOINTS.values())
Seen = dict[str, str]  # what the access line says of a request: status, collection, key id
# an endpoint this app answers itself: (environ, method, path, seen, start_response) -> the reply
Answer = Callable[[dict, str, str, Seen, StartResponse], Iterable[bytes]]


def access_line(environ: dict, seen: Seen, sent: int, seconds: float) -> str:
    """A request in the Common Log Format (client address, -, -, [time], "request line", status,
    bytes sent), then its collection, key id (never the key) and milliseconds:
    127.0.0.1 - - [07/Dec/2026:15:04:05 +0000] "POST /v1/search HTTP/1.1" 200 512 collection=docs key=acme 41.3ms
    What the client sent is escaped: no quote, backslash or control character reaches the log."""
    target = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/") + \
        (f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else "")  # as sent, where the server says
    parts = (environ.get("REQUEST_METHOD", "-"), target[:300], environ.get("SERVER_PROTOCOL", "-"))
    request = " ".join("".join(c if " " < c < "\x7f" and c not in '"\\' else f"\\x{ord(c) & 0xff:02x}" for c in part)
                       for part in parts)
    when = time.strftime("%d/%b/%Y:%H:%M:%S %z")
    return (f'{environ.get("REMOTE_ADDR", "-")} - - [{when}] "{request}" {seen["status"]} {sent or "-"} '
            f'collection={seen["collection"]} key={seen["key"]} {seconds * 1000:.1f}ms')


class Collections:
    """A WSGI application over named Services: `Collections({"docs": Service(...), ...}, KeyRing(...))`.
    The services should share one Metrics (create_collections does this), so that /metrics counts them all."""

    def __init__(self, services: Mapping[str, Service], keys: KeyRing | None = None):
        if not services:
            raise ConfigurationError("give at least one collection: name=folder or name=postgresql://...")
        for name in services:
            if not NAME.fullmatch(name):
                raise ConfigurationError(f"collection name {name[:70]!r}: use 1-64 letters, digits and _.- "
                                         f"(starting with a letter or digit)")
        self.services = dict(services)
        self.keys = keys or KeyRing()
        first = next(iter(self.services.values()))
        self.limits, self.metrics = first.limits, first.metrics
        # the endpoints answered here, over all the collections (the routes of /v1/collections/{name}/...
        # and of one collection's own paths pass on to its Service)
        self._answers: dict[str, Answer] = {
            COLLECTIONS: self.listing, "/v1/models": self._models_reply, "/metrics": self._metrics,
            "/healthz": self._health, "/openapi.json": self._openapi, "/v1/chat/completions": self._chat}

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        seen = {"status": "500", "collection": "-", "key": "-"}

        def noting(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen["status"] = status.split(" ", 1)[0]
            return start_response(status, headers, exc_info)

        route = endpoint_label(path)
        span, token = tracing.start_request(f"{method} {route}", {
            "traceparent": environ.get("HTTP_TRACEPARENT", ""), "tracestate": environ.get("HTTP_TRACESTATE", "")},
            {"http.request.method": method, "http.route": route, "url.path": path[:200]})
        try:  # the request's span is current while it is answered: a run's span is its child
            reply = self._dispatch(environ, method, path, seen, noting)
        except ServiceError as exc:
            reply = respond(noting, exc.status, error_body(exc.kind, str(exc), path), exc.headers)
            self.metrics.requests.labels(endpoint_label(path), str(exc.status)).inc()  # answered here: counted here
        except Exception:  # never a traceback to the client: logged here, a plain 500 there
            log.exception("request %s %s failed", method, path)
            reply = respond(noting, 500, error_body("internal_error", "the server failed on this request; see its log"))
        finally:
            tracing.detach(token)
        return self._logged(reply, environ, seen, started, span)

    def _dispatch(self, environ: dict, method: str, path: str, seen: Seen,
                  start_response: StartResponse) -> Iterable[bytes]:
        """Answer here (the collections, the models, health and metrics over all of them), or pass the
        request on to its collection's Service with the caller's scope."""
        answer = self._answers.get(path)
        if answer is not None:
            return answer(environ, method, path, seen, start_response)
        if path.startswith(COLLECTIONS + "/"):
            return self._collection(environ, method, path, seen, start_response)
        if path.startswith(MCP_ON_COLLECTION.prefix):  # /mcp/{name}: that collection's MCP server
            name = path[len(MCP_ON_COLLECTION.prefix):]
            return self._enter(environ, start_response, name, "read", self._caller(environ, seen), MCP.path, seen)
        return self._one_kb(environ, path, seen, start_response)

    def _collection(self, environ: dict, method: str, path: str, seen: Seen,
                    start_response: StartResponse) -> Iterable[bytes]:
        """/v1/collections/{name}/...: the collection's endpoint (COLLECTION_ENDPOINTS, from the route
        table) passed on to its Service once the key may read it (write it, for documents)."""
        name, _, rest = path[len(COLLECTIONS) + 1:].partition("/")
        head, _, document = rest.partition("/")
        if head not in COLLECTION_ENDPOINTS or (document and head not in WITH_ID):
            raise ServiceError(404, "not_found", f"no such endpoint; a collection has {COLLECTION_HAS}")
        inner, need = COLLECTION_ENDPOINTS[head]
        inner = f"{inner}/{document}" if document else inner
        whole = f"{COLLECTIONS}/{{name}}/{head}"
        if not document and collection_route(method, whole) is None and collection_route(method, whole + "/{id}"):
            raise ServiceError(400, "invalid_request", f"give the document id: {method} {whole}/{{id}}")
        scope = self._caller(environ, seen)
        return self._enter(environ, start_response, name, need, scope, inner, seen)

    def _one_kb(self, environ: dict, path: str, seen: Seen, start_response: StartResponse) -> Iterable[bytes]:
        """A path of one knowledge base (/v1/ask, ...): answered by the only collection as a lone
        Service answers it; with several, a 404 that says to name one."""
        if len(self.services) == 1:
            only = next(iter(self.services))
            routes = service_routes(path)  # any path under /v1/documents asks for a write key first
            wanted: Need = routes[0].need if routes else "write" if path.startswith("/v1/documents") else None
            caller = self._caller(environ, seen) if wanted else None
            return self._enter(environ, start_response, only, wanted, caller, path, seen)
        if path == MCP.path:
            raise ServiceError(404, "not_found", f"this server has {len(self.services)} collections: name one, "
                                                 f"{MCP_ON_COLLECTION.path} (GET /v1/collections lists them)")
        if path in _ONE_KB or path.startswith("/v1/documents/"):
            raise ServiceError(404, "not_found", f"this server has {len(self.services)} collections: name one, "
                                                 f"/v1/collections/{{name}}{path.removeprefix('/v1')} "
                                                 f"(GET /v1/collections lists them)")
        raise ServiceError(404, "not_found", "no such endpoint; see /openapi.json")

    # -- the endpoints answered over all the collections -------------------------------------------

    def listing(self, environ: dict, method: str, path: str, seen: Seen,
                start_response: StartResponse) -> Iterable[bytes]:
        """GET /v1/collections: the collections the key may read, with its grants."""
        scope = self._caller(environ, seen)
        self._method(method, path, "GET")
        return respond(start_response, 200, {"object": "list", "data": [
            {"name": name, "read": True, "write": scope.may("write", name)}
            for name in scope.collections(self.services)]})

    def _models_reply(self, environ: dict, method: str, path: str, seen: Seen,
                      start_response: StartResponse) -> Iterable[bytes]:
        """GET /v1/models: one model per collection the key may read."""
        scope = self._caller(environ, seen)
        self._method(method, path, "GET")
        return respond(start_response, 200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "agentic-rag"}
            for name in self._models(scope)]})

    def _metrics(self, environ: dict, method: str, path: str, seen: Seen,
                 start_response: StartResponse) -> Iterable[bytes]:
        """GET /metrics: every collection's figures, for a key that reads them all with no filter."""
        scope = self._caller(environ, seen)
        if not (ALL in scope.read | scope.write and not scope.filter):
            raise ServiceError(403, "forbidden", "the figures are for a key that reads every collection "
                                                 "with no filter")
        return self._pass(environ, start_response, next(iter(self.services.values())), scope, path, seen)

    def _health(self, environ: dict, method: str, path: str, seen: Seen,
                start_response: StartResponse) -> Iterable[bytes]:
        """GET /healthz: with several collections, up and how many (no names: it needs no key)."""
        if len(self.services) == 1:
            return self._one_kb(environ, path, seen, start_response)
        self._method(method, path, "GET")
        return respond(start_response, 200, {"status": "ok", "collections": len(self.services)})

    def _openapi(self, environ: dict, method: str, path: str, seen: Seen,
                 start_response: StartResponse) -> Iterable[bytes]:
        """GET /openapi.json: the document, which every Service answers alike."""
        if len(self.services) == 1:
            return self._one_kb(environ, path, seen, start_response)
        self._method(method, path, "GET")
        return self._pass(environ, start_response, next(iter(self.services.values())), None, path, seen)

    def _chat(self, environ: dict, method: str, path: str, seen: Seen,
              start_response: StartResponse) -> Iterable[bytes]:
        """POST /v1/chat/completions: passed on to the collection its "model" names."""
        scope = self._caller(environ, seen)
        name = self._chat_collection(environ, scope)
        return self._enter(environ, start_response, name, "read", scope, path, seen)

    def _caller(self, environ: dict, seen: Seen) -> Scope:
        """The scope of the request's key (OPEN when the server has no keys); 401 without a valid one."""
        if not self.keys:
            return OPEN
        given = given_key(environ)
        if not given:
            raise ServiceError(401, "unauthorized", "an API key is needed: send 'Authorization: Bearer KEY'",
                               [("WWW-Authenticate", "Bearer")])
        scope = self.keys.lookup(given)
        if scope is None:
            raise ServiceError(401, "unauthorized", "the API key is not valid", [("WWW-Authenticate", "Bearer")])
        seen["key"] = scope.key_id
        return scope

    def _enter(self, environ: dict, start_response: StartResponse, name: str, need: Need, scope: Scope | None,
               inner: str, seen: Seen) -> Iterable[bytes]:
        """Pass the request to collection `name` once the key may `need` on it: a collection it may not
        read is as unknown as one that does not exist (404); one it may read but not write is 403."""
        service = self.services.get(name)
        if service is None or (need and scope is not None and not scope.may("read", name)):
            raise ServiceError(404, "not_found", f"no collection {name[:70]!r}; GET /v1/collections lists those "
                                                 f"this key may use")
        seen["collection"] = name
        if need == "write" and scope is not None and not scope.may("write", name):
            raise ServiceError(403, "forbidden", f"this key may read collection {name!r} but not write it; use a "
                                                 f"key that writes it")
        return self._pass(environ, start_response, service, scope, inner, seen)

    def _pass(self, environ: dict, start_response: StartResponse, service: Service, scope: Scope | None, inner: str,
              seen: Seen) -> Iterable[bytes]:
        passed = dict(environ, PATH_INFO=inner)
        passed[SCOPE], passed[SENT_PATH] = scope if scope is not None else OPEN, environ.get("PATH_INFO", "/")
        return service(passed, start_response)

    def _models(self, scope: Scope) -> list[str]:
        """The models a key may name: the collections it reads, or with one knowledge base the one
        model agentic-rag (its collection's own name is taken in a request too, but not listed)."""
        names = scope.collections(self.services)
        return [MODEL_ID] if len(self.services) == 1 and names else names

    def _chat_collection(self, environ: dict, scope: Scope) -> str:
        """The collection a chat request's "model" names; the body is read here (within the size limit)
        and handed on whole."""
        if environ.get("REQUEST_METHOD", "GET") != "POST":
            raise ServiceError(405, "method_not_allowed", "use POST /v1/chat/completions", [("Allow", "POST")])
        raw = read_body(environ, self.limits.max_body_bytes)
        environ["wsgi.input"] = io.BytesIO(raw)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ServiceError(400, "invalid_request", f"the body is not UTF-8 JSON ({type(exc).__name__})") from None
        model = body.get("model") if isinstance(body, dict) else None  # a body of no object: the endpoint says so
        names = scope.collections(self.services)
        if len(self.services) == 1 and (model in (None, MODEL_ID) or model in names):
            return next(iter(self.services))
        if not isinstance(model, str) or model not in names:
            listed = f"use {MODEL_ID!r}" if len(self.services) == 1 else \
                "the models are the collections (GET /v1/models lists those this key may use)"
            raise ServiceError(404, "model_not_found", f"model {str(model)[:70]!r} does not exist; {listed}")
        return model

    def _method(self, method: str, path: str, allowed: str) -> None:
        if method not in (allowed, "HEAD"):
            raise ServiceError(405, "method_not_allowed", f"{method} {path}: use {allowed}", [("Allow", allowed)])

    def _logged(self, reply: Iterable[bytes], environ: dict, seen: Seen, started: float,
                span: Any = None) -> Iterator[bytes]:
        """The reply, and once its last byte is sent (or the client went away while it was sent) one
        access line (access_line); the request's span ends then too."""
        sent = 0
        try:
            if environ.get("REQUEST_METHOD") != "HEAD":
                for part in reply:
                    sent += len(part)
                    yield part
        finally:
            close = getattr(reply, "close", None)
            if close is not None:
                close()
            access_log.info("%s", access_line(environ, seen, sent, time.perf_counter() - started))
            tracing.end_request(span, int(seen["status"]), {"agentic_rag.collection": seen["collection"],
                                                          "agentic_rag.key_id": seen["key"]})


def create_collections(model: Model, collections: Mapping[str, str | Path | KnowledgeBaseBackend],
                       keys: KeyRing | None = None, **options: Any) -> Collections:
    """A Collections app over `collections`: name -> a saved folder (str or Path; reloaded when another
    process saves) or a knowledge base object (a database one, or one in memory). The services share one
    Metrics and the other `options` (as Service takes them; not keys, which `keys` holds)."""
    metrics = Metrics(options.pop("multiprocess_dir", None))
    services = {}
    for name, kb in collections.items():
        if isinstance(kb, (str, Path)):
            services[name] = Service(model, kb_dir=kb, metrics=metrics, name=name, **options)
        else:
            services[name] = Service(model, kb=kb, metrics=metrics, name=name, **options)
    return Collections(services, keys)
