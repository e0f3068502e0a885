"""A small MCP server over stdio (the MCP SDK's low-level Server) for the tests of MCP tools in the loop:
`python tests/mcp_tool_server.py MODE`. Its one tool, warehouse_stock(item), answers from a table in
mode `good`; in the other modes the call fails the way a real server can: `dies` (the process exits
mid-call), `hangs` (never answers), `garbage` (a reply that is not an MCP result), `error` (a tool
error, isError). Listing the tools works in every mode."""
import json
import os
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

STOCK = {"umbrella": 41, "lantern": 7}
MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
WIRE = os.dup(1)  # the pipe to the client, before the SDK moves stray prints off it: garbage goes here


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(
        name="warehouse_stock", description="Units of an item in stock at the Berlin warehouse, counted today",
        input_schema={"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]})])


async def call_tool(ctx, params):
    if MODE == "dies":
        os._exit(3)
    if MODE == "hangs":
        await anyio.sleep_forever()
    if MODE == "garbage":  # a reply to this request whose result is no CallToolResult
        os.write(WIRE, f'{{"jsonrpc": "2.0", "id": {json.dumps(ctx.request_id)}, "result": {{"content": 42}}}}\n'
                 .encode())
        await anyio.sleep_forever()
    item = params.arguments["item"].lower()
    known = next((name for name in STOCK if name in item), None)
    if MODE == "error" or known is None:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"unknown item {item!r}")],
                                    is_error=True)
    return types.CallToolResult(content=[types.TextContent(
        type="text", text=f"The Berlin warehouse holds {STOCK[known]} units of {known} today.")])


async def main():
    server = Server("warehouse", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
