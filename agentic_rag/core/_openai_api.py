"""Where and how to reach an OpenAI-compatible endpoint: the endpoint settings, the SDK client and
one clear error per failed call. Shared by the chat models (models/_openai_client.py) and the
embedder (kb/embedders/_openai.py), so neither imports the other. The `openai` SDK is imported
inside the functions that use it: `import agentic_rag` does not load it (it more than doubled the
import time)."""
from __future__ import annotations

import contextlib
import contextvars
import email.utils
import math
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import ConfigurationError, DeadlineExceeded, ModelError

if TYPE_CHECKING:
    import httpx2  # the SDK's HTTP client
    import openai

_T = TypeVar("_T")


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call: base URL (None = OpenAI), key (None is fine for local servers),
    timeout in seconds, and retries (408, 409, 429, 5xx, timeouts and lost connections, pausing as
    the server's Retry-After says, as the SDK does; see `send` for how a deadline cuts both)."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2


def endpoint_from_env(environ: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                      timeout: float = 60.0, max_retries: int = 2) -> Endpoint:
    """Explicit values first, then AGENTIC_RAG_BASE_URL / AGENTIC_RAG_API_KEY, then OPENAI_BASE_URL /
    OPENAI_API_KEY. Called by the command line, once, with os.environ: nothing reads it at import."""
    return Endpoint(base_url=base_url or environ.get("AGENTIC_RAG_BASE_URL") or environ.get("OPENAI_BASE_URL"),
                    api_key=api_key or environ.get("AGENTIC_RAG_API_KEY") or environ.get("OPENAI_API_KEY"),
                    timeout=timeout, max_retries=max_retries)


def make_client(endpoint: Endpoint) -> openai.OpenAI:
    """An SDK client for the endpoint (one per model or embedder object: no global client). Its own
    retries are off: `send` retries, so that a run's deadline can cut each try and each pause."""
    import openai

    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "no-key-needed",
                         timeout=endpoint.timeout, max_retries=0,
                         http_client=openai.DefaultHttpxClient(event_hooks={"response": [_watch]}))


# The deadline (time.monotonic()) of the run whose code is calling, set by run_agentic_rag for the
# run's duration. A model call gets its deadline explicitly (ModelRequest.deadline); an embedder
# called inside a search has no such argument (a search is a knowledge-base call), so `send` falls
# back on this one. A context variable, not a global: each thread and each run sees its own.
RUN_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("agentic_rag_run_deadline",
                                                                           default=None)
_READER = "agentic-rag-model-call"  # each reader thread's name (a thread dump shows what it is)
_RETRIED = (408, 409, 429)   # and every 5xx: what the SDK retries
_MAX_RETRY_AFTER = 120.0     # a longer Retry-After is not waited for (the SDK's rule)


def send(endpoint: Endpoint, what: str, deadline: float | None, call: Callable[[float], _T]) -> _T:
    """`call(timeout)` with the endpoint's retries. With a `deadline` (time.monotonic()), each try's
    timeout is cut to the time left and the wait for it ends there, and a pause that would end past
    it is not taken: DeadlineExceeded. With none, the calling run's (RUN_DEADLINE), if any. The
    SDK's errors are raised as they are (see call_error)."""
    import openai

    deadline = RUN_DEADLINE.get() if deadline is None else deadline
    for attempt in range(endpoint.max_retries + 1):
        timeout = min(endpoint.timeout, time_left(deadline, what))
        try:  # read to its end, so that the reply (a stream, say) is the caller's, not cut
            # the default binds this try's timeout; mypy infers no lambda that has one
            (reply,) = bounded(deadline, what, lambda t=timeout: (call(t),))  # type: ignore[misc]
            return reply
        except openai.OpenAIError as exc:
            if timeout < endpoint.timeout and isinstance(exc, openai.APITimeoutError):  # the time left ran out
                raise DeadlineExceeded(f"{what} was cut off by the run's deadline") from None
            if attempt == endpoint.max_retries or (pause := _pause(exc, attempt)) is None:
                raise
            failure = f"HTTP {exc.status_code}" if isinstance(exc, openai.APIStatusError) else type(exc).__name__
        if deadline is not None and time.monotonic() + pause >= deadline:
            raise DeadlineExceeded(f"{what} got {failure}; a retry in {pause:.3g} s would end past the run's deadline")
        time.sleep(pause)
    # only a negative max_retries gets here (no try at all), which used to return None to the caller
    raise ConfigurationError(f"Endpoint.max_retries = {endpoint.max_retries} is negative; give 0 or more")


def time_left(deadline: float | None, what: str) -> float:
    """Seconds before `deadline` (infinite without one); DeadlineExceeded when none are left."""
    left = math.inf if deadline is None else deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded(f"{what} was not made: the run's deadline had passed")
    return left


def bounded(deadline: float | None, what: str, produce: Callable[[], Iterable[Any]]) -> Iterator[Any]:
    """The items of `produce()`, read in a thread of their own so that waiting for the next one ends
    at the deadline (DeadlineExceeded): an HTTP timeout bounds each read, not a server that dribbles.
    Left before its end, the reader is cut: its HTTP response's socket is shut down, so the thread
    and the connection end at once, and what it reads from then on is closed, not kept."""
    if deadline is None:
        yield from produce()
        return
    items: queue.Queue[tuple[str, Any]] = queue.Queue()  # ("item", it), ("error", exc) or ("end", None)
    stop, call = threading.Event(), _Call()
    context = contextvars.copy_context()  # the caller's context (an app's tracing, say) goes with the call
    threading.Thread(target=context.run, args=(_read, produce, items, stop, call), name=_READER, daemon=True).start()
    ended = False
    try:
        while True:
            try:
                kind, item = items.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DeadlineExceeded(f"{what} was cut off by the run's deadline") from None
            ended = kind != "item"
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        if not ended:
            call.cut()


def _read(produce: Callable[[], Iterable], items: queue.Queue, stop: threading.Event, call: _Call) -> None:
    _CALL.set(call)  # in this thread's own context: the client's response hook hands its responses to `call`
    source = None
    try:
        source = produce()
        response = getattr(source, "response", None)  # an SDK stream, made before: its HTTP response
        if response is not None:
            call.watch(response)
        for item in source:
            if stop.is_set():
                _close(item)  # a stream whose headers came after the deadline, say
                break
            items.put(("item", item))
        items.put(("end", None))
    except Exception as exc:  # handed to the waiting caller, which raises it
        items.put(("error", exc))
    finally:
        if stop.is_set():
            _close(source)


class _Call:
    """The HTTP responses of one reader's call, as they come, so that the waiting thread can cut them:
    a read blocked on a socket ends when the socket is shut down (closing it would not wake it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._responses: list[httpx2.Response] = []
        self._cut = False

    def watch(self, response: httpx2.Response) -> None:
        """Keep a response to cut; one that comes after the cut is refused (httpx then closes it)."""
        with self._lock:
            if self._cut:
                raise DeadlineExceeded("the reply came after the run's deadline")
            self._responses.append(response)

    def cut(self) -> None:
        """Shut down the socket of every response not yet read to its end (one that was is back in the
        connection pool, maybe another call's by now: it is left alone)."""
        with self._lock:
            self._cut, responses = True, self._responses
        for response in responses:
            stream = None if response.is_closed else response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):  # socket's own shutdown: an SSLSocket's drops its TLS state
                with contextlib.suppress(OSError):  # under the reader, which is still using it
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("agentic_rag_model_call", default=None)


def _watch(response: httpx2.Response) -> None:
    """The SDK client's response hook: httpx calls it with the headers, before the body is read."""
    call = _CALL.get()
    if call is not None:
        call.watch(response)


def _close(source: object) -> None:
    close = getattr(source, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # a connection already cut may fail to close cleanly
            close()


def _pause(exc: Exception, attempt: int) -> float | None:
    """How long to wait before retrying a failed try, or None when it is not retried: the server's
    Retry-After (up to two minutes), else 0.5 s doubling up to 8 s less up to a quarter (the SDK's backoff)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        if headers.get("x-should-retry") in ("true", "false"):
            retried = headers["x-should-retry"] == "true"
        else:
            retried = exc.status_code in _RETRIED or exc.status_code >= 500
        after = _retry_after(headers)
        if not retried or (after is not None and after > _MAX_RETRY_AFTER):
            return None
        if after is not None and after > 0:
            return after
    elif not isinstance(exc, openai.APIConnectionError):  # a timeout is a connection error too
        return None
    return min(0.5 * 2.0 ** attempt, 8.0) * (1 - 0.25 * random.random())


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds a response asks to wait: retry-after-ms, or retry-after in seconds or as an HTTP date."""
    for header, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            value = float(headers.get(header, ""))  # "" (no such header) fails as a bad value does
        except (TypeError, ValueError):
            continue
        return value / divisor if math.isfinite(value) else _MAX_RETRY_AFTER + 1
    try:
        parsed = email.utils.parsedate_tz(headers.get("retry-after", ""))  # None: no date
        return None if parsed is None else email.utils.mktime_tz(parsed) - time.time()
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def call_error(exc: Exception, what: str, endpoint: Endpoint) -> ModelError:
    """One clear line for a failed call, naming the call and the fix where there is one."""
    import openai

    where = endpoint.base_url or "the OpenAI API"
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"{what} timed out after {endpoint.timeout:g} s at {where} "
                          f"(and {endpoint.max_retries} retries)")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"{what} could not reach {where}: check the base URL (--base-url or AGENTIC_RAG_BASE_URL)")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError(f"{what} was refused by {where} (HTTP 401): set AGENTIC_RAG_API_KEY or OPENAI_API_KEY")
    if isinstance(exc, openai.APIStatusError):
        message = str(getattr(exc, "message", exc)).splitlines()[0][:200]
        return ModelError(f"{what} failed at {where} with HTTP {exc.status_code}: {message}")
    return ModelError(f"{what} failed: {exc.__class__.__name__}: {exc}")
