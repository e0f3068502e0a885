"""What the command line shows: the `ask --json` object, the printed answer with its sources, and
its output streams, which remember whether a line is left open (a progress line, a streamed draft)
so that a closing message starts on a line of its own."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager

from ._state import cited_as, format_trace


def result_json(state: dict, model_name: str) -> dict:
    """The `ask --json` object: the answer, its citations, why it stopped, the trace, usage and timings."""
    keep = ("n", "id", "doc_id", "source", "title", "text", "kind", "page", "section", "media")
    return {"question": state["question"], "answer": state["answer"], "abstained": state["abstained"],
            "abstain_reason": state["abstain_reason"],
            "citations": [{k: c.get(k) for k in keep} for c in state["citations"]],
            "stop_reason": state["stop_reason"], "rounds": state["round"], "trace_line": format_trace(state),
            "trace": state["trace"], "usage": state["usage"], "timings_ms": state["timings_ms"],
            "model": model_name, "error": state["error"]}


def print_result(state: dict, trace: bool, streamed: bool) -> None:
    """The answer (after a streamed draft, the checked one only when the checks changed it), its
    sources, the trace line, the stop reason, usage and time."""
    if not streamed:
        print(state["answer"])
    elif state["draft_answer"] and state["answer"] != state["draft_answer"]:
        print(f"\n\n--- checked answer (the checks changed the draft above) ---\n{state['answer']}")
    else:
        print("" if state["draft_answer"] else state["answer"])
    if state["citations"]:
        print("\nSources:")
        for c in state["citations"]:
            kind = c.get("media") or c.get("kind", "passage")
            print(f"  [{c['n']}] ({kind}) {c.get('title') or c['doc_id']} ({cited_as(c)})")
    print(f"\nTrace: {format_trace(state)}")
    for event in state["trace"] if trace else []:
        print(f"  round {event['round']} {event['summary']}: {event['ms']:.1f} ms, {event['tokens']} tokens, "
              f"{json.dumps(event['detail'], ensure_ascii=False)[:300]}")
    usage = state["usage"]
    print(f"Stop: {state['stop_reason']} after {state['round']} round(s); {usage['model_calls']} model calls, "
          f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, "
          f"${usage['cost_usd']:.4f}; {state['timings_ms']['total']:.0f} ms")


class LineTracker:
    """A text stream that remembers whether its last write left a line open (a progress line drawn
    with "\\r" and no newline, a draft streamed piece by piece)."""

    def __init__(self, stream):
        self.stream, self.open = stream, False

    def write(self, text: str) -> int:
        """Write to the stream, noting whether the text ends its line."""
        if text:
            self.open = not text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


@contextmanager
def tracked_lines():
    """sys.stdout and sys.stderr as LineTrackers while the block runs; it gets a function that ends
    every line left open, to call before a message that must start on a line of its own."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = tracked = LineTracker(out), LineTracker(err)

    def end_open_lines() -> None:
        for stream in tracked:
            if stream.open:
                stream.write("\n")
                stream.flush()

    try:
        yield end_open_lines
    finally:
        sys.stdout, sys.stderr = out, err
