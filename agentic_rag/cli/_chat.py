"""`agentic-rag chat`: a conversation with a knowledge base, one line a turn, each asked through a
Conversation with the turns before it; the prompt's own commands (/sources, /reset, /help, /exit)
and the file --save keeps the conversation in."""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..core import AgenticRAGError, write_text_atomic
from ..kb import os_cause
from ..loop import Conversation
from ._display import _isatty, line_ended, print_passages, print_result

HELP = """Each line is a question; a follow-up ("and in 2.4?", "what does it cost?") is read with the turns
before it, and the question it was read as is shown first.
  /sources  the passages the last answer cited
  /reset    start a new conversation (the turns before are forgotten)
  /help     this text
  /exit     end (so do Ctrl-D and Ctrl-C at the prompt)"""
PROMPT = "> "


def chat(conversation: Conversation, *, trace: bool, stream: bool, save: str | None) -> int:
    """Read questions from stdin until its end or /exit, answering each as `ask` prints an answer;
    returns the exit code (0). On a terminal the prompt is "> " (with line editing); from a pipe each
    line read is echoed as "> line" so that the output reads as the conversation. A turn that fails
    prints its one-line error and the conversation goes on; Ctrl-C during a turn drops that turn on
    a terminal, and from a pipe stops the command as it stops `ask`."""
    terminal = _isatty(sys.stdin)
    if terminal:
        try:
            import readline  # noqa: F401  (input() then edits the line and recalls earlier ones)
        except ImportError:  # not on every platform: the prompt works without it
            pass
    try:
        _converse(conversation, terminal, trace, stream, save)
    except KeyboardInterrupt:  # at the prompt (or between turns): the conversation ends, as at the input's end
        pass
    except _TurnInterrupted:  # from a pipe there is nobody to return to: stopped as `ask` is
        raise KeyboardInterrupt from None  # (main: "interrupted", exit code 130)
    if terminal:
        print()  # the shell's prompt on a line of its own
    return 0


class _TurnInterrupted(Exception):
    """Ctrl-C while a turn read from a pipe ran."""


def _converse(conversation: Conversation, terminal: bool, trace: bool, stream: bool, save: str | None) -> None:
    """The turns, until the input ends or /exit."""
    while True:
        line = _read_line(terminal)
        if line is None:
            return
        line = line.strip()
        if not line:
            continue
        if not terminal:
            print(f"{PROMPT}{line}", flush=True)
        if line.startswith("/"):
            if _command(line, conversation, save):
                return
            continue
        try:
            state = conversation.ask(line, on_step=_read_as, **({"on_token": _print_piece} if stream else {}))
        except KeyboardInterrupt:
            if not terminal:
                raise _TurnInterrupted from None
            _say("the turn is dropped (the conversation is as it was before it)", "interrupted: ")
            continue
        except (AgenticRAGError, OSError) as exc:
            _say(str(exc))
            continue
        if state["stop_reason"] == "error":  # no answer to show: the one line (and with --trace, how it went)
            if trace:
                print_result(state, trace, streamed=stream, summary=trace)
            _say(f"the turn failed: {state['error']}")
        else:
            print_result(state, trace, streamed=stream, summary=trace)
        _save(conversation, save)
        print(flush=True)  # a blank line between turns


def _read_line(terminal: bool) -> str | None:
    """The next line, or None at the end of the input (Ctrl-D on a terminal)."""
    if terminal:
        try:
            line = input(PROMPT)
        except EOFError:
            return None
        line_ended(sys.stdout)  # the Enter the terminal echoed ended the prompt's line
        return line
    line = sys.stdin.readline()
    return line if line else None


def _command(line: str, conversation: Conversation, save: str | None) -> bool:
    """Run a prompt command; True when the conversation is to end."""
    command = line.split()[0].lower()
    if command in ("/exit", "/quit"):
        return True
    if command == "/help":
        print(HELP)
    elif command == "/reset":
        conversation.reset()
        _save(conversation, save)
        print("(a new conversation: the turns before are forgotten)")
    elif command == "/sources":
        last = next((m for m in reversed(conversation.history) if m["role"] == "assistant"), None)
        if last is None:
            print("(no answer yet in this conversation)")
        elif not last.get("evidence"):
            print("(the last answer cited no passage)")
        else:
            print_passages(last["evidence"])
    else:
        _say(f"{command} is not a chat command; /help lists them")
    print(flush=True)
    return False


def _save(conversation: Conversation, save: str | None) -> None:
    """Write the conversation to `save` whole: to a new file beside it, then renamed over it, so that
    the file always holds a whole conversation (the last saved) whatever stops the command. A write
    that fails says so in one line; the conversation goes on."""
    if not save:
        return
    try:
        write_text_atomic(save, conversation.to_json())
    except OSError as exc:
        _say(f"cannot save the conversation to {save}: {os_cause(exc)}; it goes on unsaved (give another --save)")


def _read_as(event: Mapping[str, Any], state: Mapping[str, Any]) -> None:
    """on_step: as soon as a follow-up is condensed, the question it was read as (before the answer)."""
    if event["summary"] == "condense":
        print(f"(read as: {state['standalone']})", flush=True)


def _print_piece(piece: str) -> None:
    print(piece, end="", flush=True)


def _say(message: str, kind: str = "error: ") -> None:
    """One line on stderr (a failed turn, a dropped one), after any line a streamed draft left open."""
    if getattr(sys.stdout, "open", False):
        print(flush=True)
    print(f"agentic-rag: {kind}{message}", file=sys.stderr, flush=True)

