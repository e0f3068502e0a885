"""A conversation's history as a run takes it: the earlier user and assistant turns as OpenAI-style
messages, or the states of earlier runs, checked and bounded, each assistant turn with the passages
it cited when its state gave them (what the next turn carries forward)."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import ConfigurationError, count_tokens
from ..text import NUMBER, entities

MAX_TURNS = 8             # user questions kept, the latest; older turns are dropped and the trace says so
MAX_TOKENS = 2000         # tokens of history kept (the messages' text); older turns are dropped past it
MAX_MESSAGE_CHARS = 4000  # one message's text is cut to this many characters
# the service's own block under an answer ("\n\nSources:\n[1] title (source)"): not the user's words
_SOURCES = re.compile(r"\n+Sources:\n(?:\[\d+\] [^\n]*(?:\n|$))+\s*$")
_MARKERS = re.compile(r"\s?\[\d+\]")
_CARRIED_KEYS = ("id", "doc_id", "source", "title", "text", "kind", "page", "page_label", "section", "media")
_FIX = "pass a list of {'role': 'user' | 'assistant', 'content': str} messages, or states run_agentic_rag returned"


def history_messages(history: object) -> tuple[list[dict], int]:
    """(messages, dropped): `history` as {"role", "content"} messages, oldest first, an assistant
    turn from a state also holding "evidence" (the passages its answer cited); at most MAX_TURNS
    user turns and MAX_TOKENS tokens, the oldest dropped first (`dropped` counts the messages).
    Anything else in it is a ConfigurationError that names the item and what to pass."""
    if history is None:
        return [], 0
    if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Sequence):
        raise ConfigurationError(f"history is a {type(history).__name__}, not a list; {_FIX}")
    messages: list[dict] = []
    for n, item in enumerate(history, 1):
        messages += _as_messages(item, n)
    kept = _bounded(messages)
    return kept, len(messages) - len(kept)


def _as_messages(item: object, n: int) -> list[dict]:
    if not isinstance(item, Mapping):
        raise ConfigurationError(f"history item {n} is a {type(item).__name__}, not a message; {_FIX}")
    if "question" in item and "answer" in item and "role" not in item:  # a state of an earlier run
        if not isinstance(item["question"], str) or not isinstance(item["answer"], str):
            raise ConfigurationError(f"history item {n} is not a state: its question and answer must be text; {_FIX}")
        cited = _passages(item.get("citations"))
        answer = "" if item.get("abstained") else item["answer"]
        asked: str = item["standalone"] if isinstance(item.get("standalone"), str) else item["question"]
        return [{"role": "user", "content": _cut(asked)},  # what it meant: a follow-up as condensed
                {"role": "assistant", "content": _cut(answer), "evidence": cited}]
    role, content = item.get("role"), item.get("content")
    if role not in ("user", "assistant"):
        raise ConfigurationError(f"history item {n} has role {role!r}; a history holds user and assistant "
                                 f"turns (give instructions apart); {_FIX}")
    if content is None and role == "assistant":
        content = ""  # a turn not filled in
    if isinstance(content, list):  # OpenAI content parts: their text
        content = " ".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    if not isinstance(content, str):
        raise ConfigurationError(f"history item {n}'s content is a {type(content).__name__}, not text; {_FIX}")
    message: dict[str, Any] = {"role": role, "content": _cut(_SOURCES.sub("", content) if role == "assistant"
                                                            else content)}
    if role == "assistant" and item.get("evidence") is not None:
        message["evidence"] = _passages(item["evidence"])
    return [message]


def _passages(items: object) -> list[dict]:
    """The passages an assistant turn cited, as evidence: each with an id and a text (others are left
    out), its document and source the id's document when not given."""
    out = []
    for e in items if isinstance(items, list) else []:
        if isinstance(e, Mapping) and isinstance(e.get("id"), str) and isinstance(e.get("text"), str):
            doc = e["doc_id"] if isinstance(e.get("doc_id"), str) else e["id"].rsplit("#", 1)[0]
            out.append({"doc_id": doc, "source": doc, "title": "", **{k: e[k] for k in _CARRIED_KEYS if k in e}})
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + " ..."


def _bounded(messages: list[dict]) -> list[dict]:
    """The latest MAX_TURNS user turns (with the replies after them), fewer while past MAX_TOKENS;
    the last turn always stays."""
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"] or [0]
    starts = starts[-MAX_TURNS:]
    for start in starts:
        kept = messages[start:]
        if start == starts[-1] or sum(count_tokens(m["content"]) for m in kept) <= MAX_TOKENS:
            return kept
    return messages


def history_lines(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The history as a prompt shows it: "user: ..." and "assistant: ..." lines, citation markers removed."""
    return [f"{m['role']}: {_MARKERS.sub('', m['content']).strip()}" for m in messages if m["content"].strip()]


def carried_evidence(messages: Sequence[Mapping[str, Any]], standalone: str) -> list[dict]:
    """The passages the previous answer cited (its assistant turn's "evidence"), once each; none
    when the question moved on to another thing (moved_on): they are about the one before."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    asked = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if moved_on(asked, standalone):
        return []
    return list({e["id"]: dict(e) for e in (last or {}).get("evidence", [])}.values())


def moved_on(previous: str, question: str) -> bool:
    """Whether the question puts another value where the previous one had its own: a number or a
    name of the previous question is gone and the question names one of its own ("登录报错的问题在
    2.4 版本里修复了吗？" after "... 2.3.1 ...", "合同 A" after "合同 B")."""
    def values(text: str) -> set[str]:
        return set(NUMBER.findall(text)) | {n.casefold() for n in entities(text)}

    before, now = values(previous), values(question)
    return bool(before - now) and bool(now - before)
