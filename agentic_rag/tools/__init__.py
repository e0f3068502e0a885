"""Tools the agent can call: the protocol and registry, a safe calculator, dates, SQL, shop lookups, web search."""
from ._calculator import CALCULATOR, calculate
from ._dates import date_tools
from ._registry import OffTool, Tool, ToolRegistry, tool_from_function
from ._shop import shop_tools, shop_tools_off
from ._sql import SQLDatabase, named_query, sql_tool
from ._web import web_search_tool

__all__ = ["Tool", "OffTool", "ToolRegistry", "tool_from_function", "CALCULATOR", "calculate", "date_tools",
           "shop_tools", "shop_tools_off",
           "SQLDatabase", "named_query", "sql_tool", "web_search_tool"]
