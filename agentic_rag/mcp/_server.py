"""The knowledge base and the agent as an MCP server (the official SDK's low-level Server): tools
`search`, `ask`, `list_documents` and `get_document`, and each document as a resource. One server
definition answers over stdio (agentic-rag mcp) and over HTTP (serve's /mcp, _http); what it
answers from is a Served, which the caller has already kept to a key's scope."""
from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core import AgenticRAGError, ConfigurationError
from ..kb import KnowledgeBaseBackend

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

Hook = Callable[[dict, Any], object]  # run_agentic_rag's on_step: (event, state) -> "stop" to stop the run
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource URI the server does not have


class Refused(AgenticRAGError):
    """A request the serving side turns away (every run slot taken, say): an MCP error with its message."""


@dataclass(frozen=True)
class Served:
    """What an MCP server answers from. `kb()` is the knowledge base as it is now (already kept to the
    caller's scope); `ask(question, filters, on_step)` runs the agent and returns the `ask --json`
    object, raising Refused or ConfigurationError for what it will not run; `name` names the
    collection in resource URIs."""

    kb: Callable[[], KnowledgeBaseBackend]
    ask: Callable[[str, dict | None, Hook], dict]
    name: str = "default"


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArguments(_Arguments):
    query: str = Field(min_length=1, max_length=2_000, description="what to search for")
    k: int = Field(5, ge=1, le=50, description="how many hits")
    mode: Literal["hybrid", "bm25", "vector"] = Field("hybrid", description="which retrievers")
    filters: dict[str, Any] | None = Field(None, description='metadata filters, e.g. {"type": "manual"}')


class AskArguments(_Arguments):
    question: str = Field(min_length=1, max_length=2_000, description="the question")
    filters: dict[str, Any] | None = Field(None, description="keep every search of the run to these filters")


class ListArguments(_Arguments):
    after: str = Field("", max_length=1_000, description="the last doc_id of the page before (the next page)")
    limit: int = Field(50, ge=1, le=200, description="documents on this page")


class GetArguments(_Arguments):
    doc_id: str = Field(min_length=1, max_length=1_000, description="a doc_id list_documents gave")


TOOLS: dict[str, tuple[str, type[_Arguments]]] = {
    "search": ("Search the knowledge base (BM25 and vectors, fused): the best chunks with their sources",
               SearchArguments),
    "ask": ("Answer a question from the knowledge base with the agent: a cited answer, or a refusal when the "
            "documents do not hold it; progress is reported step by step", AskArguments),
    "list_documents": ("The documents held, a page at a time by doc_id", ListArguments),
    "get_document": ("One document's whole text, by doc_id", GetArguments),
}


def require_sdk(what: str) -> None:
    """A ConfigurationError naming the extra when the MCP SDK is not installed."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigurationError(f"{what} needs the MCP SDK: pip install 'agentic-rag[mcp]'")


def build_server(served: Served) -> Server:
    """The MCP server over `served` (the SDK's low-level Server; run it with serve_stdio or serve's /mcp)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=text, input_schema=model.model_json_schema())
            for name, (text, model) in TOOLS.items()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            _fail(types.INVALID_PARAMS, f"no tool {params.name[:80]!r}; the tools are {', '.join(TOOLS)}")
        try:
            arguments = TOOLS[params.name][1].model_validate(params.arguments or {})
        except ValidationError as exc:
            _fail(types.INVALID_PARAMS, f"{params.name}: {one_line(exc)}")
        try:
            if isinstance(arguments, AskArguments):
                reply = await _ask(served, arguments, ctx)
            else:
                import anyio

                reply = await anyio.to_thread.run_sync(_READS[params.name], served, arguments)
        except (ConfigurationError, Refused) as exc:  # bad filters, an empty question, no free run slot
            _fail(types.INVALID_PARAMS, f"{params.name}: {exc}")
        except ValidationError as exc:  # the serving side's own check of the arguments
            _fail(types.INVALID_PARAMS, f"{params.name}: {one_line(exc)}")
        text, structured, failed = reply
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured, is_error=failed)

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        import anyio

        after = params.cursor if params is not None and params.cursor else ""
        page = await anyio.to_thread.run_sync(lambda: served.kb().list_documents(after, 100))
        return types.ListResourcesResult(
            resources=[types.Resource(uri=document_uri(served.name, d["doc_id"]), name=d["doc_id"],
                                      title=d["title"] or None, description=d["source"], mime_type="text/plain")
                       for d in page],
            next_cursor=page[-1]["doc_id"] if len(page) == 100 else None)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        import anyio

        prefix = document_uri(served.name, "")
        uri = str(params.uri)
        chunks = await anyio.to_thread.run_sync(
            lambda: served.kb().document_chunks(unquote(uri[len(prefix):])) if uri.startswith(prefix) else [])
        if not chunks:
            _fail(RESOURCE_NOT_FOUND, "no such document here; resources/list gives those held")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/plain", text=_whole_text(chunks))])

    return Server("agentic-rag", version=_version(), instructions=(
        "Search and question a knowledge base. `ask` answers with citations or refuses when the "
        "documents do not hold the answer; `search` returns the passages themselves."),
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_read_resource=read_resource)


async def _ask(served: Served, arguments: AskArguments, ctx: Any) -> tuple[str, dict, bool]:
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
    return answer_text(result), {k: result.get(k) for k in ANSWER_FIELDS}, result["stop_reason"] == "error"


ANSWER_FIELDS = ("answer", "abstained", "abstain_reason", "citations", "stop_reason", "rounds", "trace_line",
                 "usage", "model", "error")


def answer_text(result: Mapping[str, Any]) -> str:
    """The answer and its sources, as text for a client that shows no structured content."""
    if result["stop_reason"] == "error":
        return f"the run failed: {result.get('error')}"
    sources = [f"[{c['n']}] {c['source']}" + (f" (page {c['page']})" if c.get("page") else "")
               for c in result["citations"]]
    return "\n".join([result["answer"], *(["", "Sources:", *sources] if sources else [])])


def _search(served: Served, arguments: SearchArguments) -> tuple[str, dict, bool]:
    hits = served.kb().search(arguments.query, k=arguments.k, mode=arguments.mode, filters=arguments.filters)
    shown = [hit.model_dump(include={"id", "doc_id", "source", "title", "text", "score", "ranks"}) for hit in hits]
    text = "\n\n".join(f"[{i}] {h['title'] or h['doc_id']} ({h['source']})\n{h['text']}"
                       for i, h in enumerate(shown, 1))
    return text or "no chunk matches", {"hits": shown}, False


def _list(served: Served, arguments: ListArguments) -> tuple[str, dict, bool]:
    page = served.kb().list_documents(arguments.after, arguments.limit)
    after = page[-1]["doc_id"] if len(page) == arguments.limit else None
    text = "\n".join(f"{d['doc_id']}\t{d['title']}\t{d['source']}" for d in page)
    return text or "no documents", {"documents": page, "next_after": after}, False


def _get(served: Served, arguments: GetArguments) -> tuple[str, dict, bool]:
    chunks = served.kb().document_chunks(arguments.doc_id)
    if not chunks:
        raise ConfigurationError("no such document here; list_documents gives the doc_ids held")
    text = _whole_text(chunks)
    return text, {"doc_id": arguments.doc_id, "title": chunks[0].title, "source": chunks[0].source,
                  "metadata": chunks[0].metadata, "chunks": len(chunks), "text": text}, False


_READS: dict[str, Callable[[Served, Any], tuple[str, dict, bool]]] = {
    "search": _search, "list_documents": _list, "get_document": _get}


def _whole_text(chunks: list) -> str:
    """A document's text from its chunks, in order (overlapping chunks repeat their overlap)."""
    return "\n\n".join(chunk.text for chunk in chunks)


def document_uri(collection: str, doc_id: str) -> str:
    """A document's resource URI: agentic-rag://COLLECTION/documents/DOC_ID (the id percent-encoded)."""
    return f"agentic-rag://{collection}/documents/{quote(doc_id, safe='')}"


def one_line(exc: ValidationError) -> str:
    """A validation error's first problem on one line: where, and what was wrong."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    return f"{where}: {first['msg']}"


def _fail(code: int, message: str) -> NoReturn:
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=code, message=message)


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
