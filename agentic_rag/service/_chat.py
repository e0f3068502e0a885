"""The chat endpoint's request read as a conversation: a chat client's `messages` checked one by one
(a bad one is a one-line 400 naming it) and split into the question (the last user message), the
history before it (user and assistant turns) and the instructions (system and developer messages);
and what a chat reply adds to `ask --json`'s object."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core import ConfigurationError

HISTORY_ROLES = ("user", "assistant")
INSTRUCTION_ROLES = ("system", "developer")  # "developer" is what newer OpenAI clients call the system message
_PARTS = "text, or a list of {\"type\": \"text\", \"text\": ...} parts"


@dataclass(frozen=True)
class Asked:
    """A chat request's conversation: the question, the turns before it, the instructions."""

    question: str
    history: list[dict]
    instructions: str


def read_messages(messages: object, max_messages: int, max_instruction_chars: int) -> Asked:
    """The messages as a question, its history and instructions; ConfigurationError (a 400) for a
    list that is not one: empty or past `max_messages`, a role other than user, assistant, system or
    developer (a tool's result: the agent calls its own tools), content that is not text, or no
    user question last."""
    if not isinstance(messages, list) or not messages:
        raise ConfigurationError("messages must be a non-empty list of {\"role\", \"content\"} objects")
    if len(messages) > max_messages:
        raise ConfigurationError(f"{len(messages):,} messages; the limit is {max_messages}: send the latest turns "
                                 f"(a run keeps at most 8 of them) or continue a conversation by its conversation_id")
    turns: list[dict] = []
    instructions: list[str] = []
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, Mapping):
            raise ConfigurationError(f"{where} is {_kind(message)}, not a {{\"role\", \"content\"}} object")
        role = message.get("role")
        if role in ("tool", "function"):
            raise ConfigurationError(f"{where} has role {role!r}: this model calls its own tools and takes no tool "
                                     f"results; send user, assistant and system messages only")
        if role not in HISTORY_ROLES + INSTRUCTION_ROLES:
            raise ConfigurationError(f"{where} has role {_shown(role)}; use 'user', 'assistant', 'system' or "
                                     f"'developer'")
        text = _text(message.get("content"), where, role)
        if role in INSTRUCTION_ROLES:
            if text.strip():
                instructions.append(text.strip())
        else:
            turns.append({"role": role, "content": text})
    if not turns or turns[-1]["role"] != "user":
        raise ConfigurationError("the last user or assistant message must be the user's question; "
                                 "end messages with a user message")
    joined = "\n\n".join(instructions)
    if len(joined) > max_instruction_chars:
        raise ConfigurationError(f"the system messages hold {len(joined):,} characters; the limit is "
                                 f"{max_instruction_chars:,}")
    return Asked(turns[-1]["content"], turns[:-1], joined)


def _text(content: object, where: str, role: str) -> str:
    """A message's content as text: a string, or the text of its text parts (other parts, such as an
    image, are not read); an assistant's may be null (a turn that only called tools)."""
    if content is None and role == "assistant":
        return ""
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise ConfigurationError(f"{where}.content[{i}] is not a {{\"type\": ...}} part; send {_PARTS}")
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise ConfigurationError(f"{where}.content[{i}] is a text part without text; send {_PARTS}")
                texts.append(part["text"])
        content = " ".join(texts)
    if not isinstance(content, str):
        raise ConfigurationError(f"{where}.content is {_kind(content)}; send {_PARTS}")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"{where}.content holds text that is not valid Unicode (a lone surrogate)") from None
    return content


def _kind(value: object) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", dict: "an object",
             list: "a list", str: "text"}
    return names.get(type(value), type(value).__name__)


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else _kind(value)
    return text if len(text) <= 40 else text[:37] + "..."


def answer_reason(reply: Mapping) -> str | None:
    """What the model said of its last answer (the last generate step's reason), e.g. that the
    offline model did not follow the instructions; None when no answer was generated."""
    steps = [e for e in reply.get("trace", []) if e.get("step") == "generate"]
    reason = steps[-1].get("detail", {}).get("reason") if steps else None
    return reason if isinstance(reason, str) else None
