"""waitress, guarded against slow clients: a request's headers and body must arrive within a total
time (not an idle timeout, which a client sending a byte now and then never trips), one client
address holds a bounded number of connections, and connections still sending a request hold at
most a share of the connection limit, so requests already read always find room. waitress's own
errors (413, a bad Content-Length, ...) answer in the service's JSON error shape (_connections)."""
from __future__ import annotations

import logging
import math
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from ..core import ConfigurationError
from ._connections import Channel, Refusal, error_reply

log = logging.getLogger("agentic_rag.service")
REFUSING_AT_ONCE = 64  # connections turned away at once (each waits 1 s at most for its request line)
REFUSAL_WAIT_S = 1.0   # how long a connection turned away has to send its request line, to be answered
RETRY_AFTER_S = 1      # the Retry-After of an answer at the door


@dataclass(frozen=True)
class ServerLimits:
    """How long a client may take to send a request, and how many connections it may hold."""

    header_timeout_s: float = 10.0  # from a request's first byte to the end of its headers
    body_timeout_s: float = 60.0    # from the end of the headers to the body's last byte
    idle_timeout_s: float = 30.0    # a connection with no request under way is closed after this long
    send_timeout_s: float = 30.0    # replies waiting to go out, not all read by the client in this long: closed
    max_connections: int = 100
    max_per_address: int = 20       # behind a proxy every client is the proxy: raise it to max_connections
    reading_share: float = 0.5      # of max_connections, for connections still sending (or awaiting) a request

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "idle_timeout_s", "send_timeout_s"):
            if not 0 < getattr(self, name) < math.inf:  # NaN and infinity too: waitress counts whole seconds
                raise ConfigurationError(f"{name} must be a finite positive number of seconds, "
                                         f"not {getattr(self, name)!r}")
        if self.max_connections < 4:
            raise ConfigurationError(f"max_connections must be at least 4, not {self.max_connections}")
        if not 1 <= self.max_per_address <= self.max_connections:
            raise ConfigurationError(f"max_per_address must be from 1 to max_connections ({self.max_connections}), "
                                     f"not {self.max_per_address}")
        if not 0 < self.reading_share < 1:
            raise ConfigurationError(f"reading_share must be between 0 and 1 (a share of max_connections), "
                                     f"not {self.reading_share}")

    @property
    def max_reading(self) -> int:
        """Connections that may be sending (or awaiting) a request at once."""
        return max(1, int(self.max_connections * self.reading_share))


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with the limits of ServerLimits applied each accept and each second."""

    channel_class = Channel
    active_channels: dict[int, Channel]  # type: ignore[assignment]  # the stubs say one channel
    _map: dict[int, Any]  # wasyncore's socket map
    effective_port: int   # the port it listens on, set once bound (these two the stubs leave out)
    next_channel_cleanup: float  # type: ignore[assignment]  # waitress keeps a time.time() here

    def __init__(self, application: Any, limits: ServerLimits, **kw: Any) -> None:
        self.limits = limits
        self._stop, self._stopped, self._serving = threading.Event(), threading.Event(), False
        self.refusing: set[Refusal] = set()
        self._closing: list[Any] = []  # connections to close once the loop's round of poll() is over
        self.stop_by: float | None = None  # set by stop_gracefully: when the connections still open are cut off
        self.cut_off = 0  # connections with a request under way when the server stopped
        self._shutting = threading.RLock()  # re-entrant: closing a channel may pull the trigger
        super().__init__(application, **kw)

    def pull_trigger(self) -> None:
        """Wake the loop, unless it is shut: a closed trigger's descriptor may already be another
        file's (a worker finishing after the shutdown would write a byte into it)."""
        with self._shutting:
            if self.socket is not None:
                super().pull_trigger()

    def run(self) -> None:
        """Serve until close() (from any thread), KeyboardInterrupt, or the end of a graceful stop;
        then every connection is closed."""
        self._serving = True
        try:
            while self._map and not self._stop.is_set():  # poll(), not select(): no limit of 1024 sockets
                wasyncore.poll2(self.adj.asyncore_loop_timeout, self._map)
                while self._closing:
                    self._closing.pop().handle_close()
                if self.stop_by is not None and self._finished():
                    break
        except (SystemExit, KeyboardInterrupt):
            pass
        finally:
            self.cut_off = sum(not c.idle() for c in self.active_channels.values())
            self._shut()
            self._stopped.set()

    def stop_gracefully(self, timeout_s: float) -> None:
        """Stop taking connections (new ones are answered 503) and close each open one once nothing
        is under way on it: run() returns when none is left, or after `timeout_s` with those still
        busy cut off (counted in cut_off). Safe from a signal handler and from any thread."""
        self.stop_by = time.monotonic() + timeout_s
        self.pull_trigger()

    def _finished(self) -> bool:
        """During a graceful stop: close the idle connections; whether none is left or the time is up."""
        for channel in list(self.active_channels.values()):
            if channel.idle():
                channel.handle_close()
        return not self.active_channels or time.monotonic() > (self.stop_by or 0.0)

    def close(self) -> None:
        """Stop serving: from another thread, the loop is asked to stop and closes everything itself
        (closing sockets under its poll() would fail it)."""
        if not self._serving:
            self._shut()
            return
        with self._shutting:  # the loop may stop on its own meanwhile: not a pull on a closed trigger
            if self.socket is not None:
                self._stop.set()
                self.pull_trigger()
        self._stopped.wait(10)

    def _shut(self) -> None:
        self.task_dispatcher.shutdown()
        with self._shutting:
            if self.socket is None:  # already shut
                return
            for channel in [*self.active_channels.values(), *self.refusing]:
                channel.handle_close()
            super().close()

    def readable(self) -> bool:
        """Accept while serving, past the connection limit too (to answer 503 rather than leave
        clients waiting unanswered), unless that many are being turned away already; waitress's
        once-a-second maintenance runs from here, as in waitress."""
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return bool(self.accepting) and len(self.refusing) < REFUSING_AT_ONCE

    def handle_accept(self) -> None:
        """Take a connection, unless the server holds max_connections or its address max_per_address
        already (then it is answered 503 or 429 and closed); then make room."""
        try:
            pair = self.accept()
            if pair is None:
                return
            conn, addr = pair
            self.set_socket_options(conn)
        except OSError:  # the client left before accept() returned, as waitress itself shrugs off
            return
        host, channels = addr[0], list(self.active_channels.values())
        held = sum(1 for c in channels if c.addr and c.addr[0] == host)
        if self.stop_by is not None:
            self._turn_away(conn, 503, "unavailable", "the server is stopping; retry with another")
        elif len(channels) >= self.limits.max_connections:
            log.info("turned away a connection from %s: the server holds %d connections", host, len(channels))
            self._turn_away(conn, 503, "unavailable", f"the server holds {len(channels)} connections, its limit; "
                                                      f"retry in {RETRY_AFTER_S} s")
        elif held >= self.limits.max_per_address:
            log.info("turned away a connection from %s: it holds %d already", host, held)
            self._turn_away(conn, 429, "too_many_connections", f"{host} holds {held} connections already, the "
                                                               f"limit per address; close one or retry later")
        else:
            self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)
            self._make_room()

    def _turn_away(self, conn: socket.socket, status: int, kind: str, message: str) -> None:
        Refusal(conn, self._map, error_reply(status, kind, message, RETRY_AFTER_S), REFUSAL_WAIT_S, self.refusing)

    def _make_room(self) -> None:
        """Past the reading share, close the connections whose replies wait for a client that does
        not read them, then the slowest-sending: slow clients, sending or reading, cannot take the
        slots of requests already read, nor push out a request arriving at a fair rate."""
        at = time.monotonic()
        held = [c for c in list(self.active_channels.values())
                if c not in self._closing and (c.reading() or c.stalled(at))]
        excess = len(held) - self.limits.max_reading
        if excess > 0:
            for channel in sorted(held, key=lambda c: -1.0 if c.stalled(at) else c.standing(at))[:excess]:
                if channel.stalled(at):  # nothing can be said to a client that does not read
                    log.info("closed a connection from %s: its replies are not read", channel.addr[0])
                    self._closing.append(channel)
                    continue
                channel.refuse(503, "unavailable", "too many connections are sending requests slowly; retry")

    def maintenance(self, now: float) -> None:
        """waitress's own check (a stuck write), then each reading connection's deadline, then the share.
        It runs inside the loop's poll set-up (from readable()): a socket closed here would be polled
        by its old descriptor, and a connection accepted in the same round under that number would
        get the old one's events (a reset). So connections are closed after the round (_closing)."""
        super().maintenance(now)  # type: ignore[arg-type]  # waitress passes time.time()
        at = time.monotonic()
        self._closing.extend(refusal for refusal in self.refusing if at > refusal.deadline)
        for channel in list(self.active_channels.values()):
            if channel.reading():
                late = self._late(channel, at)
                if late:
                    channel.refuse(408, "request_timeout", late)
            elif not channel.total_outbufs_len:
                channel.output_since = None
            elif channel.output_since is None:
                channel.output_since = at
            elif at - channel.output_since > self.limits.send_timeout_s:  # a total, as the others
                log.info("closed a connection from %s: its replies were not read in %g s", channel.addr[0],
                         self.limits.send_timeout_s)
                self._closing.append(channel)
        self._make_room()

    def _late(self, channel: Channel, at: float) -> str | None:
        """Why this connection is past its deadline, or None. All three are totals: a client that
        sends a byte now and then gains nothing (not even blank lines, which start no request)."""
        limits = self.limits
        if channel.request_since is None:
            return "idle" if at - channel.waiting_since > limits.idle_timeout_s else None
        if channel.body_since is None:
            if at - channel.request_since > limits.header_timeout_s:
                return f"the request's headers did not arrive within {limits.header_timeout_s:g} s"
            return None
        if at - channel.body_since > limits.body_timeout_s:
            return f"the request's body did not arrive within {limits.body_timeout_s:g} s of its headers"
        return None


def create_server(app: Any, host: str, port: int, threads: int, max_body_bytes: int,
                  limits: ServerLimits | None = None) -> GuardedServer:
    """A guarded waitress server for `app`, listening on host:port (0: a free port); run() serves."""
    limits = limits or ServerLimits()
    # cleanup_interval 1: the deadlines are checked every second (waitress checks every 30 s);
    # channel_timeout: waitress's idle check stays, for a response the client does not read;
    # max_request_body_size + 1: waitress refuses a body of exactly its limit, the service allows it;
    # channel_request_lookahead: a request's environ gets waitress.client_disconnected, so that an MCP
    # request whose client went away is cancelled (its run stops)
    adj = Adjustments(host=host, port=port, threads=threads, ident="agentic-rag", channel_request_lookahead=1,
                      connection_limit=limits.max_connections, cleanup_interval=1,
                      channel_timeout=math.ceil(limits.idle_timeout_s), max_request_body_size=max_body_bytes + 1)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    return GuardedServer(app, limits, map={}, dispatcher=dispatcher, adj=adj, sockinfo=adj.listen[0])
