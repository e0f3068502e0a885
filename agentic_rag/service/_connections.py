"""One connection of the guarded server: when its request started and how fast it arrives, for the
deadlines and the room the server makes (_server.GuardedServer), and waitress's own errors (413, a
bad Content-Length, ...) answered in the service's JSON error shape."""
from __future__ import annotations

import json
import math
import socket
import time
from typing import Any

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

_GRACE_S = 1.0  # rates are taken over a second at least, and a connection this young that sent nothing goes last
_REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Content Too Large", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
            503: "Service Unavailable"}


def error_reply(status: int, kind: str, message: str, retry_after_s: int | None = None) -> bytes:
    """A whole HTTP response that closes the connection, with the service's JSON error body."""
    body = json.dumps({"error": {"type": kind, "message": message}}).encode("utf-8")
    retry = f"Retry-After: {retry_after_s}\r\n" if retry_after_s is not None else ""
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n{retry}Connection: close\r\n\r\n")
    return head.encode("latin-1") + body


class Refusal(wasyncore.dispatcher):
    """A connection turned away at the door, politely: it waits `wait_s` at most for the request's
    first line, answers `reply`, stops sending and reads whatever else the client sends until it
    closes or as long again has passed, so that the close is not a reset that could lose the
    answer. A client that sends no line in time gets the close alone. `held` is the set of
    refusals under way, which it leaves when it closes."""

    def __init__(self, sock: socket.socket, map: dict, reply: bytes, wait_s: float, held: set) -> None:
        super().__init__(sock, map)
        self.reply, self.wait_s, self.held = reply, wait_s, held
        self.pending, self.head, self.answered = b"", b"", False
        self.deadline = time.monotonic() + wait_s
        held.add(self)

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return bool(self.pending)

    def handle_read(self) -> None:
        data = self.recv(65536)  # b"" when the client closed or reset (wasyncore has closed it then)
        if not data:
            self.close()
        elif not self.answered:
            self.head = (self.head + data)[-4096:]
            if b"\n" in self.head:  # the request line is here: answer it
                self.answered, self.pending = True, self.reply
                self.deadline = time.monotonic() + self.wait_s

    def handle_write(self) -> None:
        self.pending = self.pending[self.send(self.pending):]
        if not self.pending:
            try:
                if self.socket is not None:
                    self.socket.shutdown(socket.SHUT_WR)
            except OSError:
                self.close()

    def handle_close(self) -> None:
        self.close()

    def close(self) -> None:
        self.held.discard(self)
        super().close()


class JSONErrorTask(ErrorTask):
    """waitress's answer to a request it could not take, as the service's JSON error."""

    request: Any  # the HTTPRequestParser that failed, its error set (the stubs say an Error)
    response_headers: list[tuple[str, str]]

    def execute(self) -> None:
        """Send the error as the service's JSON error, and close the connection after it."""
        status, kind, message = self._described()
        body = json.dumps({"error": {"type": kind, "message": message}}).encode("utf-8")
        self.status = f"{status} {_REASONS[status]}"
        self.response_headers.append(("Content-Type", "application/json; charset=utf-8"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)

    def _described(self) -> tuple[int, str, str]:
        code, request, adj = self.request.error.code, self.request, self.channel.adj
        if code == 413:
            limit = adj.max_request_body_size - 1  # waitress refuses a body of max_request_body_size itself
            size = f"{request.content_length} bytes" if request.content_length else f"more than {limit} bytes"
            return 413, "too_large", f"the body has {size}; the limit is {limit}"
        if code == 431:
            return 431, "too_large", f"the request's headers pass {adj.max_request_header_size} bytes; send fewer"
        if code == 501:
            return 501, "not_implemented", "only Transfer-Encoding: chunked is supported; send Content-Length"
        if code == 500:
            return 500, "internal_error", "the server failed on this request; see its log"
        detail = str(self.request.error.body)
        if detail == "Content-Length is invalid":
            return 400, "invalid_request", "Content-Length is not a number"
        return 400, "invalid_request", f"the request is not valid HTTP: {detail}"


class Channel(HTTPChannel):
    """A connection that remembers when its request started, for the deadlines."""

    error_task_class = JSONErrorTask

    def __init__(self, server: Any, sock: socket.socket, addr: Any, adj: Adjustments, map: Any = None) -> None:
        self.waiting_since = time.monotonic()  # accepted, or its last response handed over
        self.request_since: float | None = None  # a request's first byte
        self.body_since: float | None = None  # the end of its headers
        self.request_bytes = 0  # of the request under way, for its rate
        self.output_since: float | None = None  # since when replies have waited to go out, never all sent meanwhile
        super().__init__(server, sock, addr, adj, map=map)

    def received(self, data: bytes) -> bool:
        """waitress's parsing of `data`, noting when a request began, its headers ended and its bytes."""
        before, now = self.request, time.monotonic()
        result = super().received(data)
        if self.request is None:  # blank lines between requests earn nothing
            self.request_since = self.body_since = None
            self.request_bytes = 0
        elif self.request is not before:  # a new request began in this data
            self.request_since, self.body_since = now, now if self.request.headers_finished else None
            self.request_bytes = len(data)
        else:
            self.request_bytes += len(data)
            if self.body_since is None and self.request.headers_finished:
                self.body_since = now
        return result

    def service(self) -> None:
        """Answer the requests read, then wait for the next from now."""
        super().service()
        self.waiting_since = time.monotonic()

    def handle_write(self) -> None:
        """Send what waits to go out; all of it sent, the client is reading its replies."""
        super().handle_write()
        if not self.total_outbufs_len:  # everything sent: the client reads its replies
            self.output_since = None

    def stalled(self, at: float) -> bool:
        """Replies have waited to go out for a second or more: the client is not reading them (or
        sends request after request without reading), so it holds a slot doing nothing."""
        return self.output_since is not None and at - self.output_since >= _GRACE_S

    def send_continue(self) -> None:
        """No '100 Continue' for a request already refused (a body past the limit): waitress sent
        one before its 413, inviting the client to send the body it would not read."""
        if self.request is None or self.request.error is None:
            super().send_continue()

    def reading(self) -> bool:
        """Still sending (or awaiting) a request: nothing read is being answered, nothing waits to go out."""
        return not (self.requests or self.total_outbufs_len or self.will_close or self.close_when_flushed)

    def idle(self) -> bool:
        """Nothing under way: no byte of a request read, nothing to answer, nothing waiting to go out."""
        return self.reading() and self.request_since is None

    def since(self) -> float:
        """When this connection started costing a slot without a request to answer."""
        return self.request_since if self.request_since is not None else self.waiting_since

    def standing(self, at: float) -> float:
        """How much a reading connection deserves its slot, lowest first: its request's bytes a
        second (over a second at least), so an upload making progress outlasts clients that send a
        byte now and then, however long it takes; one that came less than a second ago and has
        sent nothing yet goes last (it was just accepted: its client has had no time to send)."""
        age = at - self.since()
        if age < _GRACE_S and not self.request_bytes:
            return math.inf
        return self.request_bytes / max(age, _GRACE_S)

    def refuse(self, status: int, kind: str, message: str) -> None:
        """Close, answering first if the client has sent part of a request (an idle one just closes)."""
        if self.request_since is None:
            self.will_close = True
            return
        data = error_reply(status, kind, message)
        with self.outbuf_lock:
            self.outbufs[-1].append(data)
            self.total_outbufs_len += len(data)
        self.close_when_flushed = True
