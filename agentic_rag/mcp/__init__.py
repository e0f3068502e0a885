"""The Model Context Protocol, both ways: the knowledge base and the agent as an MCP server (over
stdio, and over HTTP inside serve), and an MCP server's tools as tools of the loop (mcp_tools).
Needs the `mcp` extra (the official SDK), imported where used: `pip install 'agentic-rag[mcp]'`."""
from ._client import McpServer as McpServer
from ._client import mcp_tools as mcp_tools
from ._http import exchange as exchange
from ._server import INVALID_PARAMS as INVALID_PARAMS
from ._server import UNAVAILABLE as UNAVAILABLE
from ._server import Refused as Refused
from ._server import Served as Served
from ._server import build_server as build_server
from ._server import require_sdk as require_sdk
from ._server import serve_stdio as serve_stdio

__all__ = ["mcp_tools", "McpServer", "build_server", "Served", "serve_stdio", "exchange", "Refused",
           "require_sdk", "INVALID_PARAMS", "UNAVAILABLE"]
