"""The tool protocol: a named callable with a description, the question patterns that select it
offline, and an argument extractor; a registry calls tools and turns results into evidence."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ConfigurationError, ToolError


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call. `arguments(question, evidence)` returns the call's arguments
    when the tool applies, else None; `patterns` are regexes a question must match first."""

    name: str
    description: str
    fn: Callable[..., object]
    patterns: tuple[str, ...] = ()
    arguments: Callable[[str, list[dict]], dict | None] = field(default=lambda question, evidence: {})

    def matches(self, question: str) -> bool:
        """Whether any of the tool's patterns occurs in the question."""
        return any(re.search(p, question, re.I) for p in self.patterns)


class ToolRegistry:
    """The tools of one run, by name."""

    def __init__(self, tools=()):
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ConfigurationError(f"{tool!r} is not a Tool; wrap functions with agentic_rag.tools.Tool(...)")
            if tool.name in self.tools:
                raise ConfigurationError(f"two tools are named {tool.name!r}; give each tool its own name")
            self.tools[tool.name] = tool

    def describe(self) -> list[str]:
        """One line per tool, for prompts."""
        return [f"{t.name}: {t.description}" for t in self.tools.values()]

    def select(self, question: str, evidence: list[dict]) -> tuple[Tool, dict] | None:
        """The first tool whose patterns match and whose arguments can be found, with them."""
        for tool in self.tools.values():
            if tool.matches(question):
                arguments = tool.arguments(question, evidence)
                if arguments is not None:
                    return tool, arguments
        return None

    def call(self, name: str, arguments: dict) -> str:
        """Run a tool; unknown names, bad arguments and failures raise ToolError with the reason."""
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; known tools: {', '.join(self.tools) or '(none)'}")
        if not isinstance(arguments, dict):
            raise ToolError(f"arguments for {name} must be an object, not {type(arguments).__name__}")
        try:
            return str(tool.fn(**arguments))
        except TypeError as exc:
            raise ToolError(f"bad arguments for {name}: {exc}") from None
        except ToolError:
            raise
        except Exception as exc:  # a tool's own failure is recorded, never raised into the loop
            raise ToolError(f"{name} failed: {exc.__class__.__name__}: {exc}") from None
