"""The knowledge base and the agent as an MCP server (the official SDK's low-level Server): the tools
of _offer, and each document as a resource. One server definition answers over stdio (agentic-rag
mcp) and over HTTP (serve's /mcp, _http); what it answers from is a Served, which the caller has
already kept to a key's scope. Our failures reach the client as MCP errors of one line."""
from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import unquote

from pydantic import ValidationError

from ..core import AgenticRAGError, ConfigurationError, ConnectionLost, RetrievalError, first_problem
from ..kb import KnowledgeBaseBackend
from ..loop import Hook
from ._offer import ANSWER_FIELDS, READS, TOOLS, AskArguments, Reply, answer_text, document_uri, whole_text

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.lowlevel import Server

# JSON-RPC error codes: the protocol's own, and the MCP specification's for an unknown resource; one
# from the range JSON-RPC leaves to servers for "not now" (every run slot taken, the database away)
INVALID_PARAMS, INTERNAL_ERROR, RESOURCE_NOT_FOUND, UNAVAILABLE = -32602, -32603, -32002, -32001
PAGE = 100  # resources a resources/list page holds


class Refused(AgenticRAGError):
    """A request the serving side turns away: an MCP error with this message and `code`
    (UNAVAILABLE when retrying later may work)."""

    def __init__(self, message: str, code: int = INVALID_PARAMS):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Served:
    """What an MCP server answers from. `kb()` is the knowledge base as it is now (already kept to the
    caller's scope); `ask(question, filters, on_step)` runs the agent and returns the `ask --json`
    object (stop_reason "error" for a run that failed), raising Refused for one it will not start;
    `name` names the collection in resource URIs; `public(message)` is what a client may see of an
    error's message (a service hides its paths)."""

    kb: Callable[[], KnowledgeBaseBackend]
    ask: Callable[[str, dict | None, Hook], dict]
    name: str = "default"
    public: Callable[[str], str] = field(default=lambda message: message)


def require_sdk(what: str) -> None:
    """A ConfigurationError naming the extra when the MCP SDK is not installed."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigurationError(f"{what} needs the MCP SDK: pip install 'agentic-rag[mcp]'")


def build_server(served: Served) -> Server:
    """The MCP server over `served` (the SDK's low-level Server; run it with serve_stdio or serve's /mcp)."""
    from mcp.server.lowlevel import Server

    return Server("agentic-rag", version=_version(), instructions=(
        "Search and question a knowledge base. `ask` answers with citations or refuses when the "
        "documents do not hold the answer; `search` returns the passages themselves."),
        on_list_tools=_list_tools, on_call_tool=partial(_call_tool, served),
        on_list_resources=partial(_list_resources, served), on_read_resource=partial(_read_resource, served))


async def _list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    import mcp.types as types

    return types.ListToolsResult(tools=[types.Tool(name=name, description=text, input_schema=model.model_json_schema())
                                        for name, (text, model) in TOOLS.items()])


async def _call_tool(served: Served, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    import anyio
    import mcp.types as types

    name = params.name
    if name not in TOOLS:
        _fail(INVALID_PARAMS, f"no tool {name[:80]!r}; the tools are {', '.join(TOOLS)}")
    with _as_mcp_errors(served, name):
        arguments = TOOLS[name][1].model_validate(params.arguments or {})
        if isinstance(arguments, AskArguments):
            text, structured, failed = await _ask(served, arguments, ctx)
        else:
            text, structured, failed = await anyio.to_thread.run_sync(lambda: READS[name](served.kb(), arguments))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=structured, is_error=failed)


async def _list_resources(served: Served, ctx: Any,
                          params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    import anyio
    import mcp.types as types

    after = params.cursor if params is not None and params.cursor else ""
    if len(after) > 1_000 or "\x00" in after:
        _fail(INVALID_PARAMS, "resources/list: the cursor is not one this server gave")
    with _as_mcp_errors(served, "resources/list"):
        page = await anyio.to_thread.run_sync(lambda: served.kb().list_documents(after, PAGE))
    return types.ListResourcesResult(
        resources=[types.Resource(uri=document_uri(served.name, d["doc_id"]), name=d["doc_id"],
                                  title=d["title"] or None, description=d["source"], mime_type="text/plain")
                   for d in page],
        next_cursor=page[-1]["doc_id"] if len(page) == PAGE else None)


async def _read_resource(served: Served, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    import anyio
    import mcp.types as types

    prefix, uri = document_uri(served.name, ""), str(params.uri)
    doc_id = unquote(uri[len(prefix):]) if uri.startswith(prefix) else ""
    with _as_mcp_errors(served, "resources/read"):
        chunks = await anyio.to_thread.run_sync(lambda: served.kb().document_chunks(doc_id) if doc_id else [])
    if not chunks:
        _fail(RESOURCE_NOT_FOUND, "no such document here; resources/list gives those held")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type="text/plain",
                                                                         text=whole_text(chunks))])


async def _ask(served: Served, arguments: AskArguments, ctx: Any) -> Reply:
    """A run of the agent in a worker thread: each trace event is a progress notification, and a
    cancelled request stops the run at its next step (stop_reason "stopped")."""
    import anyio
    import anyio.from_thread

    stop, steps = threading.Event(), [0]

    def on_step(event: dict, state: Any) -> object:
        steps[0] += 1
        try:
            anyio.from_thread.run(ctx.session.report_progress, steps[0], None, event.get("summary", ""))
        except Exception:  # the request is gone (cancelled, its loop ended): the run stops below
            stop.set()
        return "stop" if stop.is_set() else None

    try:
        result = await anyio.to_thread.run_sync(
            lambda: served.ask(arguments.question, arguments.filters, on_step), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        raise
    if result["stop_reason"] == "error":
        result = dict(result, error=served.public(str(result.get("error"))))
    return answer_text(result), {k: result.get(k) for k in ANSWER_FIELDS}, result["stop_reason"] == "error"


@contextmanager
def _as_mcp_errors(served: Served, what: str) -> Iterator[None]:
    """Our failures inside the block as MCP errors of one line naming `what`, as a client may see them."""
    try:
        yield
    except ValidationError as exc:
        _fail(INVALID_PARAMS, f"{what}: {first_problem(exc, 'arguments')}")
    except Refused as exc:
        _fail(exc.code, f"{what}: {served.public(str(exc))}")
    except ConnectionLost as exc:
        _fail(UNAVAILABLE, f"{what}: {served.public(str(exc))}")
    except (ConfigurationError, RetrievalError) as exc:  # bad filters, an empty knowledge base
        _fail(INVALID_PARAMS, f"{what}: {served.public(str(exc))}")
    except AgenticRAGError as exc:
        _fail(INTERNAL_ERROR, f"{what}: {served.public(str(exc))}")


def _fail(code: int, message: str) -> NoReturn:
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=code, message=message.splitlines()[0] if message else message)


def _version() -> str:
    from .. import __version__

    return __version__


def serve_stdio(served: Served) -> None:
    """Answer MCP requests on stdin and stdout until the client closes stdin (stdout is the
    protocol's alone: nothing else may print there)."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(served)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
