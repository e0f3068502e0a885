"""The reply of a finished run: the JSON object that POST /v1/ask returns and `ask --json` prints."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..loop import format_trace

# the fields of a citation a reply shows (the evidence's other fields are the run's own)
CITATION_FIELDS = ("n", "id", "doc_id", "source", "title", "text", "kind", "page", "page_label", "section", "media")


def result_json(state: Mapping[str, Any], model_name: str) -> dict:
    """The `ask --json` object: the answer, its citations, why it stopped, the trace, usage and timings."""
    return {"question": state["question"], "standalone": state["standalone"], "answer": state["answer"],
            "abstained": state["abstained"], "abstain_reason": state["abstain_reason"],
            "citations": [{k: c.get(k) for k in CITATION_FIELDS} for c in state["citations"]],
            "stop_reason": state["stop_reason"], "rounds": state["round"], "trace_line": format_trace(state),
            "trace": state["trace"], "usage": state["usage"], "timings_ms": state["timings_ms"],
            "model": model_name, "error": state["error"]}
