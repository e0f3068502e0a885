"""Where a PostgreSQL knowledge base's statements go: a bounded pool of connections (psycopg_pool)
to the primary, shared by every thread, and one to each read replica. Searches go to a replica
that is up, has replayed this knowledge base's own last write and lags less than max_lag_s;
writes, and reads no replica can serve, go to the primary.

The options ride in the knowledge base's URL, so that every place that takes an address (--kb,
serve --kb NAME=URL, a collections file) takes them; they are taken out before libpq sees it:

    postgresql://rag@primary/kb?sslmode=require
        &read=postgresql%3A%2F%2Frag%40replica1%2Fkb     a read replica (percent-encoded), repeatable
        &pool_size=10              connections per server at most (default 10)
        &pool_timeout=5            seconds to wait for a free connection (default 5)
        &prepare_threshold=none    executions before a statement is prepared (psycopg's default 5;
                                   none: never, for PgBouncer in transaction mode before 1.21)
        &max_lag_s=10              a replica further behind is skipped (default 10)

A replica that cannot be reached, or lags, is skipped with a warning and rested for RESTING_S.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from ...core import ConfigurationError
from ._errors import first_line, safe_url
from ._sql import Connection

OPTIONS = ("read", "pool_size", "pool_timeout", "prepare_threshold", "max_lag_s")
RESTING_S = 30.0  # a replica skipped is not tried again for this long
_NEVER = "FFFFFFFF/FFFFFFFF"  # a WAL position no replica reaches
_LOG = logging.getLogger("agentic_rag.postgres")


def split_url(url: str) -> tuple[str, dict]:
    """The URL without our options, and the options (read: a list of URLs; numbers checked)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [raw for raw in parts.query.split("&") if raw and unquote_plus(raw.partition("=")[0]) not in OPTIONS]
    options: dict = {"read": [], "pool_size": 10, "pool_timeout": 5.0, "prepare_threshold": 5, "max_lag_s": 10.0}
    for key, value in pairs:
        if key == "read":
            if not value.startswith(("postgresql://", "postgres://")):
                raise ConfigurationError(f"read={safe_url(value)!r} in {safe_url(url)}: a read replica is a "
                                         f"postgresql:// URL, percent-encoded inside the knowledge base's URL")
            options["read"].append(value)
        elif key in OPTIONS:
            options[key] = _number(key, value, url)
    return urlunsplit(parts._replace(query="&".join(kept))), options  # libpq's parameters as they were written


def _number(key: str, value: str, url: str) -> float | None:
    if key == "prepare_threshold" and value.lower() == "none":
        return None
    try:
        number = int(value) if key in ("pool_size", "prepare_threshold") else float(value)
    except ValueError:
        number = -1
    if not (math.isfinite(number) and number >= (1 if key == "pool_size" else 0)):
        raise ConfigurationError(f"{key}={value!r} in {safe_url(url)}: give a number "
                                 f"({'a whole number >= 1' if key == 'pool_size' else '>= 0'}"
                                 f"{', or none' if key == 'prepare_threshold' else ''})")
    return number


def _lsn(position: str) -> int:
    """A WAL position ("16/B374D848") as a number, to compare."""
    high, _, low = position.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


class NoConnection(Exception):
    """No connection to a server came within the pool's wait: Unreachable or Busy."""


class Unreachable(NoConnection):
    """The pool's wait ran out and a direct connection failed too (its message says why)."""


class Busy(NoConnection):
    """Every connection of a pool stayed in use for its whole wait: the server is up, and loaded."""


class Servers:
    """The pools of the primary and of each read replica, opened on first use."""

    def __init__(self, url: str, options: dict, configure: Callable[[Connection], None]) -> None:
        self.url, self.options, self._configure = url, options, configure
        self._pools: dict[str, object] = {}
        self._resting: dict[str, float] = {}  # replica URL -> when it may be tried again
        self._down: set[str] = set()  # servers whose last direct connection failed
        self._out: dict[str, int] = {}  # connections each pool has handed out and not had back
        self._lock = threading.Lock()
        self._turn = 0
        self.written: str | None = None  # the primary's WAL position after this knowledge base's last write

    def _pool(self, url: str) -> Any:
        from psycopg_pool import ConnectionPool

        with self._lock:
            if url not in self._pools:
                self._pools[url] = ConnectionPool(
                    url, min_size=1, max_size=self.options["pool_size"], timeout=self.options["pool_timeout"],
                    kwargs={"autocommit": False, "prepare_threshold": self.options["prepare_threshold"]},
                    configure=self._configure, check=ConnectionPool.check_connection,  # a dropped one is replaced
                    num_workers=1, name=safe_url(url), open=True)
            return self._pools[url]

    @contextmanager
    def primary(self) -> Iterator:
        """A connection to the primary, from its pool; NoConnection when none comes."""
        with self._connection(self.url, self.options["pool_timeout"]) as db:
            yield db

    @contextmanager
    def _connection(self, url: str, timeout: float) -> Iterator:
        """A connection from `url`'s pool. Once its wait times out, or while the server is known to be
        down, a direct connection is tried instead: failing, it says why (Unreachable) at once; working,
        the server is back and the pool, which waits out a growing backoff before it reconnects, is made
        anew. So an outage fails fast after its first request, and the end of one is seen at once."""
        from psycopg_pool import PoolTimeout

        if url in self._down:
            self._probe(url)
        held = ExitStack()
        try:
            db = held.enter_context(self._pool(url).connection(timeout=timeout))
        except PoolTimeout:
            if self._out.get(url, 0) >= self.options["pool_size"]:  # every connection is at work: busy, not down
                raise Busy(f"all {self.options['pool_size']} connections to {safe_url(url)} stayed busy for "
                           f"{timeout:g} s") from None
            self._probe(url)
            try:
                db = held.enter_context(self._pool(url).connection(timeout=timeout))
            except PoolTimeout as exc:  # up when probed, and still no connection came
                raise Unreachable(first_line(exc)) from None
        with held:
            self._count(url, 1)
            try:
                yield db
            finally:
                self._count(url, -1)

    def _count(self, url: str, change: int) -> None:
        with self._lock:
            self._out[url] = self._out.get(url, 0) + change

    def _probe(self, url: str) -> None:
        """Connect to `url` directly: Unreachable if that fails, else its pool made anew."""
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=max(2, int(self.options["pool_timeout"]))).close()
        except psycopg.Error as exc:
            self._down.add(url)
            raise Unreachable(first_line(exc)) from None
        with self._lock:
            self._down.discard(url)
            stale = self._pools.pop(url, None)
        if stale is not None:
            stale.close(timeout=0)  # type: ignore[attr-defined]

    @contextmanager
    def reader(self) -> Iterator:
        """A connection to a read replica able to serve this knowledge base's reads, else the primary's."""
        import psycopg

        for url in self._replicas():
            held = ExitStack()
            try:
                db = held.enter_context(self._connection(url, min(1.0, self.options["pool_timeout"])))
                problem = self._behind(db)
            except Busy:
                problem = ""  # loaded, not failing: the primary serves this read, and the replica the next
            except (psycopg.OperationalError, Unreachable) as exc:
                problem = f"cannot be reached ({first_line(exc)})"
            except BaseException:
                held.close()
                raise
            if problem is None:
                with held:
                    yield db
                return
            held.close()
            if problem:  # lags or is down: rested; one that is busy or has not replayed our last write yet is not
                self._rest(url, problem)
        with self.primary() as db:
            yield db

    def _replicas(self) -> list[str]:
        """The replicas not resting, from the next one in turn."""
        now, urls = time.monotonic(), self.options["read"]
        with self._lock:
            self._turn += 1
            turn = self._turn
        return [u for u in urls[turn % len(urls):] + urls[:turn % len(urls)]
                if self._resting.get(u, 0.0) <= now] if urls else []

    def _behind(self, db: Connection) -> str | None:
        """Why this replica cannot serve a read now, or None: how it lags, or "" when it only lacks this
        knowledge base's last write (the primary serves that read)."""
        written = self.written
        streaming, lag, replayed = db.execute(
            "SELECT coalesce((SELECT status = 'streaming' FROM pg_stat_wal_receiver), false), "
            "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 ELSE "
            "coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END, "
            "%s::pg_lsn IS NULL OR pg_last_wal_replay_lsn() >= %s::pg_lsn", (written, written)).fetchone()
        db.commit()
        if not streaming:  # its WAL receiver stopped: it may be any distance behind, and would not say so
            return "is not streaming from its primary"
        if float(lag) > self.options["max_lag_s"]:
            return f"lags {float(lag):.1f} s behind the primary (max_lag_s={self.options['max_lag_s']:g})"
        return None if replayed else ""

    def _rest(self, url: str, problem: str) -> None:
        _LOG.warning("read replica %s %s: skipped for %g s, the primary serves its reads", safe_url(url), problem,
                     RESTING_S)
        with self._lock:
            self._resting[url] = time.monotonic() + RESTING_S

    def wrote(self, db: Connection) -> None:
        """Note the primary's WAL insert position after a write committed on `db` (or on opening): reads
        must see it. Kept as the largest seen, since threads note theirs in any order; one that cannot be
        read sends reads to the primary until the next write is noted."""
        if not self.options["read"]:
            return
        try:
            position = (db.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone() or [_NEVER])[0]
            db.commit()
        except Exception:  # the write is committed whatever happens here
            position = _NEVER
        with self._lock:
            if position == _NEVER or self.written in (None, _NEVER) or _lsn(position) > _lsn(self.written):
                self.written = position

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()  # type: ignore[attr-defined]
