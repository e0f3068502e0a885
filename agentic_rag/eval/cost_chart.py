"""Quality against cost: one panel per evaluation set, linear and agentic on each half.

    python -m agentic_rag.eval.cost_chart reports/bench/*-half1 reports/bench/*-half2 --out quality-cost.svg

Each folder is a `bench --mode both` report (metrics.json); its name gives the set and the half
(SET-halfN). In each panel x is model calls a question and y a quality rate (answer accuracy, or
evidence recall with --metric); a line joins a half's linear point to its agentic point, so its
slope is what the loop buys per call. Hand-written SVG, no plotting library.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

PANEL, PAD = 190, 34
COLORS = {"1": "#4c72b0", "2": "#dd8452"}


def points(folders: list[Path], metric: str) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """set -> half -> [(calls, rate) of linear, of agentic]."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for folder in folders:
        name = re.fullmatch(r"(.+?)-(?:half|h)([12])", folder.name)
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        if not name or not {"linear", "agentic"} <= set(metrics):
            raise SystemExit(f"{folder}: give bench --mode both reports in folders named SET-halfN")
        out.setdefault(name.group(1), {})[name.group(2)] = [
            (metrics[m]["model_calls"], metrics[m][metric] or 0.0) for m in ("linear", "agentic")]
    return out


def chart(data: dict[str, dict[str, list[tuple[float, float]]]], metric: str) -> str:
    """Small multiples: one panel per set, both halves, x from 0 to the largest call count."""
    top = max(x for halves in data.values() for line in halves.values() for x, _ in line)
    width, height = PAD + len(data) * (PANEL + PAD), PANEL + 3 * PAD
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11"><text x="{PAD}" y="16">{metric} (y, 0 to 1) against model calls a question '
             f'(x, 0 to {top:.1f}); o linear, ● agentic; '
             'blue --half 1 (settings chosen on it), orange --half 2 (held out)</text>']
    for i, (name, halves) in enumerate(sorted(data.items())):
        left, base = PAD + i * (PANEL + PAD), PAD + PANEL
        parts.append(f'<rect x="{left}" y="{PAD}" width="{PANEL}" height="{PANEL}" fill="none" stroke="#999"/>'
                     f'<text x="{left}" y="{base + 16}">{name}</text>')
        for half, (linear, agentic) in sorted(halves.items()):
            (x1, y1), (x2, y2) = [(left + x / top * PANEL, base - y * PANEL) for x, y in (linear, agentic)]
            color = COLORS.get(half, "#555")
            parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}"/>'
                         f'<circle cx="{x1:.1f}" cy="{y1:.1f}" r="4" fill="white" stroke="{color}">'
                         f'<title>{name} half {half} linear: {linear[1]:.3f} at {linear[0]:.2f} calls</title></circle>'
                         f'<circle cx="{x2:.1f}" cy="{y2:.1f}" r="4" fill="{color}">'
                         f'<title>{name} half {half} agentic: {agentic[1]:.3f} at {agentic[0]:.2f} calls</title>'
                         f'</circle>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: read the reports, write the chart."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="bench --mode both report folders named SET-halfN")
    parser.add_argument("--metric", default="answer_accuracy", choices=("answer_accuracy", "evidence_recall"))
    parser.add_argument("--out", type=Path, default=Path("quality-cost.svg"))
    args = parser.parse_args(argv)
    args.out.write_text(chart(points(args.folders, args.metric), args.metric), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
