"""Several knowledge bases behind one server, each by its name: a collection is a Service of its own
(its own generation, reload, query cache and write lock); the keys, their scopes and the access log
are this app's.

    GET    /v1/collections                          the collections the key may read
    POST   /v1/collections/{name}/ask | search      as /v1/ask, /v1/search of one knowledge base
    POST   /v1/collections/{name}/documents         as /v1/documents
    DELETE /v1/collections/{name}/documents/{id}
    GET    /v1/collections/{name}/healthz
    POST   /v1/chat/completions                     "model" names the collection
    GET    /v1/models                               one model per collection the key may read
    GET    /healthz, /metrics, /openapi.json

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
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ..core import _otel
from ..core._errors import ConfigurationError
from ..kb import KnowledgeBaseBackend
from ._app import (
    COLLECTION_ENDPOINTS,
    MODEL_ID,
    SCOPE,
    SENT_PATH,
    Service,
    ServiceError,
    _error,
    _given_key,
    endpoint_label,
    log,
    read_body,
    respond,
)
from ._keys import ALL, KeyRing, Scope
from ._metrics import Metrics

access_log = logging.getLogger("agentic_rag.access")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
OPEN = Scope(key_id="-", digest="no key", read=frozenset({ALL}), write=frozenset({ALL}))  # a service without keys
_ONE_KB = ("/v1/ask", "/v1/search", "/v1/documents", "/healthz")  # paths of one knowledge base


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

    def __call__(self, environ: dict, start_response) -> Iterable[bytes]:
        started = time.perf_counter()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        seen = {"status": "500", "collection": "-", "key": "-"}

        def noting(status: str, headers, exc_info=None):
            seen["status"] = status.split(" ", 1)[0]
            return start_response(status, headers, exc_info)

        route = endpoint_label(path)
        span, token = _otel.start_request(f"{method} {route}", {
            "traceparent": environ.get("HTTP_TRACEPARENT", ""), "tracestate": environ.get("HTTP_TRACESTATE", "")},
            {"http.request.method": method, "http.route": route, "url.path": path[:200]})
        try:  # the request's span is current while it is answered: a run's span is its child
            reply = self._dispatch(environ, method, path, seen, noting)
        except ServiceError as exc:
            reply = respond(noting, exc.status, _error(exc.kind, str(exc)), exc.headers)
            self.metrics.requests.labels(endpoint_label(path), str(exc.status)).inc()  # answered here: counted here
        except Exception:  # never a traceback to the client: logged here, a plain 500 there
            log.exception("request %s %s failed", method, path)
            reply = respond(noting, 500, _error("internal_error", "the server failed on this request; see its log"))
        finally:
            _otel.detach(token)
        return self._logged(reply, method, path, seen, started, span)

    def _dispatch(self, environ: dict, method: str, path: str, seen: dict, start_response) -> Iterable[bytes]:
        """Answer here (the collections, the models, health and metrics over all of them), or pass the
        request on to its collection's Service with the caller's scope."""
        if path == "/v1/collections":
            scope = self._caller(environ, seen)
            self._method(method, path, "GET")
            return respond(start_response, 200, {"object": "list", "data": [
                {"name": name, "read": True, "write": scope.may("write", name)}
                for name in scope.collections(self.services)]})
        if path == "/v1/models":
            scope = self._caller(environ, seen)
            self._method(method, path, "GET")
            return respond(start_response, 200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "agentic-rag"}
                for name in self._models(scope)]})
        if path == "/metrics":
            scope = self._caller(environ, seen)
            if not (ALL in scope.read | scope.write and not scope.filter):
                raise ServiceError(403, "forbidden", "the figures are for a key that reads every collection "
                                                     "with no filter")
            return self._pass(environ, start_response, next(iter(self.services.values())), scope, path, seen)
        if path in ("/healthz", "/openapi.json") and len(self.services) > 1:
            self._method(method, path, "GET")
            if path == "/openapi.json":
                return self._pass(environ, start_response, next(iter(self.services.values())), None, path, seen)
            return respond(start_response, 200, {"status": "ok", "collections": len(self.services)})
        if path == "/v1/chat/completions":
            scope = self._caller(environ, seen)
            name = self._chat_collection(environ, scope)
            return self._enter(environ, start_response, name, "read", scope, path, seen)
        if path.startswith("/v1/collections/"):
            name, _, rest = path[len("/v1/collections/"):].partition("/")
            head, _, document = rest.partition("/")
            if head not in COLLECTION_ENDPOINTS or (document and head != "documents"):
                raise ServiceError(404, "not_found", "no such endpoint; a collection has ask, search, documents, "
                                                     "documents/{id} and healthz")
            inner, need = COLLECTION_ENDPOINTS[head]
            inner = f"{inner}/{document}" if document else inner
            if head == "documents" and method == "DELETE" and not document:
                raise ServiceError(400, "invalid_request", "give the document id: DELETE "
                                                           "/v1/collections/{name}/documents/{id}")
            scope = self._caller(environ, seen)
            return self._enter(environ, start_response, name, need, scope, inner, seen)
        if len(self.services) == 1:  # one knowledge base: its own paths, as a lone Service has them
            only = next(iter(self.services))
            wanted = "write" if path.startswith("/v1/documents") else "read" if path in _ONE_KB[:2] else None
            caller = self._caller(environ, seen) if wanted else None
            return self._enter(environ, start_response, only, wanted, caller, path, seen)
        if path in _ONE_KB or path.startswith("/v1/documents/"):
            raise ServiceError(404, "not_found", f"this server has {len(self.services)} collections: name one, "
                                                 f"/v1/collections/{{name}}{path.removeprefix('/v1')} "
                                                 f"(GET /v1/collections lists them)")
        raise ServiceError(404, "not_found", "no such endpoint; see /openapi.json")

    def _caller(self, environ: dict, seen: dict) -> Scope:
        """The scope of the request's key (OPEN when the server has no keys); 401 without a valid one."""
        if not self.keys:
            return OPEN
        given = _given_key(environ)
        if not given:
            raise ServiceError(401, "unauthorized", "an API key is needed: send 'Authorization: Bearer KEY'",
                               [("WWW-Authenticate", "Bearer")])
        scope = self.keys.lookup(given)
        if scope is None:
            raise ServiceError(401, "unauthorized", "the API key is not valid", [("WWW-Authenticate", "Bearer")])
        seen["key"] = scope.key_id
        return scope

    def _enter(self, environ: dict, start_response, name: str, need: str | None, scope: Scope | None, inner: str,
               seen: dict) -> Iterable[bytes]:
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

    def _pass(self, environ: dict, start_response, service: Service, scope: Scope | None, inner: str,
              seen: dict) -> Iterable[bytes]:
        passed = dict(environ, PATH_INFO=inner)
        passed[SCOPE], passed[SENT_PATH] = scope if scope is not None else OPEN, environ.get("PATH_INFO", "/")
        return service(passed, start_response)

    def _models(self, scope: Scope) -> list[str]:
        names = scope.collections(self.services)
        return [MODEL_ID, *names] if len(self.services) == 1 and names else names

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
        if len(self.services) == 1 and model in (None, MODEL_ID):
            return next(iter(self.services))
        if not isinstance(model, str) or model not in self._models(scope):
            raise ServiceError(404, "model_not_found", f"model {str(model)[:70]!r} does not exist; the models are "
                                                       f"the collections (GET /v1/models lists those this key "
                                                       f"may use)")
        return model

    def _method(self, method: str, path: str, allowed: str) -> None:
        if method not in (allowed, "HEAD"):
            raise ServiceError(405, "method_not_allowed", f"{method} {path}: use {allowed}", [("Allow", allowed)])

    def _logged(self, reply: Iterable[bytes], method: str, path: str, seen: dict, started: float,
                span=None) -> Iterator[bytes]:
        """The reply, and once its last byte is sent (or the client went away while it was sent) one
        access line: method, path, status, milliseconds, collection and key id (never the key); the
        request's span ends then too."""
        try:
            if method != "HEAD":
                yield from reply
        finally:
            close = getattr(reply, "close", None)
            if close is not None:
                close()
            access_log.info("%s %s %s %.1fms collection=%s key=%s", method, path[:200], seen["status"],
                            (time.perf_counter() - started) * 1000, seen["collection"], seen["key"])
            _otel.end_request(span, int(seen["status"]), {"agentic_rag.collection": seen["collection"],
                                                          "agentic_rag.key_id": seen["key"]})


def create_collections(model, collections: Mapping[str, str | Path | KnowledgeBaseBackend],
                       keys: KeyRing | None = None, **options) -> Collections:
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
