"""Metrics over benchmark records, and the reports: metrics.json, report.md, report.svg."""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._answers import answer_correct
from ._metrics import all_relevant_at_k, bootstrap_ci, mrr_at_k, ndcg_at_k, percentile, precision_at_k, recall_at_k

RATES = ("p@3", "r@3", "r@5", "mrr@10", "ndcg@3", "all_relevant@5", "evidence_recall", "answer_accuracy",
         "citation_precision", "source_file", "source_first", "source_page", "abstain_precision",
         "abstain_recall", "false_abstain_rate", "faithfulness")
_MARKER = re.compile(r"\s?\[\d+\]")


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(records: list[dict], questions: list, by_kind: bool = True) -> dict:
    """Every metric of one mode, with 95% bootstrap intervals for the rates. On a set of real files
    (questions with a `source`), source_file is the share of answerable questions whose citations
    include the file holding the answer, source_first the share whose first citation is that file, and
    source_page the share of those with a PDF page whose citations include that physical page; all
    three are None on a corpus.jsonl set."""
    gold = {q.id: q for q in questions}
    per: dict[str, list[float]] = {name: [] for name in RATES}
    for r in records:
        q = gold[r["id"]]
        relevant, ranking = q.relevant_ids, r["ranking"]
        if relevant:
            for name, value in (("p@3", precision_at_k(ranking, relevant, 3)),
                                ("r@3", recall_at_k(ranking, relevant, 3)),
                                ("r@5", recall_at_k(ranking, relevant, 5)),
                                ("mrr@10", mrr_at_k(ranking, relevant, 10)),
                                ("ndcg@3", ndcg_at_k(ranking, relevant, 3)),
                                ("all_relevant@5", all_relevant_at_k(ranking, relevant, 5)),
                                ("evidence_recall", recall_at_k(r["evidence"], relevant, len(r["evidence"]) or 1))):
                per[name].append(value)
            cited = [c for c in r["citations"] if not c.startswith("tool:")]
            if cited:
                per["citation_precision"].append(sum(c in relevant for c in cited) / len(cited))
        if q.answerable and q.source_file:  # a docs/ set: did the answer cite the right file, page
            per["source_file"].append(float(q.source_file in r["citations"]))
            if "first_cited" in r:
                per["source_first"].append(float(r["first_cited"] == q.source_file))
            if q.source_page is not None and "cited_pages" in r:
                per["source_page"].append(float([q.source_file, q.source_page] in r["cited_pages"]))
        if q.answerable:
            per["answer_accuracy"].append(float(not r["abstained"] and answer_correct(r["answer"], q.answers)))
            per["false_abstain_rate"].append(float(r["abstained"]))
        else:
            per["abstain_recall"].append(float(r["abstained"]))
        if r["abstained"]:
            per["abstain_precision"].append(float(not q.answerable))
        if r["faithfulness"] is not None:
            per["faithfulness"].append(r["faithfulness"])
    answered = [len(_MARKER.sub("", r["answer"])) for r in records if not r["abstained"] and gold[r["id"]].answerable]
    out: dict[str, Any] = {"n": len(records)}  # a JSON report
    for name in RATES:
        out[name] = _mean(per[name])
        out[f"{name}_ci"] = bootstrap_ci(per[name]) if per[name] else None
    latencies = [r["ms"] for r in records]
    out.update({
        "answer_chars": _mean(answered), "evidence_pool_size": _mean([r["pool_size"] for r in records]),
        "rounds": _mean([r["rounds"] for r in records]),
        "model_calls": _mean([r["usage"]["model_calls"] for r in records]),
        "prompt_tokens": _mean([r["usage"]["prompt_tokens"] for r in records]),
        "completion_tokens": _mean([r["usage"]["completion_tokens"] for r in records]),
        "cost_usd": _mean([r["usage"]["cost_usd"] for r in records]),
        "latency_ms_p50": percentile(latencies, 50), "latency_ms_p95": percentile(latencies, 95),
        "stop_reasons": dict(Counter(str(r["stop_reason"]) for r in records)),
    })
    if by_kind:
        kinds = sorted({r["kind"] for r in records})
        out["by_kind"] = {k: summarize([r for r in records if r["kind"] == k], questions, False) for k in kinds}
    return out


ROWS = ("n", "p@3", "r@3", "r@5", "mrr@10", "ndcg@3", "all_relevant@5", "evidence_recall", "evidence_pool_size",
        "answer_accuracy", "answer_chars", "citation_precision", "source_file", "source_first", "source_page",
        "abstain_precision", "abstain_recall", "false_abstain_rate", "faithfulness", "rounds", "model_calls",
        "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms_p50", "latency_ms_p95")


def _cell(metrics: dict, name: str) -> str:
    value = metrics.get(name)
    if value is None:
        return "–"
    text = f"{value:.3f}" if isinstance(value, float) and name in RATES + ("rounds", "model_calls", "cost_usd",
                                                                           "condensed", "earlier_correct") \
        else f"{value:.1f}" if isinstance(value, float) else str(value)
    ci = metrics.get(f"{name}_ci")
    return f"{text} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else text


def _svg(metrics: dict) -> str:
    """A grouped bar chart of the rates, one bar per mode (hand-written SVG, no plotting library)."""
    names = [n for n in RATES if any(m.get(n) is not None for m in metrics.values())]
    modes, colors = list(metrics), ["#8da0cb", "#fc8d62", "#66c2a5", "#e78ac3"]
    bar = 22
    group, legend = max(70, bar * len(modes) + 10), max(90, 16 + 7 * max(len(m) for m in modes))
    width, height, left, top = 60 + group * len(names), 300, 40, 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 90}" font-family="sans-serif" '
             f'font-size="11">', f'<line x1="{left}" y1="{top + height - 40}" x2="{width}" y2="{top + height - 40}" '
             f'stroke="#333"/>']
    scale = height - 60
    for i, name in enumerate(names):
        x = left + 10 + i * group
        for j, mode in enumerate(modes):
            value = metrics[mode].get(name) or 0.0
            h = value * scale
            parts.append(f'<rect x="{x + j * bar}" y="{top + height - 40 - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                         f'fill="{colors[j % len(colors)]}"><title>{mode} {name} {value:.3f}</title></rect>')
        y = top + height - 25
        parts.append(f'<text x="{x}" y="{y}" transform="rotate(30 {x} {y})">{name}</text>')
    for j, mode in enumerate(modes):
        parts.append(f'<rect x="{left + j * legend}" y="8" width="12" height="12" fill="{colors[j % len(colors)]}"/>'
                     f'<text x="{left + 16 + j * legend}" y="18">{mode}</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def write_reports(metrics: dict, out: Path, set_name: str, half: int | None = None, model: str = "",
                  embedder: str = "", what: str = "", notes: Sequence[str] = (),
                  extra_rows: Sequence[str] = ()) -> None:
    """metrics.json, report.md (the comparison table) and report.svg (the chart). `what` replaces the
    title's "MODE against MODE", `notes` are lines after the opening paragraph and `extra_rows` more
    metrics in the table (a conversation set's report)."""
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False), encoding="utf-8")
    modes = list(metrics)
    split = f"the questions of --half {half}" if half else "all questions"
    run = ", ".join(part for part in (model and f"model {model}", embedder and f"embedder {embedder}") if part)
    lines = [f"# {set_name}, {split}: {what or ' against '.join(modes)}, retrieval, answers and cost", "",
             (f"{run}. " if run else "") + "Rates with 95% bootstrap intervals; rounds, model calls, tokens and "
             "cost_usd are means per question, latency percentiles in ms. On a set of real files source_file and "
             "source_page are the shares of questions whose citations include the file, and the PDF page, holding the "
             "answer; source_first the share whose first citation is that file. "
             "The faithfulness row is the judge in use "
             "grading answers; with the offline model it is the system grading itself.", "",
             *([*notes, ""] if notes else []),
             "| metric | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    lines += [f"| {name} | " + " | ".join(_cell(metrics[m], name) for m in modes) + " |"
              for name in (*ROWS, *extra_rows)]
    for mode in modes:
        reasons = ", ".join(f"{k} {v}" for k, v in metrics[mode]["stop_reasons"].items())
        lines += ["", f"Stop reasons ({mode}): {reasons}"]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "report.svg").write_text(_svg(metrics), encoding="utf-8")


def write_report(folder: str | Path, report: dict, text: str) -> None:
    """report.json and report.md (`text`) in `folder`, made if missing; the Markdown is printed too."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text(text)
    print(text)
