"""What the command line shows: the printed answer with its sources, an
OS error in one line, and its output streams, which remember whether a line is left open (a
progress line, a streamed draft) so that a closing message starts on a line of its own."""
from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from ..core import cited_as, source_line
from ..kb import os_cause
from ..loop import answer_notes, format_trace


def counted(n: int, noun: str) -> str:
    """'1 document', '2 documents', '0 chunks'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


_MARKER = re.compile(r"\s?\[\d+\]")


def _after_stream(answer: str, draft: str, notes: list[str]) -> str:
    """What follows a streamed draft: the lines added after it (`notes`, such as a tool that is off)
    when it stands as written; else the answer under a header that says what changed: only the
    numbers of its sources (the answer numbers them 1..k in the order it cites them; the model cited
    the evidence by its position), or the checks."""
    added = "".join(f"\n{note}" for note in notes)
    body = answer[:-len(added)] if added and answer.endswith(added) else answer
    if body == draft:
        return added
    if _MARKER.sub("", body) == _MARKER.sub("", draft):
        return f"\n\n--- the answer with its sources numbered as listed below ---\n{answer}"
    return f"\n\n--- checked answer (the checks changed the draft above) ---\n{answer}"


def print_result(state: Mapping[str, Any], trace: bool, streamed: bool, summary: bool = True) -> None:
    """The answer (after a streamed draft, what changed it: see _after_stream), its sources, then
    (with `summary`, as ask prints it; chat only with --trace) the trace line, the stop reason,
    usage and time."""
    if not streamed:
        print(state["answer"])
    else:
        print(_after_stream(state["answer"], state["draft_answer"], answer_notes(state)) if state["draft_answer"]
              else state["answer"])
    if state["citations"]:
        print("\nSources:")
        for c in state["citations"]:
            kind = c.get("media") or c.get("kind", "passage")
            print(f"  [{c['n']}] ({kind}) {source_line(c)}")
    if not summary:
        return
    print(f"\nTrace: {format_trace(state)}")
    for event in state["trace"] if trace else []:
        print(f"  round {event['round']} {event['summary']}: {event['ms']:.1f} ms, {event['tokens']} tokens, "
              f"{json.dumps(event['detail'], ensure_ascii=False)[:300]}")
    usage = state["usage"]
    print(f"Stop: {state['stop_reason']} after {state['round']} round(s); {usage['model_calls']} model calls, "
          f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, "
          f"${usage['cost_usd']:.4f}; {state['timings_ms']['total']:.0f} ms")


PASSAGE_CHARS = 200  # how much of a cited passage chat's /sources shows


def print_passages(passages: list[Mapping[str, Any]]) -> None:
    """chat's /sources: each passage the last answer cited, numbered as the answer cites it, with its
    id, where it is and its first PASSAGE_CHARS characters on one line."""
    for n, passage in enumerate(passages, 1):
        text = " ".join(passage.get("text", "").split())
        print(f"  [{n}] {passage['id']} ({cited_as(passage)})\n"
              f"      {text[:PASSAGE_CHARS]}{'...' if len(text) > PASSAGE_CHARS else ''}")


PROGRESS_EVERY_S = 10.0  # how often a redrawn progress line is written as a line of its own to a file or pipe


class LineTracker:
    """A text stream that remembers whether its last write left a line open (a progress line drawn
    with "\\r" and no newline, a draft streamed piece by piece). Where the stream is no terminal a
    "\\r" redraw would pile up on one line: the progress is written as whole lines instead, one
    every PROGRESS_EVERY_S and the last one when its line ends."""

    def __init__(self, stream: TextIO, progress: bool = False) -> None:
        self.stream, self.open = stream, False
        self.whole_lines = progress and not _isatty(stream)  # progress is drawn on stderr; stdout is left as written
        self.pending: str | None = None  # the newest progress not written yet (no terminal)
        self.written_at, self.ended = -math.inf, False  # ended: a progress line was written whole, its "\\n" is due

    def write(self, text: str) -> int:
        """Write to the stream, noting whether the text ends its line."""
        if not text:  # print(..., end="") writes its end apart: nothing to note or to write
            return 0
        if self.whole_lines and text.startswith("\r") and "\n" not in text:
            self.pending, self.open = text[1:].rstrip(), True
            if time.monotonic() - self.written_at >= PROGRESS_EVERY_S:
                self._write_pending(self.pending)
            return len(text)
        if self.pending is not None:
            self._write_pending(self.pending)
        if self.ended:  # a "\n" first is the progress line's own end, written already
            self.ended, text = False, text[1:] if text.startswith("\n") else text
        if text:
            self.open = not text.endswith("\n")
        return self.stream.write(text) if text else 0

    def _write_pending(self, pending: str) -> None:
        self.stream.write(pending + "\n")
        self.pending, self.ended, self.open, self.written_at = None, True, False, time.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def line_ended(stream: object) -> None:
    """Note that the line a LineTracker's last write left open was ended by someone else (the Enter
    a terminal echoed after a prompt)."""
    if isinstance(stream, LineTracker):
        stream.open = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or no file at all
        return False


def _same_terminal() -> bool:
    """Whether stdout and stderr are one terminal: one newline then ends an open line on both."""
    try:
        return os.isatty(1) and os.isatty(2) and os.path.samestat(os.fstat(1), os.fstat(2))
    except OSError:
        return False


def discard(stream: TextIO | LineTracker) -> None:
    """Point a stream whose reader has gone at /dev/null, so that Python's last flush at exit
    finds no broken pipe either."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's capture): nothing to flush
        pass


@contextmanager
def tracked_lines() -> Iterator[Callable[[], None]]:
    """sys.stdout and sys.stderr as LineTrackers while the block runs; it gets a function that ends
    every line left open, to call before a message that must start on a line of its own (a stream
    whose reader has gone is passed over: the message still comes)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = tracked = LineTracker(out), LineTracker(err, progress=True)

    def end_open_lines() -> None:
        ended = False
        for stream in tracked:
            if stream.open and not (ended and _same_terminal()):
                try:
                    stream.write("\n")
                    stream.flush()
                    ended = True
                except OSError:  # BrokenPipeError too: `| head` has gone, nothing to end there
                    stream.open = False
                    discard(stream)

    try:
        yield end_open_lines
    finally:
        sys.stdout, sys.stderr = out, err


_OS_FIXES: dict[int | None, str] = {  # looked up by an OSError's errno, which may be None
    errno.ENOSPC: "free space on its disk", errno.EDQUOT: "free space within the disk quota",
    errno.EFBIG: "raise the file size limit (ulimit -f)", errno.EROFS: "remount it read-write",
    errno.EACCES: "fix its permissions", errno.EPERM: "fix its permissions",
    errno.ENOENT: "check the path", errno.ENOTDIR: "check the path",
    errno.ECONNREFUSED: "start the server it names or fix the address"}


def os_error_line(exc: OSError) -> str:
    """What failed, in one line, and the fix where its errno says it; only what failed otherwise."""
    where = f" ({exc.filename})" if exc.filename else ""
    fix = _OS_FIXES.get(exc.errno)
    return f"{os_cause(exc)}{where}" + (f"; {fix}, then retry" if fix else "")
