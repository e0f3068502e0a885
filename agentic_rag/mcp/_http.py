"""MCP's streamable HTTP transport for a WSGI application, without sessions: each POST carries one
JSON-RPC request and gets its one reply. A client of the 2026-07-28 protocol sends its version and
capabilities with every request (checked by the SDK's inbound ladder); an older client's
`initialize` is answered and each of its later requests served on its own. The reply is JSON, or
server-sent events once the handler reports progress; a client that goes away cancels its request.

The SDK's own HTTP transport is an ASGI application; this one serves the same server (the SDK's
kernel, serve_one) from a WSGI worker thread, so that serve's keys, limits and access log hold for
/mcp as for every other endpoint."""
from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import tracing

if TYPE_CHECKING:
    import anyio
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server
    from mcp.shared.transport_context import TransportContext
    from mcp_types import JSONRPCRequest

log = logging.getLogger("agentic_rag.mcp")
Exchange = tuple[int, dict | bytes | Iterator[bytes], list[tuple[str, str]]]
WAIT_S = 0.25   # how often a waiting reply looks whether its client is still there
PING_S = 15.0   # a comment line this often on a quiet event stream, so no proxy times it out


def exchange(server: Server, message: dict, headers: Mapping[str, str], gone: Callable[[], bool],
             trace_context: Any = None) -> Exchange:
    """Answer one POST to the MCP endpoint, its JSON body already read: (status, JSON body or event
    stream, headers). `headers` are the request's, by lower-case name; `gone()` says whether the
    client has disconnected (which cancels the request, and this returns once its work has ended);
    `trace_context` is made current where the request is served (the request's span)."""
    from mcp_types import INVALID_REQUEST, JSONRPCRequest
    from pydantic import ValidationError

    if "id" not in message:  # a notification: nothing here acts on one
        return 202, b"", []
    try:
        request = JSONRPCRequest.model_validate(message)
    except ValidationError:
        return 400, _error(None, INVALID_REQUEST, "send one JSON-RPC request object (no batch)"), []
    connection, refused = _connection(message, headers)
    if refused is not None:
        return refused
    streams = "text/event-stream" in headers.get("accept", "") or "*/*" in headers.get("accept", "")
    context = _Context(_transport(headers), request.id, _progress_token(request.params) if streams else None)
    worker = threading.Thread(target=_serve, args=(server, request, connection, context, trace_context), daemon=True)
    worker.start()
    first = _next(context, gone)
    if first is None:  # the client left before anything came: the request is cancelled; its work ends first
        worker.join()
        return 200, b"", []
    kind, reply = first
    if kind == "reply":  # an error's own status on the 2026 protocol; the older one sends every reply with 200
        code = reply.get("error", {}).get("code")
        return _status(code, headers) if code is not None else 200, reply, []
    return 200, _stream(reply, context, gone, worker), [("X-Accel-Buffering", "no")]


def _connection(message: dict, headers: Mapping[str, str]) -> tuple[Any, Exchange | None]:
    """The SDK's Connection for the request's protocol era, or the refusal of a 2026 request whose
    envelope the SDK's inbound ladder rejects."""
    from mcp.server.connection import Connection
    from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, InboundLadderRejection, classify_inbound_request
    from mcp_types import DEFAULT_NEGOTIATED_VERSION

    version = headers.get("mcp-protocol-version")
    if not _modern(headers):  # the handshake era: every request served on its own, initialize too
        return Connection.from_envelope(version or DEFAULT_NEGOTIATED_VERSION, None, None), None
    verdict = classify_inbound_request(message, headers=dict(headers))
    if isinstance(verdict, InboundLadderRejection):
        return None, (ERROR_CODE_HTTP_STATUS.get(verdict.code, 400),
                      _error(message.get("id"), verdict.code, verdict.message, verdict.data), [])
    return Connection.from_envelope(verdict.protocol_version, verdict.client_info, verdict.client_capabilities), None


def _modern(headers: Mapping[str, str]) -> bool:
    """Whether the request speaks the 2026-07-28 protocol (a version header the handshake era has not)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    version = headers.get("mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def _status(code: int, headers: Mapping[str, str]) -> int:
    """The HTTP status of an error reply: the 2026 protocol's table, 200 in the handshake era."""
    from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS

    return ERROR_CODE_HTTP_STATUS.get(code, 200) if _modern(headers) else 200


def _transport(headers: Mapping[str, str]) -> TransportContext:
    from mcp.shared.transport_context import TransportContext

    return TransportContext(kind="streamable-http", can_send_request=False, headers=dict(headers))


@dataclass
class _Context:
    """The SDK's DispatchContext for one request: no requests back to the client (none can reach it),
    notifications and progress onto this request's event stream (`events`)."""

    transport: TransportContext
    request_id: Any
    progress_token: Any = None
    events: queue.Queue = field(default_factory=queue.Queue)   # ("event", message) ..., then ("reply", message)
    cancel: threading.Event = field(default_factory=threading.Event)
    message_metadata: Any = None
    can_send_request: bool = False
    _cancel_requested: Any = None

    @property
    def cancel_requested(self) -> anyio.Event:
        import anyio

        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict:
        from mcp.shared.exceptions import NoBackChannelError

        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if self.progress_token is not None:  # a client that takes events asked for them
            self.events.put(("event", {"jsonrpc": "2.0", "method": method, "params": dict(params or {})}))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is not None:
            params = {"progressToken": self.progress_token, "progress": progress, "total": total, "message": message}
            await self.notify("notifications/progress", {k: v for k, v in params.items() if v is not None})


def _serve(server: Server, request: JSONRPCRequest, connection: Connection, context: _Context,
           trace_context: Any) -> None:
    """Run the request through the SDK's kernel in an event loop of this thread; its reply goes onto
    `context.events`: the result, the SDK's error, or an internal error however the loop ended,
    unless the request was cancelled (no one reads on then)."""
    import anyio
    from mcp.server.runner import modern_error_data, serve_one
    from mcp_types import JSONRPCError, JSONRPCResponse

    async def answer() -> None:
        async with anyio.create_task_group() as group:
            async def watch() -> None:
                while not context.cancel.is_set():
                    await anyio.sleep(WAIT_S)
                group.cancel_scope.cancel()

            group.start_soon(watch)
            reply: JSONRPCResponse | JSONRPCError
            try:
                result = await serve_one(server, context, request.method, request.params,
                                         connection=connection, lifespan_state={})
                reply = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
            except Exception as exc:  # the SDK's own mapping: MCPError as sent, anything else "Internal error"
                reply = JSONRPCError(jsonrpc="2.0", id=request.id, error=modern_error_data(exc))
            context.events.put(("reply", reply.model_dump(mode="json", by_alias=True, exclude_none=True)))
            group.cancel_scope.cancel()

    try:
        with tracing.attached(trace_context):
            anyio.run(answer)
    except BaseException as exc:  # noqa: B036 - never a reply that does not come: the worker would wait on it
        log.error("an MCP request failed: %s: %s", type(exc).__name__, exc)
        context.events.put(("reply", _error(request.id, -32603, "the server failed on this request")))


def _next(context: _Context, gone: Callable[[], bool], quiet_s: float = float("inf")) -> tuple[str, dict] | None:
    """The next event or the reply; None when the client went away (the request is then cancelled),
    ("ping", {}) after `quiet_s` of nothing."""
    waited = 0.0
    while True:
        try:
            return context.events.get(timeout=WAIT_S)
        except queue.Empty:
            if gone():
                context.cancel.set()
                return None
            waited += WAIT_S
            if waited >= quiet_s:
                return "ping", {}


def _stream(first: dict, context: _Context, gone: Callable[[], bool], worker: threading.Thread) -> Iterator[bytes]:
    """The event stream: the first notification, the later ones, then the reply; a client that leaves
    (or a server that stops sending) cancels the request, and the stream ends once its work has."""
    try:
        yield _event(first)
        while (item := _next(context, gone, PING_S)) is not None:
            kind, message = item
            if kind == "ping":
                yield b": ping\n\n"
                continue
            yield _event(message)
            if kind == "reply":
                return
    finally:
        context.cancel.set()  # a reply already sent makes this a no-op; else the request stops
        worker.join()  # so a client that leaves at once cannot start more work than there are workers


def _event(message: dict) -> bytes:
    return f"event: message\ndata: {json.dumps(message, ensure_ascii=False)}\n\n".encode()


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict:
    """A JSON-RPC error object (an id of null when the request's could not be read)."""
    error = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _progress_token(params: Mapping[str, Any] | None) -> Any:
    meta = (params or {}).get("_meta")
    return meta.get("progressToken") if isinstance(meta, Mapping) else None
