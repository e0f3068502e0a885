"""An MCP server's tools as tools of the loop: mcp_tools lists the server's tools once and makes
each a Tool (its JSON schema, its description for the router), and each call of one opens its own
connection (a process over stdio, or an HTTP request), bounded by the call's timeout and the run's
deadline. A server that dies, hangs or answers garbage fails that call only (a ToolError, which the
loop records in the trace and routes on without the tool); nothing stays open between calls."""
from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..core import RUN_DEADLINE, ConfigurationError, Evidence, ToolError
from ..tools import Tool
from ._server import require_sdk

T = TypeVar("T")
Finder = Callable[[str, list[Evidence]], "dict | None"]
GRACE_S = 5.0  # past a call's own bound: a stdio server's shutdown (stdin closed, 2 s, then killed)


@dataclass(frozen=True)
class McpServer:
    """Where an MCP server is: `target` is a command line run over stdio ("python server.py") or an
    http(s) URL of its streamable HTTP endpoint. `name` names it in citations (default: the server's
    own name); `headers` go with every HTTP request (an Authorization key); `env` is a stdio server's
    whole environment (default: the SDK's safe minimum, PATH and HOME). `timeout_s` bounds each call,
    and no call runs past the run's deadline."""

    target: str
    name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    timeout_s: float = 30.0

    @property
    def is_http(self) -> bool:
        """Whether it is reached over HTTP (else a command run over stdio)."""
        return self.target.startswith(("http://", "https://"))

    @property
    def label(self) -> str:
        """How messages name it: the command, or the URL without what may be a secret (a user and
        password, a query string); messages reach traces, which a service's replies carry."""
        if not self.is_http:
            return self.target
        parts = urlsplit(self.target)
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[Any]:
        """An SDK Client connected to the server for one exchange (a process, or an HTTP client)."""
        import httpx2
        from mcp import Client, StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client

        if self.is_http:
            async with httpx2.AsyncClient(headers=dict(self.headers), timeout=self.timeout_s) as http, \
                    Client(streamable_http_client(self.target, http_client=http), cache=None) as client:
                yield client
            return
        words = shlex.split(self.target)
        if not words:
            raise ConfigurationError("an MCP server needs a command or an http(s) URL, e.g. 'python server.py'")
        env = dict(self.env) if self.env is not None else None
        async with Client(StdioServerParameters(command=words[0], args=words[1:], env=env), cache=None) as client:
            yield client


def mcp_tools(server: str | McpServer, *, patterns: Mapping[str, Sequence[str]] | None = None,
              arguments: Mapping[str, Finder] | None = None, prefix: str = "",
              max_result_chars: int = 8_000) -> list[Tool]:
    """The server's tools as Tools (`run_agentic_rag(..., tools=mcp_tools("python server.py"))`).
    A tool with `patterns[name]` (regexes) is called where they match the question, with the
    arguments `arguments[name](question, evidence)` finds (default: a lone string argument gets the
    question), as the shipped tools are. A tool without patterns is model-routed: the router asks
    the model about every question, and a hosted model reads its description and schema (the
    offline model never picks one). `prefix` goes before each name (two servers with a tool of one
    name); a result is cut to `max_result_chars`. Listing the tools is bounded by the server's
    timeout; a server that cannot be reached is a ConfigurationError naming it."""
    require_sdk("mcp_tools")
    server = server if isinstance(server, McpServer) else McpServer(server)
    patterns, arguments = patterns or {}, arguments or {}
    try:
        listed, own_name = _call_sync(server, _list_tools)
    except ToolError as exc:
        raise ConfigurationError(f"cannot list the tools: {exc}") from None
    shown = server.name or own_name or shlex.split(server.target)[0].rsplit("/", 1)[-1]
    unknown = (set(patterns) | set(arguments)) - {tool.name for tool in listed}
    if unknown:
        raise ConfigurationError(f"MCP server {shown} has no tool {sorted(unknown)[0]!r}; it has "
                                 f"{', '.join(tool.name for tool in listed) or 'none'}")
    return [Tool(prefix + tool.name, f"{tool.description or tool.name} (MCP server {shown})",
                 _Call(server, shown, tool.name, max_result_chars), tuple(patterns.get(tool.name, ())),
                 arguments.get(tool.name) or _question_argument(tool.input_schema), kind="mcp",
                 schema=dict(tool.input_schema), model_routed=not patterns.get(tool.name)) for tool in listed]


@dataclass(frozen=True)
class _Call:
    """One of the server's tools as the Tool's function: a connection per call, its result as one
    cited result (the server and tool in its source)."""

    server: McpServer
    shown: str
    tool: str
    max_chars: int

    def __call__(self, **arguments: Any) -> list[dict]:
        async def call(client: Any) -> Any:
            return await client.call_tool(self.tool, arguments)

        result = _call_sync(self.server, call)
        text = result_text(result)
        if result.is_error:
            raise ToolError(f"MCP server {self.shown} answered {self.tool} with an error: {text[:300]}")
        called = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
        return [{"title": f"{self.tool} (MCP server {self.shown})", "source": f"mcp:{self.shown}/{self.tool}({called})",
                 "text": text[:self.max_chars]}]


def result_text(result: Any) -> str:
    """A tool result's text: its text blocks, else its structured content as JSON; other blocks named."""
    parts = [block.text if getattr(block, "type", "") == "text" else f"[{getattr(block, 'type', 'content')}]"
             for block in result.content]
    if not any(parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    return "\n".join(parts)


async def _list_tools(client: Any) -> tuple[list, str]:
    listed, cursor = [], None
    for _ in range(20):  # pages; a server that pages forever is cut off
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        listed += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    info = client.server_info
    return listed, info.name if info is not None else ""


def _call_sync(server: McpServer, work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(client)` on a new connection to the server, run in a thread of its own (the caller may
    be inside an event loop: a notebook), bounded by the server's timeout and the run's deadline.
    Every failure is a ToolError that says what happened."""
    import mcp.client.streamable_http  # noqa: F401 - imported here, so the SDK's import (seconds) is not timed

    deadline = RUN_DEADLINE.get()
    bound = server.timeout_s if deadline is None else min(server.timeout_s, deadline - time.monotonic())
    if bound <= 0:
        raise ToolError(f"no time left in the run to call MCP server {server.label!r}")
    outcome: dict[str, Any] = {}

    def run() -> None:
        import anyio

        async def connected() -> T:
            with anyio.fail_after(bound):
                async with server.connected() as client:
                    return await work(client)
        try:
            outcome["value"] = anyio.run(connected)
        except BaseException as exc:  # noqa: B036 - every way a server can fail ends this call, reported
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound + GRACE_S)
    if "value" in outcome:
        return outcome["value"]
    raise ToolError(_failure(server, outcome.get("error"), bound))


def _failure(server: McpServer, exc: BaseException | None, bound: float) -> str:
    """One line on why a call to the server failed."""
    while inner := getattr(exc, "exceptions", None):  # an exception group (anyio's task groups wrap what failed)
        exc = inner[0]
    if exc is None or isinstance(exc, TimeoutError):
        return f"MCP server {server.label!r} did not answer within {bound:.1f} s"
    if type(exc).__name__ == "ValidationError":  # pydantic's: the SDK could not read the reply
        return f"MCP server {server.label!r} sent a reply that is not an MCP result ({str(exc).splitlines()[0]})"
    message = str(exc).splitlines()[0].replace(server.target, server.label) if str(exc) else ""
    return f"MCP server {server.label!r} failed: {type(exc).__name__}{': ' + message[:300] if message else ''}"


def _question_argument(schema: Mapping[str, Any]) -> Finder:
    """The offline argument finder for a schema: a tool whose one required argument is a string gets
    the question in it; any other tool is left to a model (None: not called offline)."""
    properties = schema.get("properties") or {}
    required = schema.get("required") or list(properties)
    strings = [name for name in required if (properties.get(name) or {}).get("type") == "string"]
    if len(required) == 1 and strings:
        return lambda question, evidence: {strings[0]: question}
    return lambda question, evidence: None
