"""Tools the agent can call: the protocol and registry, a safe calculator, shop lookups."""
from .calculator import CALCULATOR, calculate
from .registry import Tool, ToolRegistry
from .shop import shop_tools

__all__ = ["CALCULATOR", "calculate", "Tool", "ToolRegistry", "shop_tools"]
