"""Tools the agent can call: the protocol and registry, a safe calculator, dates, SQL, shop lookups, web search."""
from .calculator import CALCULATOR, calculate
from .dates import date_tools
from .registry import Tool, ToolRegistry, tool_from_function
from .shop import shop_tools
from .sql import SQLDatabase, named_query, sql_tool
from .web import web_search_tool

__all__ = ["CALCULATOR", "calculate", "date_tools", "Tool", "ToolRegistry", "tool_from_function", "shop_tools",
           "SQLDatabase", "named_query", "sql_tool", "web_search_tool"]
