"""The `agentic-rag` command: index, search, ask, chat, serve and the rest (see build_parser)."""
from ._main import build_parser, main

__all__ = ["build_parser", "main"]
