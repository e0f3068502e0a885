"""POST /v1/ask and /v1/search: a run of the agent (whole, or streamed as server-sent events) and a
search, each within the caller's scope; the run's slots, its settings and the query cache."""
from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

from ..core import Config, ConfigurationError, tracing
from ..loop import Hook, new_state, run_agentic_rag
from ._cache import cache_key
from ._http import DATABASE_FAILED, Reply, ServiceError, log, read_json
from ._parts import Parts
from ._reply import result_json
from ._schemas import AskRequest, SearchRequest
from ._served import scoped

OnToken = Callable[[str], object]


class Asking:
    """The runs of one service: at most limits.max_concurrent_runs at once, their replies cached."""

    def __init__(self, parts: Parts):
        self.parts = parts
        self.slots = threading.BoundedSemaphore(parts.limits.max_concurrent_runs)

    def ask(self, environ: dict) -> Reply:
        """POST /v1/ask: the reply of `ask --json` and the generation it answered from, or a stream."""
        request = AskRequest.model_validate(read_json(environ, self.parts.limits.max_body_bytes))
        ready = self.prepare(request, scope_filter=self.parts.access.scope_filter(environ))
        if request.stream:
            return 200, self.stream(ready), []
        return 200, self.finish(ready), []

    def search(self, environ: dict) -> Reply:
        """POST /v1/search: the hits within the caller's scope, and the generation they come from."""
        request = SearchRequest.model_validate(read_json(environ, self.parts.limits.max_body_bytes))
        kb, generation = self.parts.served.current()
        hits = scoped(kb, self.parts.access.scope_filter(environ)).search(
            request.query, k=request.k, mode=request.mode, filters=request.filters)
        return 200, {"hits": [hit.model_dump() for hit in hits], "generation": generation}, []

    def mcp(self, environ: dict) -> Reply:
        """POST /mcp: one MCP request (agentic_rag.mcp) answered from the knowledge base as it is now,
        every search and run within the caller's scope; a run takes one of the service's slots, as
        /v1/ask does, and the client going away stops it. A browser's request from another origin is
        refused (403), as the MCP specification asks: a page elsewhere must not reach a local server."""
        from ..mcp import Served, build_server, exchange, require_sdk

        try:
            require_sdk("/mcp")
        except ConfigurationError as exc:
            raise ServiceError(501, "not_implemented", str(exc)) from None
        _same_origin(environ)
        message, scope = read_json(environ, self.parts.limits.max_body_bytes), self.parts.access.scope_filter(environ)
        served = Served(lambda: scoped(self.parts.served.current()[0], scope), self._mcp_ask(scope),
                        self.parts.access.name, self.parts.served.public)
        headers = {name[5:].replace("_", "-").lower(): value for name, value in environ.items()
                   if name.startswith("HTTP_")}
        return exchange(build_server(served), message, headers, environ.get("waitress.client_disconnected", bool),
                        tracing.current_context())

    def _mcp_ask(self, scope: dict) -> Callable[[str, dict | None, Hook], dict]:
        """The MCP server's runs: prepared and finished as /v1/ask's. One that cannot start is Refused
        (UNAVAILABLE when every slot is taken); one that failed is its reply with stop_reason error."""
        from ..mcp import INVALID_PARAMS, UNAVAILABLE, Refused

        def ask(question: str, filters: dict | None, on_step: Hook) -> dict:
            try:
                ready = self.prepare(AskRequest(question=question, filters=filters), scope_filter=scope)
            except ServiceError as exc:
                raise Refused(str(exc), UNAVAILABLE if exc.status in (429, 503) else INVALID_PARAMS) from None
            try:
                return self.finish(ready, on_step=on_step)
            except ServiceError as exc:  # the run failed (the model, the database): said in an error result
                return {"stop_reason": "error", "error": str(exc)}
        return ask

    def settings(self, request: AskRequest) -> Config:
        """The service's settings with the request's run settings, each bounded by the service's own."""
        config = self.parts.config
        asked = request.settings.model_dump(exclude_none=True)
        return replace(config, **{name: min(value, getattr(config, name)) for name, value in asked.items()})

    def prepare(self, request: AskRequest, history: list[dict] | None = None, instructions: str = "",
                scope_filter: dict | None = None) -> dict:
        """Everything a run needs that can fail before it starts: the checked question, the knowledge
        base and its generation, the settings, the cache key, the run's own input checks, and the cached
        reply or a run slot (429 when every slot is taken). A stream's errors thus come before its 200.
        A follow-up's `history` (checked messages) and a chat's `instructions` are part of its cache key;
        so is the key's `scope_filter`, which every search of the run keeps to with the request's."""
        parts, limits = self.parts, self.parts.limits
        question = request.question.strip()
        if not question:
            raise ServiceError(400, "invalid_request", "the question is empty")
        if len(question) > limits.max_question_chars:
            raise ServiceError(400, "invalid_request", f"the question has {len(question)} characters; the limit "
                                                       f"is {limits.max_question_chars}")
        (kb, generation), config = parts.served.current(), self.settings(request)
        conversation = [history, instructions] if history or instructions else []  # a single question's key as ever
        key = cache_key(question, request.filters, asdict(config), parts.model_name, generation, *conversation,
                        *([{"scope": scope_filter}] if scope_filter else []))
        ready = {"question": question, "kb": kb, "generation": generation, "config": config, "key": key,
                 "scope": scope_filter or {}, "filters": request.filters, "store": request.cache,
                 "history": history or [],
                 "trace_context": tracing.current_context(),  # the request's span, for a stream's thread
                 "instructions": instructions}
        if request.cache and (cached := parts.cache.get(key)) is not None:
            parts.metrics.cache.labels("hit").inc()
            return dict(ready, cached=dict(cached, question=question, cached=True))
        if request.cache:
            parts.metrics.cache.labels("miss").inc()
        # the run's own checks (a question too long for its budget): before a stream's 200
        new_state(question, config, history, instructions)
        if not self.slots.acquire(blocking=False):
            raise ServiceError(429, "too_many_requests", f"{limits.max_concurrent_runs} questions are being "
                                                         f"answered; retry in a moment", [("Retry-After", "1")])
        return ready

    def finish(self, ready: dict, on_token: OnToken | None = None, on_step: Hook | None = None) -> dict:
        """The run `prepare` made ready (its slot released at the end), or its cached reply: the fields
        of `ask --json` and the generation it answered from. A run that failed is a 502, unless the
        database failed it: 503 when its connection was lost, 500 when its role lacks a right."""
        if "cached" in ready:
            if on_token:
                on_token(ready["cached"]["answer"])
            cached: dict = ready["cached"]
            return cached
        parts = self.parts
        try:
            view = scoped(ready["kb"], ready["scope"])  # the request's filters narrow the key's scope
            view = view.restricted(ready["filters"]) if ready["filters"] else view
            state = run_agentic_rag(ready["question"], view, parts.model, parts.tools, ready["config"],
                                    on_token=on_token, on_step=on_step, history=ready["history"],
                                    instructions=ready["instructions"])
        finally:
            self.slots.release()
        parts.metrics.run(state, parts.model_name)
        if state["stop_reason"] == "error":
            log.error("a run failed: %s", state["error"])  # the whole line: the reply's shows no server path or URL
            status, kind, headers = next((reply for cls, reply in DATABASE_FAILED.items()
                                          if cls.__name__ == state["error_type"]), (502, "model_error", ()))
            raise ServiceError(status, kind, f"the run failed: {parts.served.public(state['error'] or '')}", headers)
        reply = dict(result_json(state, parts.model_name), generation=ready["generation"], cached=False)
        # kept only when it answers the same next time: not cut short (by time, budget or the client
        # leaving), no tool (a clock, a database, the web)
        if ready["store"] and state["stop_reason"] not in ("deadline", "token_budget", "stopped") \
                and not state["used_tools"]:
            parts.cache.put(ready["key"], reply)
        return reply

    def stream(self, ready: dict) -> Iterator[bytes]:
        """Server-sent events: `draft` pieces as the model writes, then `answer` (the checked reply,
        which replaces the draft) or `error`, then `done`."""
        items = streamed(lambda on_token: self.finish(ready, on_token), ready["trace_context"])
        while (item := items.get()) is not None:
            kind, value = item
            data = {"text": value} if kind == "draft" else value if kind == "answer" else \
                {"error": {"status": value[0], "type": value[1], "message": value[2]}}
            yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
        yield b"event: done\ndata: {}\n\n"


def streamed(work: Callable[[OnToken], dict], context: Any = None) -> queue.Queue:
    """Run `work(on_token)` in a thread; the queue gets ("draft", text) pieces, then ("answer",
    reply) or ("error", (status, kind, message)), then None; `context` (the request's tracing context)
    is current in the thread."""
    items: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            with tracing.attached(context):  # the request's span: the run's parent in this thread too
                items.put(("answer", work(lambda text: items.put(("draft", text)))))
        except ServiceError as exc:
            items.put(("error", (exc.status, exc.kind, str(exc))))
        except Exception:
            log.exception("a streamed request failed")
            items.put(("error", (500, "internal_error", "the server failed on this request; see its log")))
        items.put(None)

    threading.Thread(target=run, daemon=True).start()
    return items


def _same_origin(environ: dict) -> None:
    """403 for a request a browser sent from a page of another origin (its Origin header is not this
    server's own address); a request with no Origin (an MCP client, not a browser) passes."""
    origin = environ.get("HTTP_ORIGIN")
    if origin is None:
        return
    host = environ.get("HTTP_HOST", "")
    if origin.split("://", 1)[-1].rstrip("/") != host:
        raise ServiceError(403, "forbidden", f"a page from {origin[:100]} may not call /mcp: only pages of "
                                             f"this server's own origin may")
