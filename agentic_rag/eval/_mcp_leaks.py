"""The leak check's MCP client: a key's questions, listings and reads through the MCP SDK's own client
on a collection's /mcp endpoint, every reply checked as the REST replies are (leak_check.Client)."""
from __future__ import annotations

from typing import Any


def mcp_every_way(client: Any, key: dict, where: str, asked: list[str], others: list[str]) -> None:
    """The key on the collection's MCP endpoint (/mcp/NAME) through the MCP SDK's own client: every
    question searched three ways and asked; every document listed, read as a tool and as a resource;
    and another tenant's documents asked for by id, as a tool and as a resource URI."""
    import anyio

    from ..mcp import McpServer

    path, allowed = f"/mcp/{where}", key["allowed"]
    foreign = [f"{other}-doc{j}" for other in others[:1] for j in range(2)]

    async def each(what: str, call: Any) -> Any:
        try:
            result = await call
        except Exception as exc:  # an MCP error: its message is a reply too
            client.check(f"mcp {what}", path, "error", str(exc), allowed)
            return None
        client.check(f"mcp {what}", path, "ok", result.model_dump_json(), allowed)
        return result

    async def session() -> None:
        server = McpServer(f"http://127.0.0.1:{client.port}{path}", headers={"Authorization": f"Bearer {key['key']}"},
                           timeout_s=120)
        async with server.connected() as mcp:
            for question in asked:
                for mode in ("hybrid", "bm25", "vector"):
                    await each("search", mcp.call_tool("search", {"query": question, "k": 10, "mode": mode}))
                await each("ask", mcp.call_tool("ask", {"question": question}))
            after, held = "", []
            while (page := await each("list_documents", mcp.call_tool("list_documents", {"after": after}))) \
                    and page.structured_content["documents"]:
                held += [d["doc_id"] for d in page.structured_content["documents"]]
                after = page.structured_content["next_after"]
                if not after:
                    break
            for doc_id in held[:3] + foreign:
                await each("get_document", mcp.call_tool("get_document", {"doc_id": doc_id}))
            listed = await each("list_resources", mcp.list_resources())
            uris = [r.uri for r in listed.resources[:3]] if listed else []
            for uri in uris + [f"agentic-rag://{where}/documents/{doc_id}" for doc_id in foreign]:
                await each("read_resource", mcp.read_resource(uri))

    anyio.run(session)
