"""The service's HTTP vocabulary, shared by every endpoint and both applications: the error a handler
raises (ServiceError) and its JSON shape, whole replies, the request's body and API key, and the
messages a client may see (no server path, no database URL)."""
from __future__ import annotations

import errno
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from ..core import AccessDenied, AgenticRAGError, ConfigurationError, ConnectionLost

log = logging.getLogger("agentic_rag.service")
MODEL_ID = "agentic-rag"  # the one model /v1/models lists: the agent, whatever model it runs on
SCOPE = "agentic_rag.scope"  # the environ key where a collections app puts the caller's Scope (no header can)
SENT_PATH = "agentic_rag.sent_path"  # and the path the client sent, for messages that name it

Headers = list[tuple[str, str]]
# what an endpoint returns: the status, the body (a JSON object, bytes as they are, or a stream of
# server-sent events) and the headers beside Content-Type and Content-Length
Reply = tuple[int, dict | bytes | Iterator[bytes], Headers]
Handler = Callable[[dict], Reply]
StartResponse = Callable[..., Any]  # PEP 3333's start_response(status, headers, exc_info=None)

REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
           413: "Content Too Large", 415: "Unsupported Media Type", 429: "Too Many Requests",
           500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
           507: "Insufficient Storage"}
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a write that failed for want of space: 507, not 503
RETRY = (("Retry-After", "5"),)  # a database that dropped, or a folder that cannot be read, may be back soon
# the server's own database failing a request or a run (not the request, not the model) -> the reply's
# status, kind and headers: a lost connection may be back in a moment; a right the role lacks is its operator's
DATABASE_FAILED: dict[type[AgenticRAGError], tuple[int, str, tuple[tuple[str, str], ...]]] = {
    ConnectionLost: (503, "unavailable", RETRY), AccessDenied: (500, "internal_error", ())}
_SERVER_PATH = re.compile(r"(?<![\w.:/~-])/[^\s:;,'\"()]+")  # an absolute path, as messages write one
# a database URL (its passwords masked or not), without the punctuation a sentence puts after it ("URL: ...")
_DATABASE_URL = re.compile(r"postgres(?:ql)?://[^\s'\"()]*[^\s'\"():;,.]", re.IGNORECASE)


class ServiceError(AgenticRAGError):
    """A reply other than 200: HTTP status, error type and a one-line message."""

    def __init__(self, status: int, kind: str, message: str, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.status, self.kind, self.headers = status, kind, list(headers)


class NotJSON(ConfigurationError, ValueError):
    """A constant Python's parser takes that JSON has not (a ValueError, as the parser's own errors are)."""


def error_body(kind: str, message: str, path: str = "") -> dict:
    """The JSON body of every error: {"error": {"type", "message"}}; at the MCP endpoint (`path` /mcp
    or /mcp/...) it is a JSON-RPC error as well, so that an MCP client shows its message."""
    if path == "/mcp" or path.startswith("/mcp/"):
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "type": kind, "message": message}}
    return {"error": {"type": kind, "message": message}}


def respond(start_response: StartResponse, status: int, body: dict | bytes, headers: Iterable[tuple[str, str]] = (),
            kind: str = "application/json") -> list[bytes]:
    """Start a whole (not streamed) reply: `body` as UTF-8 JSON (or bytes as they are), its length and type."""
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8")
    start_response(f"{status} {REASONS[status]}", [("Content-Type", f"{kind}; charset=utf-8"),
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
    data: bytes = environ["wsgi.input"].read(length) if length else b""
    return data


def read_json(environ: dict, max_bytes: int) -> dict:
    """The request's JSON body, an object; 415 unless it says it is JSON (so that a web page cannot
    post it without the browser asking first), 413 past `max_bytes`, 400 if it is not JSON."""
    if environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower() != "application/json":
        raise ServiceError(415, "unsupported_media_type", "send the body as Content-Type: application/json")
    raw = read_body(environ, max_bytes)
    try:  # NaN and Infinity are not JSON: kept in metadata they would come back in replies strict clients refuse
        data = json.loads(raw.decode("utf-8"), parse_constant=_not_json, parse_float=_finite) if raw else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, NotJSON) else type(exc).__name__
        raise ServiceError(400, "invalid_request", f"the body is not UTF-8 JSON ({why})") from None
    if not isinstance(data, dict):
        raise ServiceError(400, "invalid_request", "send a JSON object as the body")
    return data


def _not_json(constant: str) -> NoReturn:
    raise NotJSON(f"{constant} is not a JSON number; send a number or null")


def _finite(number: str) -> float:
    """A JSON number as a float; one too large for a float (1e999) is refused, not made Infinity."""
    value = float(number)
    if math.isinf(value):
        raise NotJSON(f"{number[:20]} is too large a number; send one within a double's range")
    return value


def given_key(environ: Mapping[str, str]) -> str:
    """The API key a request sends: `Authorization: Bearer KEY`, or `X-API-Key: KEY`."""
    header = environ.get("HTTP_AUTHORIZATION", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else environ.get("HTTP_X_API_KEY", "")


def public_message(message: str, kb_dir: Path | None) -> str:
    """A message for a client: the knowledge base's folder by its name, a database as "the
    database" (its user, host and name are the server's), and no other absolute path of the
    server (the log has the whole message)."""
    message = _DATABASE_URL.sub("the database", message)
    if kb_dir is not None:
        for form in sorted({str(kb_dir.resolve()), str(kb_dir.absolute()), str(kb_dir)}, key=len, reverse=True):
            message = message.replace(form, kb_dir.resolve().name or "the knowledge base")
    return _SERVER_PATH.sub("(a server path)", message)
