"""A run drawn for people: a finished state as one self-contained HTML fragment (inline style, no
script, no asset fetched from anywhere), read top to bottom: the question, the answer with each [n]
linked to its passage (the sentence it was cited for marked, the file and page named), why the run
stopped, each round (route, queries, what was found and graded), the passages by their rank in each
retriever, and a timeline of the steps with their milliseconds, tokens and cost. Every text from
the run (documents are hostile input) is escaped. show(state) gives it to a notebook."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from html import escape
from typing import Any

from ..core import cited_as
from ..text import sentences, tokenize

# why a run stopped, in words a person reads (the stop reasons of STOP_REASONS)
STOPPED_BECAUSE = {
    "sufficient": "the evidence was graded sufficient to answer",
    "direct": "the question needed no fact from the knowledge base, which was not consulted",
    "max_rounds": "it ran the most retrieval rounds its settings allow",
    "token_budget": "it spent its token budget",
    "low_confidence": "two rounds in a row were graded below the confidence floor",
    "converged": "a round found nothing new, or the same passages as the round before",
    "deadline": "it reached its deadline",
    "exhausted": "no query or strategy was left to try",
    "unmentioned": "the question names something no document of the knowledge base mentions",
    "stopped": "a hook (or a client that went away) stopped it",
    "error": "a model or tool failed past its retries",
}
_STYLE = ("font-family:system-ui,sans-serif;font-size:14px;line-height:1.45;max-width:60em;"
          "border:1px solid #ddd;border-radius:6px;padding:12px")


class RunView:
    """A state shown as HTML in a notebook (`_repr_html_`) and as its trace line in plain text."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.state = state

    def _repr_html_(self) -> str:
        return render_html(self.state)

    def __repr__(self) -> str:
        return f"RunView({self.state.get('stop_reason')}: {' -> '.join(e['summary'] for e in self.state['trace'])})"


def show(state: Mapping[str, Any]) -> RunView:
    """The run drawn: a notebook shows it as HTML (render_html)."""
    return RunView(state)


def render_html(state: Mapping[str, Any]) -> str:
    """The run as one HTML fragment: self-contained, readable without script, every text escaped."""
    prefix = "run-" + hashlib.sha256(repr((state["question"], len(state["trace"]))).encode()).hexdigest()[:8]
    parts = [f'<div class="agentic-rag-run" style="{_STYLE}">', _head(state, prefix), _stop(state),
             _rounds(state), _citations(state, prefix), _passages(state), _timeline(state), "</div>"]
    return "\n".join(part for part in parts if part)


def _head(state: Mapping[str, Any], prefix: str) -> str:
    asked = f"<p><b>Question</b> {escape(state['question'])}</p>"
    if state.get("standalone") and state["standalone"] != state["question"]:
        asked += f"<p><b>Standing alone</b> {escape(state['standalone'])}</p>"
    answer = re.sub(r"\[(\d+)\]", lambda m: f'<a href="#{prefix}-c{m.group(1)}">[{m.group(1)}]</a>',
                    escape(state.get("answer") or ""))
    kind = "refused" if state.get("abstained") else "answer"
    return f'{asked}<p><b>{kind.capitalize()}</b></p><p style="white-space:pre-wrap">{answer}</p>'


def _stop(state: Mapping[str, Any]) -> str:
    reason = state.get("stop_reason") or "none"
    why = STOPPED_BECAUSE.get(reason, "")
    grade, faithful = state.get("grade") or {}, state.get("faithfulness") or {}
    figures = [f"evidence score {grade['score']:.2f}" if "score" in grade else "",
               f"faithfulness {faithful['score']:.2f}" if "score" in faithful else "",
               f"error: {state['error']}" if state.get("error") else ""]
    shown = "; ".join(f for f in figures if f)
    return (f"<p><b>Stopped</b> <code>{escape(reason)}</code>: {escape(why)}"
            f"{'. ' + escape(shown) if shown else ''}.</p>")


def _rounds(state: Mapping[str, Any]) -> str:
    rows = []
    for entry in state.get("rounds", []):
        route = entry["route"] + (f" ({entry['source']})" if entry.get("source") else "") + \
            (f" {entry['tool']}" if entry.get("tool") else "")
        notes = [note for note in ("converged", "exhausted", "stalled", "incomplete_answer") if entry.get(note)]
        notes += [f"error: {entry['error']}"] if entry.get("error") else []
        grade = f"{entry['grade']:.2f}" if isinstance(entry.get("grade"), (int, float)) else ""
        rows.append(_row([str(entry["round"]), route, "; ".join(entry.get("queries", [])),
                          str(entry.get("new", "")), grade, ", ".join(notes)]))
    missing = ", ".join((state.get("grade") or {}).get("missing") or state.get("missing") or [])
    table = _table(["round", "route", "queries", "new passages", "grade", "notes"], rows) if rows else ""
    return f"<h4>Rounds</h4>{table or '<p>none</p>'}" + (f"<p>Missing at the end: {escape(missing)}</p>"
                                                          if missing else "")


def _citations(state: Mapping[str, Any], prefix: str) -> str:
    items = []
    for citation in state.get("citations", []):
        n = citation["n"]
        said = " ".join(s for s in sentences(state.get("answer") or "") if f"[{n}]" in s)
        items.append(f'<li id="{prefix}-c{n}"><b>[{n}]</b> {escape(citation.get("title") or citation["doc_id"])} '
                     f"<small>({escape(cited_as(citation))})</small>"
                     f'<blockquote style="margin:4px 0 8px 1em">{_marked(citation["text"], said)}</blockquote></li>')
    return f"<h4>Citations</h4><ol style='list-style:none;padding:0'>{''.join(items)}</ol>" if items else ""


def _marked(text: str, said: str) -> str:
    """The passage escaped, the sentence of it that shares most words with what the answer said marked."""
    wanted = set(tokenize(re.sub(r"\[\d+\]", " ", said)))
    pieces = sentences(text) or [text]
    best = max(pieces, key=lambda piece: len(wanted & set(tokenize(piece)))) if wanted else ""
    if not best or not wanted & set(tokenize(best)) or best not in text:
        return escape(text)
    start = text.index(best)
    return escape(text[:start]) + f"<mark>{escape(best)}</mark>" + escape(text[start + len(best):])


def _passages(state: Mapping[str, Any]) -> str:
    rows = [_row([e["id"], ", ".join(f"{name} #{rank}" for name, rank in sorted(e.get("ranks", {}).items())),
                  e.get("query") or "", f"{e['relevance']:.2f}" if isinstance(e.get("relevance"), float) else ""])
            for e in state.get("evidence", [])[:20]]
    return f"<h4>Passages found</h4>{_table(['passage', 'rank in each retriever', 'query', 'relevance'], rows)}" \
        if rows else ""


def _timeline(state: Mapping[str, Any]) -> str:
    events = state.get("trace", [])
    longest = max([e.get("ms") or 0.0 for e in events] + [1e-9])
    rows = [_row([e.get("step", ""), e["summary"], f"{e.get('ms') or 0:.1f}", str(e.get("tokens") or 0),
                  f"{e.get('cost_usd') or 0:.5f}"],
                 bar=100 * (e.get("ms") or 0) / longest) for e in events]
    usage = state.get("usage") or {}
    total = (f"<p>{usage.get('model_calls', 0)} model calls, {usage.get('prompt_tokens', 0)} prompt and "
             f"{usage.get('completion_tokens', 0)} completion tokens, ${usage.get('cost_usd', 0):.5f}; "
             f"{(state.get('timings_ms') or {}).get('total', 0):.0f} ms in all</p>")
    return f"<h4>Timeline</h4>{_table(['step', 'trace', 'ms', 'tokens', 'cost (USD)'], rows)}{total}"


def _table(head: list[str], rows: list[str]) -> str:
    cells = "".join(f'<th style="text-align:left;padding:2px 6px">{escape(h)}</th>' for h in head)
    return f'<table style="border-collapse:collapse"><tr>{cells}</tr>{"".join(rows)}</table>'


def _row(cells: list[str], bar: float | None = None) -> str:
    """One table row of texts (escaped here); `bar`, a share in percent, draws behind the first cell."""
    style = "padding:2px 6px;border-top:1px solid #eee;vertical-align:top"
    first = style + (f";background:linear-gradient(90deg,#cde 0 {bar:.0f}%,transparent {bar:.0f}%)"
                     if bar is not None else "")
    return "<tr>" + "".join(f'<td style="{first if i == 0 else style}">{escape(c)}</td>'
                            for i, c in enumerate(cells)) + "</tr>"
