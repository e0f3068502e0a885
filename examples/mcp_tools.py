"""A tool from an MCP server in the agent's loop, offline.

Run with no arguments: it starts itself as a small MCP server over stdio (`--serve`, built with
the MCP SDK's MCPServer: one tool, the units in stock at a warehouse), turns that server's tools
into the loop's tools with mcp_tools, and asks a question the tool answers and one it does not.

    pip install -e '.[mcp]'
    python examples/mcp_tools.py
"""
import sys

from agentic_rag import KnowledgeBase, OfflineModel, format_trace, load_documents, mcp_tools, run_agentic_rag

STOCK = {"umbrella": 41, "lantern": 7}


def serve() -> None:
    """The MCP server: what any MCP server in another language or process would be to the loop."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("warehouse")

    @server.tool()
    def warehouse_stock(item: str) -> str:
        """Units of an item in stock at the Berlin warehouse, counted today."""
        known = next((name for name in STOCK if name in item.lower()), None)
        if known is None:
            raise ToolError(f"no item {item!r} in the warehouse")  # the client gets an error result
        return f"The Berlin warehouse holds {STOCK[known]} units of {known} today."

    server.run("stdio")


def main() -> None:
    kb = KnowledgeBase()
    kb.add_documents(load_documents("examples/data").documents)
    # the offline router calls the tool for questions these patterns match; a hosted model reads the
    # tool's description and JSON schema and decides itself
    tools = mcp_tools(f"{sys.executable} {__file__} --serve", patterns={"warehouse_stock": [r"\bin stock\b"]})
    print("tools:", ", ".join(f"{tool.name} ({tool.description})" for tool in tools))
    for question in ("How many units of umbrella are in stock?", "How many units of kayak are in stock?"):
        state = run_agentic_rag(question, kb, OfflineModel(), tools)
        print(f"\nQ: {question}\n{state['answer']}\ntrace: {format_trace(state)}")
        for citation in state["citations"]:
            print(f"  [{citation['n']}] {citation['source']}")


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["--serve"] else main()
