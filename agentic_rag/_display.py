"""How a finished run is shown: the `ask --json` object and the printed answer with its sources."""
from __future__ import annotations

import json

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
