"""The RGB paper's own protocol (Chen et al., AAAI 2024): each question gets a few passages at a
given share of negatives; accuracy = answers holding the gold answer, rejection rate = abstentions.
At noise rate 1.0 every passage is a negative and the right output is a rejection."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from ..core import Config, ConfigurationError, IndexConfig, RunConfig
from ..kb import Document, KnowledgeBase
from ..loop import run_agentic_rag
from ..models import Model
from ._answers import answer_correct
from ._bench import answer_linear
from ._metrics import bootstrap_ci


def passages_for(item: dict, noise_rate: float, count: int) -> list[str]:
    """`count` passages, round(count * noise_rate) of them negatives, drawn with a seed per question."""
    rng = random.Random(f"rgb-{item['id']}")
    positive = [p for group in item["positive"] for p in (group if isinstance(group, list) else [group])]
    negatives = round(count * noise_rate)
    chosen = rng.sample(item["negative"], min(negatives, len(item["negative"])))
    chosen += rng.sample(positive, min(count - len(chosen), len(positive)))
    rng.shuffle(chosen)
    return chosen


def _parts(answer: str | list[str | list[str]]) -> list[list[str]]:
    return [[answer]] if isinstance(answer, str) else [p if isinstance(p, list) else [p] for p in answer]


def run_rgb(path: Path, noise_rate: float, count: int, model: Model, limit: int | None = None,
            out: Path | None = None) -> dict:
    """Accuracy of both modes and the agentic rejection rate over the file's questions."""
    if not 0 <= noise_rate <= 1:
        raise ConfigurationError(f"--noise-rate {noise_rate} must lie in [0, 1]")
    if not path.is_file():
        raise ConfigurationError(
            f"{path} not found; give an RGB .jsonl file such as ../shared/data/rgb/zh_refine.dev.jsonl")
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]
    config = Config.from_layers(index=IndexConfig(chunk_size=2000, chunk_overlap=0),
                                run=RunConfig(evidence_k=count, search_k=count))
    scores: dict[str, list[float]] = {"linear": [], "agentic": [], "rejected": []}
    rows = []
    for n, item in enumerate(items, 1):
        kb = KnowledgeBase(config=config.index)
        passages = passages_for(item, noise_rate, count)
        kb.add_documents([Document(id=f"p{i}", text=text) for i, text in enumerate(passages)])
        linear = answer_linear(item["query"], kb, model, config)
        agentic = run_agentic_rag(item["query"], kb, model, (), config)
        parts = _parts(item["answer"])
        scores["linear"].append(float(answer_correct(linear["answer"], parts)))
        scores["agentic"].append(float(not agentic["abstained"] and answer_correct(agentic["answer"], parts)))
        scores["rejected"].append(float(agentic["abstained"]))
        rows.append({"id": item["id"], "linear": linear["answer"], "agentic": agentic["answer"],
                     "abstained": agentic["abstained"]})
        print(f"\rrgb {n}/{len(items)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    report = {"file": path.name, "noise_rate": noise_rate, "passages": count, "n": len(items)}
    for name, key in (("linear_accuracy", "linear"), ("agentic_accuracy", "agentic"), ("rejection_rate", "rejected")):
        report[name] = sum(scores[key]) / len(items) if items else None
        report[f"{name}_ci"] = bootstrap_ci(scores[key]) if items else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "rgb.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        (out / "rgb_results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                               encoding="utf-8")
    return report
