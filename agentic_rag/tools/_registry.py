"""The tool protocol: a named callable with a description, an argument schema, the question
patterns that select it offline and an argument finder; OffTool, a tool a run does not have but
knows how to turn on; and ToolRegistry, one run's tools by name, which selects a tool for a
question (or names the off tool it would have selected), calls it with checked arguments and
remembers the tools whose argument finder failed (the loop moves those failures into the trace).
call_tool (steps/_act.py) turns a tool's result into evidence."""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from ..core import ConfigurationError, Evidence, ToolError
from ..text import has_cjk


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call. `parameters` validates the arguments (or `schema`, a JSON schema as
    an MCP server gives one); `arguments(question, evidence)` finds them offline (None: the tool does
    not apply yet); `patterns` are regexes a question must match first. `kind` names what its
    citations are (tool, database, web, mcp...). A `model_routed` tool is one only a model can
    place: the router does not settle a plain question by rule while it is registered."""

    name: str
    description: str
    fn: Callable[..., Any]
    patterns: tuple[str, ...] = ()
    arguments: Callable[[str, list[Evidence]], dict | None] = field(default=lambda question, evidence: {})
    parameters: type[BaseModel] | None = None
    kind: str = "tool"
    schema: Mapping[str, Any] | None = None
    model_routed: bool = False  # no offline cue (an MCP server's tool given no patterns): while it is
                                # registered, the router asks the model about every question

    def matches(self, question: str) -> bool:
        """Whether any of the tool's patterns occurs in the question."""
        return any(re.search(p, question, re.I) for p in self.patterns)

    @property
    def argument_schema(self) -> Mapping[str, Any] | None:
        """Its arguments' JSON schema, from `parameters` or `schema` (None: it takes any)."""
        return self.parameters.model_json_schema() if self.parameters else self.schema


@dataclass(frozen=True)
class OffTool:
    """A tool this run does not have (its database was not given, say), as the router would still
    pick it: the name, question patterns and argument finder the real tool has. A question that
    wants it is answered without it, and the answer says so in one line, `notes` by language ("en",
    "zh"; English for a question in any other), e.g. how to turn the tool on."""

    name: str
    notes: Mapping[str, str]
    patterns: tuple[str, ...] = ()
    arguments: Callable[[str, list[Evidence]], dict | None] = field(default=lambda question, evidence: {})

    def matches(self, question: str) -> bool:
        """Whether any of the tool's patterns occurs in the question."""
        return any(re.search(p, question, re.I) for p in self.patterns)

    def note(self, question: str) -> str:
        """The line an answer to `question` adds, in the question's language."""
        return self.notes.get("zh", self.notes["en"]) if has_cjk(question) else self.notes["en"]


def unavailable_note(name: str, question: str) -> str:
    """The line an answer adds when the router wanted a tool this run has not got and knows nothing of."""
    if has_cjk(question):
        return f"（本次运行没有 {name} 工具）"
    return f"(no tool named {name!r} is available in this run)"


def tool_from_function(fn: Callable[..., Any], patterns: tuple[str, ...] = (),
                       arguments: Callable[[str, list[Evidence]], dict | None] | None = None, name: str | None = None,
                       kind: str = "tool") -> Tool:
    """A Tool from a plain function: its signature becomes the argument schema, the first line of
    its docstring the description."""
    fields: dict[str, Any] = {}  # name -> (annotation, default), as create_model takes them
    for param in inspect.signature(fn).parameters.values():
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        fields[param.name] = (annotation, ... if param.default is inspect.Parameter.empty else param.default)
    doc = (inspect.getdoc(fn) or fn.__name__).splitlines()[0]
    schema = create_model(f"{fn.__name__}_arguments", **fields)
    return Tool(name or fn.__name__, doc, fn, tuple(patterns), arguments or (lambda question, evidence: None),
                schema, kind)


class ToolRegistry:
    """The tools of one run, by name; `register` adds more."""

    def __init__(self, tools: Iterable[Tool | OffTool] = ()):
        self.tools: dict[str, Tool] = {}
        self.off: dict[str, OffTool] = {}  # tools this run has not got, which the router may still want
        self.failed: dict[str, str] = {}  # tools whose argument finder raised: name -> why; never selected again
        self._unreported: list[tuple[str, str]] = []
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool | OffTool) -> None:
        """Add a tool (or an OffTool); a duplicate name, a non-Tool or a pattern that is not a regex is an error."""
        if not isinstance(tool, (Tool, OffTool)):
            raise ConfigurationError(f"{tool!r} is not a Tool; wrap a function with agentic_rag.tool_from_function")
        if tool.name in self.tools or tool.name in self.off:
            raise ConfigurationError(f"two tools are named {tool.name!r}; give each tool its own name")
        for pattern in tool.patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ConfigurationError(f"tool {tool.name!r} has a bad pattern {pattern!r}: {exc}") from None
        if isinstance(tool, OffTool):
            self.off[tool.name] = tool
        else:
            self.tools[tool.name] = tool

    def describe(self) -> list[str]:
        """One line per tool, with its argument schema, for prompts."""
        return [f"{t.name}: {t.description}" + (f" arguments: {schema.get('properties', {})}"
                                                if (schema := t.argument_schema) else "") for t in self.tools.values()]

    def select(self, question: str, evidence: list[Evidence], used: tuple[str, ...] = ()) -> tuple[Tool, dict] | None:
        """The first unused tool whose patterns match and whose arguments can be found, with them."""
        for tool in self.tools.values():
            if tool.name not in used and tool.name not in self.failed and tool.matches(question):
                try:
                    arguments = tool.arguments(question, evidence)
                except Exception as exc:  # the tool's own code failed: a tool failure, not the run's
                    self._fail(tool.name, f"{tool.name} could not find its arguments: {exc.__class__.__name__}: {exc}")
                    continue
                if arguments is not None and not isinstance(arguments, dict):
                    self._fail(tool.name, f"{tool.name}'s argument finder returned {type(arguments).__name__}, "
                                          f"not a dict or None")
                elif arguments is not None:
                    return tool, arguments
        return None

    def wanted_off(self, question: str, evidence: list[Evidence], used: tuple[str, ...] = ()) -> OffTool | None:
        """The first off tool that `select` would have picked were it on (its patterns match and its
        arguments can be found), or None. An argument finder that fails finds nothing."""
        for tool in self.off.values():
            if tool.name not in used and tool.matches(question):
                try:
                    if isinstance(tool.arguments(question, evidence), dict):
                        return tool
                except Exception:  # an off tool is never called: a finder that fails only finds nothing
                    continue
        return None

    def off_note(self, name: str, question: str) -> str:
        """The line an answer to `question` adds because the router wanted `name`, a tool this run has not got."""
        return self.off[name].note(question) if name in self.off else unavailable_note(name, question)

    def _fail(self, name: str, why: str) -> None:
        self.failed[name] = why
        self._unreported.append((name, why))

    def take_failures(self) -> list[tuple[str, str]]:
        """The (tool, why) failures of argument finders since the last call, for the trace."""
        taken, self._unreported = self._unreported, []
        return taken

    def call(self, name: str, arguments: dict) -> Any:
        """Run a tool; unknown names, invalid arguments and failures raise ToolError with the reason."""
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; known tools: {', '.join(self.tools) or '(none)'}")
        if not isinstance(arguments, dict):
            raise ToolError(f"arguments for {name} must be an object, not {type(arguments).__name__}")
        if tool.parameters is not None:
            try:
                arguments = tool.parameters.model_validate(arguments).model_dump()
            except ValidationError as exc:
                raise ToolError(f"bad arguments for {name}: {str(exc).splitlines()[1:3]}") from None
        elif tool.schema is not None:
            _check_schema(name, tool.schema, arguments)
        try:  # arguments that do not fit the signature are the caller's fault; a TypeError inside is the tool's
            inspect.signature(tool.fn).bind(**arguments)
        except TypeError as exc:
            raise ToolError(f"bad arguments for {name}: {exc}") from None
        except ValueError:  # a callable without a signature (some builtins): let the call decide
            pass
        try:
            return tool.fn(**arguments)
        except ToolError:
            raise
        except Exception as exc:  # a tool's own failure is recorded, never raised into the loop
            raise ToolError(f"{name} failed: {exc.__class__.__name__}: {exc}") from None


def _check_schema(name: str, schema: Mapping[str, Any], arguments: dict) -> None:
    """Arguments checked against a JSON schema (jsonschema, which the mcp extra brings; without it the
    tool's server checks them): a ToolError naming the first problem."""
    try:
        import jsonschema
    except ImportError:
        return
    try:
        jsonschema.validate(arguments, dict(schema))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "arguments"
        raise ToolError(f"bad arguments for {name}: {where}: {exc.message[:200]}") from None
    except jsonschema.SchemaError as exc:
        raise ToolError(f"{name}'s schema is not a JSON schema: {exc.message[:200]}") from None
    except Exception as exc:  # a schema that cannot be used (a $ref that resolves nowhere): the tool's fault
        raise ToolError(f"{name}'s schema cannot be checked: {type(exc).__name__}: {str(exc)[:200]}") from None
