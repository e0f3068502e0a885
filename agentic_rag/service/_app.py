"""The WSGI application: routing, keys, limits, the query cache, reloads and writes, JSON errors."""
from __future__ import annotations

import base64
import errno
import hmac
import json
import logging
import math
import queue
import re
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ..cli._display import result_json
from ..core import _otel
from ..core._config import Config, as_config
from ..core._errors import (
    AccessDenied,
    AgenticRAGError,
    ConfigurationError,
    ConnectionLost,
    RetrievalError,
    StorageError,
    WriteConflict,
)
from ..kb import Document, KnowledgeBase, KnowledgeBaseBackend, writer_lock
from ..kb.indexes._filters import matches
from ..kb.ingestion._documents import read_file
from ..kb.ingestion._files import MAX_UPLOAD_BYTES
from ..kb.ingestion._gzip import gunzip
from ..kb.ingestion._loaders import IMAGE_SUFFIXES, Unreadable, unpacked_size
from ..loop._driver import run_agentic_rag
from ..loop._state import new_state
from ._cache import AnswerCache, cache_key
from ._conversations import ConversationStore
from ._keys import Scope
from ._metrics import Metrics
from ._schemas import AskRequest, DocumentsRequest, SearchRequest, WriteReply

log = logging.getLogger("agentic_rag.service")
MODEL_ID = "agentic-rag"  # the one model /v1/models lists: the agent, whatever model it runs on
SCOPE = "agentic_rag.scope"  # the environ key where a collections app puts the caller's Scope (no header can)
SENT_PATH = "agentic_rag.sent_path"  # and the path the client sent, for messages that name it
Schema = TypeVar("Schema", bound=BaseModel)


@dataclass(frozen=True)
class ServiceLimits:
    """What one request may ask; beyond it the reply is 413, 400 or 429, never a hung worker."""

    max_body_bytes: int = 1_000_000
    max_question_chars: int = 2_000
    max_batch: int = 100             # documents in one POST /v1/documents
    max_concurrent_runs: int = 4     # agent runs at once in this process; more get 429
    write_wait_s: float = 10.0       # how long a write waits for another writer before 409
    max_file_bytes: int = MAX_UPLOAD_BYTES  # one uploaded file, decoded, or unpacked (.docx); more is refused
    max_messages: int = 256          # messages in one chat request (a run keeps 8 turns of them)
    max_instruction_chars: int = 4_000  # a chat request's system messages together
    max_conversations: int = 10_000  # kept conversations; the longest idle goes first
    conversation_idle_s: float = 86_400.0  # a conversation with no turn for this long has expired
    conversation_wait_s: float = 30.0  # a turn waits this long for its conversation's turn under way, then 409


class ServiceError(AgenticRAGError):
    """A reply other than 200: HTTP status, error type and a one-line message."""

    def __init__(self, status: int, kind: str, message: str, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.status, self.kind, self.headers = status, kind, list(headers)


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            507: "Insufficient Storage"}
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a write that failed for want of space: 507, not 503
_SERVER_PATH = re.compile(r"(?<![\w.:/~-])/[^\s:;,'\"()]+")  # an absolute path, as messages write one
# a database URL (its passwords masked or not), without the punctuation a sentence puts after it ("URL: ...")
_DATABASE_URL = re.compile(r"postgres(?:ql)?://[^\s'\"()]*[^\s'\"():;,.]", re.IGNORECASE)
_RETRY = (("Retry-After", "5"),)  # a database that dropped, or a folder that cannot be read, may be back soon
# the server's own database failing a request or a run (not the request, not the model) -> the reply's
# status, kind and headers: a lost connection may be back in a moment; a right the role lacks is its operator's
_DATABASE_FAILED: dict[type[AgenticRAGError], tuple[int, str, tuple]] = {
    ConnectionLost: (503, "unavailable", _RETRY), AccessDenied: (500, "internal_error", ())}


class Service:
    """A WSGI application over one knowledge base: `Service(...)(environ, start_response)`.

    With `kb_dir`, the knowledge base is read from that folder, reloaded before a request whenever
    another process saved a new generation there, and every write is saved there (a delta segment)
    before the reply. Without it, `kb` is served from memory and writes stay in memory."""

    def __init__(self, model, kb_dir: str | Path | None = None, kb: KnowledgeBaseBackend | None = None, tools=(),
                 config: Config | None = None, model_name: str = "offline", read_keys: Iterable[str] = (),
                 write_keys: Iterable[str] = (), limits: ServiceLimits | None = None, cache_size: int = 1024,
                 cache_ttl_s: float = 300.0, loader: Callable[[Path], KnowledgeBase] | None = None,
                 multiprocess_dir: str | None = None, state_dir: str | Path | None = None,
                 metrics: Metrics | None = None, name: str = "default"):
        if kb_dir is not None and kb is not None and not kb.saves_to_folder:
            raise ConfigurationError(f"kb_dir {kb_dir} is a saved folder, but kb ({type(kb).__name__}) does not "
                                     f"save to one: give such a knowledge base (a database) without kb_dir")
        self.model, self.tools, self.config, self.model_name = model, tuple(tools), as_config(config), model_name
        self.kb_dir = Path(kb_dir) if kb_dir is not None else None
        self._load: Callable[[Path], KnowledgeBase] = loader or KnowledgeBase.load
        # what self._load last read from kb_dir, None until it has: a kb given beside kb_dir was
        # loaded by someone else, so the first request reads the folder again rather than trust it
        self._saved: KnowledgeBase | None = None
        if kb is None:
            if self.kb_dir is None:
                raise ConfigurationError("give the service a knowledge base: kb_dir (a saved folder) or kb")
            kb = self._saved = self._load(self.kb_dir)
        self._kb: KnowledgeBaseBackend = kb  # the one served: self._saved with kb_dir
        self._memory_generation = 0
        self.write_keys = tuple(write_keys)
        self.read_keys = tuple(read_keys) + self.write_keys  # a write key may read too
        self.limits = limits or ServiceLimits()
        self.cache = AnswerCache(cache_size, cache_ttl_s)
        self.metrics = metrics or Metrics(multiprocess_dir)  # a collections app shares one among its services
        self.name = name  # the collection it serves, in a collections app
        self._runs = threading.BoundedSemaphore(self.limits.max_concurrent_runs)
        # conversations: in state_dir, shared by every process serving with it; else this service's own
        # temporary folder, removed with it
        self._state_tmp = tempfile.TemporaryDirectory(prefix="agentic-rag-state-") if state_dir is None else None
        self.conversations = ConversationStore(
            state_dir if state_dir is not None else self._state_tmp.name,  # type: ignore[union-attr]
            self.limits.max_conversations, self.limits.conversation_idle_s, self.limits.conversation_wait_s)
        self._reload = threading.Lock()
        self._writing = threading.Lock()
        self._reading = threading.Lock()  # uploaded files are read one request at a time (see add_documents)
        from ._chat_endpoint import ChatEndpoint  # here: it imports this module

        self.chat = ChatEndpoint(self)
        self._routes = {  # (method, path) -> (handler, the key it needs: None, "read" or "write")
            ("POST", "/v1/ask"): (self.ask, "read"), ("POST", "/v1/search"): (self.search, "read"),
            ("POST", "/v1/documents"): (self.add_documents, "write"),
            ("POST", "/v1/chat/completions"): (self.chat.reply, "read"),
            ("GET", "/v1/models"): (self.models, "read"), ("GET", "/healthz"): (self.health, None),
            ("GET", "/metrics"): (self.metrics_text, "read"), ("GET", "/openapi.json"): (self.openapi, None)}

    # -- the knowledge base and its generation ----------------------------------------------------

    def current(self) -> tuple[KnowledgeBaseBackend, str | None]:
        """The knowledge base and its generation, taken together; reloaded first if the folder no
        longer holds what it was loaded from (another process saved, or it was built again)."""
        if self.kb_dir is None:  # in memory, or a database (which names its own generation)
            kb = self._kb
            return kb, f"memory-{self._memory_generation}" if kb.saves_to_folder else kb.generation(None)
        kb = self._kb
        if not _holds_saved(self._saved, self.kb_dir):
            with self._reload:
                kb = self._kb
                if not _holds_saved(self._saved, self.kb_dir):
                    try:
                        kb = self._kb = self._saved = self._load(self.kb_dir)
                    except AgenticRAGError as exc:
                        log.error("the knowledge base cannot be loaded: %s", exc)
                        raise ServiceError(503, "unavailable", f"the knowledge base cannot be loaded: "
                                                               f"{self._public(str(exc))}",
                                           _RETRY) from None
        return kb, kb.generation(self.kb_dir)

    def _write(self, change: Callable[[KnowledgeBaseBackend], dict]) -> dict:
        """Apply one change with no other writer (thread or process) at work, save it, and reply; a
        change that fails, or fails to save, is dropped (the saved knowledge base is read again, and
        the cache, which may hold answers that saw it, is emptied)."""
        wait = self.limits.write_wait_s
        started = time.monotonic()
        if not self._writing.acquire(timeout=wait):
            raise ServiceError(409, "conflict", f"another write has been going on for {wait:g} s; retry")
        try:
            if self.kb_dir is None:
                result = change(self._kb)
                self._memory_generation += 1
                return dict(result, generation=self.current()[1])
            with writer_lock(self.kb_dir, wait_s=max(0.0, wait - (time.monotonic() - started))):
                kb = self.current()[0]
                try:
                    result = change(kb)
                    if any(result.get(k) for k in ("added", "replaced", "deleted")):  # else nothing to save
                        kb.save(self.kb_dir)
                except ServiceError:  # a refusal, raised before the change: nothing changed, nothing to read again
                    raise
                except BaseException:
                    self.cache.clear()
                    self._kb = self._saved = self._load(self.kb_dir)
                    raise
            return dict(result, generation=kb.generation(self.kb_dir))
        except WriteConflict:
            raise ServiceError(409, "conflict", "another writer is at work or saved meanwhile; retry") from None
        except StorageError as exc:  # the server's disk, not the request: nothing was saved, nothing is lost
            log.error("a write was not saved: %s", exc)
            status, kind = (507, "insufficient_storage") if exc.errno in _FULL else (503, "unavailable")
            raise ServiceError(status, kind, f"{self._public(str(exc))}; nothing was saved") from None
        finally:
            self._writing.release()

    def _public(self, message: str) -> str:
        """A message for a client: the knowledge base's folder by its name, a database as "the
        database" (its user, host and name are the server's), and no other absolute path of the
        server (the log has the whole message)."""
        message = _DATABASE_URL.sub("the database", message)
        if self.kb_dir is not None:
            for form in sorted({str(self.kb_dir.resolve()), str(self.kb_dir.absolute()), str(self.kb_dir)},
                               key=len, reverse=True):
                message = message.replace(form, self.kb_dir.resolve().name or "the knowledge base")
        return _SERVER_PATH.sub("(a server path)", message)

    # -- WSGI --------------------------------------------------------------------------------------

    def __call__(self, environ: dict, start_response) -> Iterable[bytes]:
        started = time.perf_counter()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        endpoint = endpoint_label(self._sent_path(environ))
        try:
            handler, need = self._route("GET" if method == "HEAD" else method, path, self._sent_path(environ))
            self._authorize(environ, need)
            status, body, headers = handler(environ)
        except ServiceError as exc:
            status, body, headers = exc.status, _error(exc.kind, str(exc)), exc.headers
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            status, body, headers = 400, _error("invalid_request", f"{where}: {first['msg']}"), []
        except tuple(_DATABASE_FAILED) as exc:
            log.error("request %s %s: %s", method, path, exc)
            status, kind, retry = next(reply for cls, reply in _DATABASE_FAILED.items() if isinstance(exc, cls))
            body, headers = _error(kind, self._public(str(exc))), list(retry)
        except (ConfigurationError, RetrievalError) as exc:  # bad input, or nothing to search (an empty base)
            status, body, headers = 400, _error("invalid_request", self._public(str(exc))), []
        except AgenticRAGError as exc:
            log.error("request %s %s failed: %s", method, path, exc)
            status, body, headers = 500, _error("internal_error", self._public(str(exc))), []
        except Exception:  # never a traceback to the client: logged here, a plain 500 there
            log.exception("request %s %s failed", method, path)
            status, body, headers = 500, _error("internal_error", "the server failed on this request; see its log"), []
        labels = (endpoint, str(status))
        self.metrics.requests.labels(*labels).inc()
        if isinstance(body, Iterator):  # a stream: latency counts until its last byte
            start_response(f"{status} {_REASONS[status]}", [("Content-Type", "text/event-stream; charset=utf-8"),
                                                             ("Cache-Control", "no-cache"), *headers])
            return self._timed(body, labels, started)
        kind = "text/plain; version=0.0.4" if path == "/metrics" and status == 200 else "application/json"
        self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)
        reply = respond(start_response, status, body, headers, kind)
        return [] if method == "HEAD" else reply

    def _timed(self, stream: Iterator[bytes], labels: tuple[str, str], started: float) -> Iterator[bytes]:
        try:
            yield from stream
        finally:
            self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)

    def _route(self, method: str, path: str, shown: str):
        """The handler of (method, path) and the key it needs; a refusal names `shown`, the path sent."""
        if path.startswith("/v1/documents/"):
            if method != "DELETE":
                raise ServiceError(405, "method_not_allowed", f"{method} {shown}: use DELETE", [("Allow", "DELETE")])
            return self.delete_document, "write"
        if (method, path) in self._routes:
            return self._routes[(method, path)]
        allowed = [m for m, p in self._routes if p == path]
        if allowed:
            raise ServiceError(405, "method_not_allowed", f"{method} {shown}: use {', '.join(allowed)}",
                               [("Allow", ", ".join(allowed))])
        raise ServiceError(404, "not_found", "no such endpoint; see /openapi.json")

    @staticmethod
    def _sent_path(environ: dict) -> str:
        """The path as the client sent it (a collections app passes on its own part of it)."""
        return environ.get(SENT_PATH) or environ.get("PATH_INFO", "/")

    def _authorize(self, environ: dict, need: str | None) -> None:
        """Keys, when any are configured: a read key for reads, a write key for writes, compared in
        constant time (every key is compared, so the time does not say which one is near). A request
        a collections app passes on carries its caller's Scope, checked there."""
        if need is None or SCOPE in environ or not self.read_keys:
            return
        given = _given_key(environ)
        if not given:
            raise ServiceError(401, "unauthorized", "an API key is needed: send 'Authorization: Bearer KEY'",
                               [("WWW-Authenticate", "Bearer")])
        reads = [hmac.compare_digest(given.encode(), key.encode()) for key in self.read_keys]
        writes = [hmac.compare_digest(given.encode(), key.encode()) for key in self.write_keys]
        if not any(reads):
            raise ServiceError(401, "unauthorized", "the API key is not valid", [("WWW-Authenticate", "Bearer")])
        if need == "write" and not any(writes):
            raise ServiceError(403, "forbidden", "this key may read but not write; use a write key")

    def _body(self, environ: dict, schema: type[Schema]) -> Schema:
        """The request's JSON body as `schema` (see _json)."""
        return schema.model_validate(self._json(environ))

    def _json(self, environ: dict) -> dict:
        """The request's JSON body, an object; 415 unless it says it is JSON (so that a web page
        cannot post it without the browser asking first), 413 past max_body_bytes, 400 if it is not JSON."""
        if environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower() != "application/json":
            raise ServiceError(415, "unsupported_media_type", "send the body as Content-Type: application/json")
        raw = read_body(environ, self.limits.max_body_bytes)
        try:  # NaN and Infinity are not JSON: kept in metadata they would come back in replies strict clients refuse
            data = json.loads(raw.decode("utf-8"), parse_constant=_not_json, parse_float=_finite) if raw else None
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            why = str(exc) if isinstance(exc, _NotJSON) else type(exc).__name__
            raise ServiceError(400, "invalid_request", f"the body is not UTF-8 JSON ({why})") from None
        if not isinstance(data, dict):
            raise ServiceError(400, "invalid_request", "send a JSON object as the body")
        return data

    # -- the caller's scope ------------------------------------------------------------------------

    def scope_filter(self, environ: dict) -> dict:
        """The filter the caller's key keeps every search to ({}: none)."""
        scope: Scope | None = environ.get(SCOPE)
        return scope.filter if scope is not None else {}

    def owner_key(self, environ: dict) -> str | None:
        """What the caller's conversations are bound to: its key (None when the service has none), or
        under a collections app this collection and the key's scope (its digest and filter)."""
        scope: Scope | None = environ.get(SCOPE)
        if scope is not None:
            return f"{self.name}|{scope.owner}"
        return _given_key(environ) if self.read_keys else None

    # -- endpoints ---------------------------------------------------------------------------------

    def ask(self, environ: dict):
        request = self._body(environ, AskRequest)
        ready = self._prepare(request, scope_filter=self.scope_filter(environ))
        if request.stream:
            return 200, self._stream_ask(ready), []
        return 200, self._finish(ready), []

    def _settings(self, request: AskRequest) -> Config:
        """The service's settings with the request's run settings, each bounded by the service's own."""
        asked = request.settings.model_dump(exclude_none=True)
        return replace(self.config, **{name: min(value, getattr(self.config, name)) for name, value in asked.items()})

    def _prepare(self, request: AskRequest, history: list[dict] | None = None, instructions: str = "",
                 scope_filter: dict | None = None) -> dict:
        """Everything a run needs that can fail before it starts: the checked question, the knowledge
        base and its generation, the settings, the cache key, the run's own input checks, and the cached
        reply or a run slot (429 when every slot is taken). A stream's errors thus come before its 200.
        A follow-up's `history` (checked messages) and a chat's `instructions` are part of its cache key;
        so is the key's `scope_filter`, which every search of the run keeps to with the request's."""
        question = request.question.strip()
        if not question:
            raise ServiceError(400, "invalid_request", "the question is empty")
        if len(question) > self.limits.max_question_chars:
            raise ServiceError(400, "invalid_request", f"the question has {len(question)} characters; the limit "
                                                       f"is {self.limits.max_question_chars}")
        (kb, generation), config = self.current(), self._settings(request)
        conversation = [history, instructions] if history or instructions else []  # a single question's key as ever
        key = cache_key(question, request.filters, asdict(config), self.model_name, generation, *conversation,
                        *([{"scope": scope_filter}] if scope_filter else []))
        ready = {"question": question, "kb": kb, "generation": generation, "config": config, "key": key,
                 "scope": scope_filter or {}, "filters": request.filters, "store": request.cache,
                 "history": history or [],
                 "trace_context": _otel.current_context(),  # the request's span, for a stream's thread
                 "instructions": instructions}
        if request.cache and (cached := self.cache.get(key)) is not None:
            self.metrics.cache.labels("hit").inc()
            return dict(ready, cached=dict(cached, question=question, cached=True))
        if request.cache:
            self.metrics.cache.labels("miss").inc()
        # the run's own checks (a question too long for its budget): before a stream's 200
        new_state(question, config, history, instructions)
        if not self._runs.acquire(blocking=False):
            raise ServiceError(429, "too_many_requests", f"{self.limits.max_concurrent_runs} questions are being "
                                                         f"answered; retry in a moment", [("Retry-After", "1")])
        return ready

    def _finish(self, ready: dict, on_token: Callable[[str], object] | None = None) -> dict:
        """The run `_prepare` made ready (its slot released at the end), or its cached reply: the fields
        of `ask --json` and the generation it answered from. A run that failed is a 502, unless the
        database failed it: 503 when its connection was lost, 500 when its role lacks a right."""
        if "cached" in ready:
            if on_token:
                on_token(ready["cached"]["answer"])
            return ready["cached"]
        try:
            view = scoped(ready["kb"], ready["scope"])  # the request's filters narrow the key's scope
            view = view.restricted(ready["filters"]) if ready["filters"] else view
            state = run_agentic_rag(ready["question"], view, self.model, self.tools, ready["config"],
                                    on_token=on_token, history=ready["history"], instructions=ready["instructions"])
        finally:
            self._runs.release()
        self.metrics.run(state, self.model_name)
        if state["stop_reason"] == "error":
            log.error("a run failed: %s", state["error"])  # the whole line: the reply's shows no server path or URL
            status, kind, headers = next((reply for cls, reply in _DATABASE_FAILED.items()
                                          if cls.__name__ == state["error_type"]), (502, "model_error", ()))
            raise ServiceError(status, kind, f"the run failed: {self._public(state['error'] or '')}", headers)
        reply = dict(result_json(state, self.model_name), generation=ready["generation"], cached=False)
        # kept only when it answers the same next time: not cut short, no tool (a clock, a database, the web)
        if ready["store"] and state["stop_reason"] not in ("deadline", "token_budget") and not state["used_tools"]:
            self.cache.put(ready["key"], reply)
        return reply

    def _streamed(self, work: Callable[[Callable[[str], object]], dict], context=None) -> queue.Queue:
        """Run `work(on_token)` in a thread; the queue gets ("draft", text) pieces, then ("answer",
        reply) or ("error", (status, kind, message)), then None; `context` (the request's tracing context)
        is current in the thread."""
        items: queue.Queue = queue.Queue()

        def run():
            try:
                with _otel.attached(context):  # the request's span: the run's parent in this thread too
                    items.put(("answer", work(lambda text: items.put(("draft", text)))))
            except ServiceError as exc:
                items.put(("error", (exc.status, exc.kind, str(exc))))
            except Exception:
                log.exception("a streamed request failed")
                items.put(("error", (500, "internal_error", "the server failed on this request; see its log")))
            items.put(None)

        threading.Thread(target=run, daemon=True).start()
        return items

    def _stream_ask(self, ready: dict) -> Iterator[bytes]:
        """Server-sent events: `draft` pieces as the model writes, then `answer` (the checked reply,
        which replaces the draft) or `error`, then `done`."""
        items = self._streamed(lambda on_token: self._finish(ready, on_token), ready["trace_context"])
        while (item := items.get()) is not None:
            kind, value = item
            data = {"text": value} if kind == "draft" else value if kind == "answer" else \
                {"error": {"status": value[0], "type": value[1], "message": value[2]}}
            yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
        yield b"event: done\ndata: {}\n\n"

    def search(self, environ: dict):
        request = self._body(environ, SearchRequest)
        kb, generation = self.current()
        hits = scoped(kb, self.scope_filter(environ)).search(request.query, k=request.k, mode=request.mode,
                                                             filters=request.filters)
        return 200, {"hits": [hit.model_dump() for hit in hits], "generation": generation}, []

    def add_documents(self, environ: dict):
        request = self._body(environ, DocumentsRequest)
        if len(request.documents) > self.limits.max_batch:
            raise ServiceError(400, "invalid_request", f"{len(request.documents)} documents in one request; the "
                                                       f"limit is {self.limits.max_batch}")
        scope = self.scope_filter(environ)
        documents = [within_scope(d, scope) for d in self._read_uploads(request.documents)]

        def change(kb: KnowledgeBaseBackend) -> dict:
            if scope:  # an id held outside the scope, or shared with another, is not this key's to replace
                ids = [d.id for d in documents]
                if taken := set(kb.held_documents(ids)) - set(kb.held_documents(ids, scope, every_member=True)):
                    raise ServiceError(403, "forbidden", f"document {min(taken)!r} cannot be written with this "
                                                         f"key: its id is taken outside the key's scope; choose "
                                                         f"another id")
            added = kb.add_documents(documents)
            return {"added": added.added, "replaced": added.replaced, "unchanged": added.unchanged,
                    "chunks": added.chunks}

        return 200, WriteReply(**self._write(change)).model_dump(), []

    def _read_uploads(self, given: list) -> list[Document]:
        """The request's documents. Its files are read one request at a time in the process, and
        together may hold (or a .docx unpack to) max_file_bytes: python-docx takes about 25 times a
        .docx's unpacked size in memory and seconds for every few MB, so neither parallel uploads nor
        many files in one request may multiply that."""
        if not any(d.file for d in given):
            return [_document(d, self.limits.max_file_bytes) for d in given]
        if not self._reading.acquire(timeout=self.limits.write_wait_s):
            raise ServiceError(503, "unavailable", f"other uploads have been read for {self.limits.write_wait_s:g} "
                                                   f"s; retry", [("Retry-After", "5")])
        try:
            left, documents = self.limits.max_file_bytes, []
            for d in given:
                cost = _upload_size(d, self.limits.max_file_bytes)
                if cost > left and left < self.limits.max_file_bytes:  # alone it would be within the limit
                    raise ServiceError(413, "too_large", f"the request's files pass {self.limits.max_file_bytes:,} "
                                                         f"bytes together (a .docx as unpacked, a .gz as "
                                                         f"decompressed); send them in several requests")
                documents.append(_document(d, left))
                left -= cost
            return documents
        finally:
            self._reading.release()

    def delete_document(self, environ: dict):
        try:  # PATH_INFO is already percent-decoded, its bytes as latin-1 (PEP 3333): UTF-8 again, once
            doc_id = environ["PATH_INFO"][len("/v1/documents/"):].encode("latin-1").decode("utf-8")
        except UnicodeError:
            raise ServiceError(400, "invalid_request", "the document id is not UTF-8") from None
        if not doc_id:
            raise ServiceError(400, "invalid_request", "give the document id: DELETE /v1/documents/{id}")
        scope = self.scope_filter(environ)  # a document not wholly inside the key's scope is as good as unknown
        reply = self._write(lambda kb: {"deleted": kb.delete_documents(
            kb.held_documents([doc_id], scope, every_member=True) if scope else [doc_id])})
        if not reply["deleted"]:
            raise ServiceError(404, "not_found", f"no document {doc_id!r} in the knowledge base")
        return 200, WriteReply(**reply).model_dump(), []

    def models(self, environ: dict):
        return 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0,
                                                 "owned_by": "agentic-rag"}]}, []

    def health(self, environ: dict):
        kb, generation = self.current()
        return 200, {"status": "ok", "generation": generation, "documents": kb.document_count, "chunks": len(kb)}, []

    def metrics_text(self, environ: dict):
        return 200, self.metrics.text(), []

    def openapi(self, environ: dict):
        from ._openapi import openapi

        return 200, openapi(), []


class _NotJSON(ConfigurationError, ValueError):
    """A constant Python's parser takes that JSON has not (a ValueError, as the parser's own errors are)."""


def _not_json(constant: str):
    raise _NotJSON(f"{constant} is not a JSON number; send a number or null")


def _finite(number: str) -> float:
    """A JSON number as a float; one too large for a float (1e999) is refused, not made Infinity."""
    value = float(number)
    if math.isinf(value):
        raise _NotJSON(f"{number[:20]} is too large a number; send one within a double's range")
    return value


# a collection's endpoints: the path after /v1/collections/{name}/ -> (the Service's own path, the grant it needs)
COLLECTION_ENDPOINTS = {"ask": ("/v1/ask", "read"), "search": ("/v1/search", "read"),
                        "documents": ("/v1/documents", "write"), "healthz": ("/healthz", "read")}
_LABELLED = ("/v1/ask", "/v1/search", "/v1/documents", "/v1/chat/completions", "/v1/models", "/healthz", "/metrics",
           "/openapi.json")  # the endpoints of one knowledge base's service, each its own label


def endpoint_label(path: str) -> str:
    """A path as metrics and spans name it: its endpoint, never a collection's name, a document's id or
    a path a client made up ("other")."""
    if path.startswith("/v1/collections/"):
        head, _, document = path[len("/v1/collections/"):].partition("/")[2].partition("/")
        if head not in COLLECTION_ENDPOINTS or (document and head != "documents"):
            return "other"
        return "/v1/collections/{name}/" + head + ("/{id}" if document else "")
    if path.startswith("/v1/documents/"):
        return "/v1/documents/{id}"
    return path if path in _LABELLED or path == "/v1/collections" else "other"


def respond(start_response, status: int, body: dict | bytes, headers: Iterable[tuple[str, str]] = (),
            kind: str = "application/json") -> list[bytes]:
    """Start a whole (not streamed) reply: `body` as UTF-8 JSON (or bytes as they are), its length and type."""
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8")
    start_response(f"{status} {_REASONS[status]}", [("Content-Type", f"{kind}; charset=utf-8"),
                                                     ("Content-Length", str(len(data))), *headers])
    return [data]


def read_body(environ: dict, max_bytes: int) -> bytes:
    """A request's body, its Content-Length bytes: 400 when that is not a number, 413 past `max_bytes`."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ServiceError(400, "invalid_request", "Content-Length is not a number") from None
    if length > max_bytes:
        raise ServiceError(413, "too_large", f"the body has {length} bytes; the limit is {max_bytes}")
    return environ["wsgi.input"].read(length) if length else b""


def _holds_saved(saved: KnowledgeBase | None, folder: Path) -> bool:
    """Whether what the service read from `folder` (None: nothing yet) still holds exactly what it holds."""
    return saved is not None and saved.holds_saved(folder)


def _error(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message}}


def _decoded_size(file: str) -> int:
    """The bytes a base64 text decodes to, from its length alone."""
    return len(file) * 3 // 4 - file.endswith("=") - file.endswith("==")


def _upload_size(given, max_bytes: int) -> int:
    """What an uploaded file costs to read: its size, for a .docx (a zip) what it unpacks to, and for
    a .gz what it decompresses to (up to just past `max_bytes`)."""
    if not given.file:
        return 0
    name = (given.filename or given.id).lower()
    try:
        if name.endswith(".docx"):
            return unpacked_size(base64.b64decode(given.file, validate=True))
        if name.endswith(".gz"):
            return len(gunzip(base64.b64decode(given.file, validate=True), max_bytes))
    except Unreadable:  # decompresses past the limit (or is damaged: _document says which)
        return max_bytes + 1
    except (ValueError, zipfile.BadZipFile, OSError):  # not base64, or not a zip: _document says so
        pass
    return _decoded_size(given.file)


def _document(given, max_file_bytes: int) -> Document:
    """A document of a write request: its text, or its file read from its bytes alone as `index`
    reads it. A filename is a name, never a path: only its last part's suffix chooses the reader, and
    nothing it names or shows (a Markdown image, an HTML <img>) is opened on this server."""
    if not given.file:
        return Document(given.id, given.text, given.title, given.source, given.metadata)
    size = _decoded_size(given.file)  # before decoding
    if size > max_file_bytes:
        raise ServiceError(413, "too_large", f"document {given.id!r}: its file has {size:,} bytes; the limit is "
                                             f"{max_file_bytes:,}")
    try:
        data = base64.b64decode(given.file, validate=True)
    except ValueError:
        raise ServiceError(400, "invalid_request", f"document {given.id!r}: 'file' is not base64") from None
    label = given.filename or given.id
    name = PurePosixPath(label.replace("\\", "/")).name or "file"  # "../../etc/passwd.md" is read as passwd.md
    if Path(name).suffix.lower() == ".jsonl":
        raise ServiceError(400, "invalid_request", f"document {given.id!r} ({name}): a .jsonl file holds many "
                                                   f"documents; send each line as a document of its own")
    if Path(name).suffix.lower() in IMAGE_SUFFIXES:
        if not given.text.strip():
            raise ServiceError(400, "invalid_request", f"document {given.id!r} is an image: give its description "
                                                       f"in 'text'")
        return Document(given.id, given.text, given.title or name, given.source or label,
                        {**given.metadata, "media": "image"})
    if given.text:
        raise ServiceError(400, "invalid_request", f"document {given.id!r}: give 'text' or 'file', not both (only "
                                                   f"an image file takes its description in 'text')")
    try:
        document = read_file(name, data, given.id, given.source or label, max_bytes=max_file_bytes)
    except Unreadable as exc:
        raise ServiceError(400, "invalid_request", f"document {given.id!r} ({name}): {exc}") from None
    return replace(document, title=given.title or document.title, metadata={**document.metadata, **given.metadata})


def scoped(kb, scope: dict):
    """The knowledge base as a key whose filter is `scope` sees it: a restricted view whose searches and
    term weights keep to the scope ({}: the knowledge base itself)."""
    return kb.restricted(scope, scope=True) if scope else kb


def within_scope(document: Document, scope: dict) -> Document:
    """`document` as a key whose scope is `scope` may write it: an equality the document's metadata
    leaves out is written into it; otherwise the document must lie wholly inside the scope (a list
    value with every member matching: it may not reach another scope too), or the write is refused
    (403) naming the field and what it must hold."""
    if not scope:
        return document
    metadata = dict(document.metadata)
    for field, condition in scope.items():
        if field not in metadata and field not in ("doc_id", "source", "title") \
                and not isinstance(condition, (dict, list, tuple, set, frozenset)):
            metadata[field] = condition
    fields = {**metadata, "doc_id": document.id, "source": document.source, "title": document.title}
    for field, condition in scope.items():
        if not matches(fields, {field: condition}, every_member=True):
            wanted = f"one of {list(condition)}" if isinstance(condition, (list, tuple, set, frozenset)) else \
                f"a value {condition}" if isinstance(condition, dict) else repr(condition)
            raise ServiceError(403, "forbidden", f"document {document.id!r}: this key writes only documents whose "
                                                 f"{field!r} is {wanted}; give its metadata that")
    return replace(document, metadata=metadata)


def _given_key(environ: Mapping[str, str]) -> str:
    """The API key a request sends: `Authorization: Bearer KEY`, or `X-API-Key: KEY`."""
    header = environ.get("HTTP_AUTHORIZATION", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else environ.get("HTTP_X_API_KEY", "")


def keys_from(environ: Mapping[str, str], file: str | None = None) -> tuple[list[str], list[str]]:
    """(read keys, write keys): AGENTIC_RAG_READ_KEYS and AGENTIC_RAG_WRITE_KEYS (comma-separated),
    and a keys file of lines `read KEY` or `write KEY` (# starts a comment)."""
    reads = [k.strip() for k in environ.get("AGENTIC_RAG_READ_KEYS", "").split(",") if k.strip()]
    writes = [k.strip() for k in environ.get("AGENTIC_RAG_WRITE_KEYS", "").split(",") if k.strip()]
    if file:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the keys file {file}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            kind, _, key = line.partition(" ")
            if kind not in ("read", "write") or not key.strip():
                raise ConfigurationError(f"{file} line {number}: write 'read KEY' or 'write KEY'")
            (reads if kind == "read" else writes).append(key.strip())
    if any(len(k) < 16 for k in reads + writes):
        raise ConfigurationError("an API key is shorter than 16 characters; use long random keys "
                                 "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return reads, writes

