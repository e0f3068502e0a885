"""A benchmark on a shared evaluation set: linear against agentic on a few SQuAD 2.0 questions.

    python examples/benchmark.py [SET_FOLDER]     (default ../shared/data/squad2 beside the project)
"""
import sys
import tempfile
from pathlib import Path

from agentic_rag import Config, OfflineModel, run_bench

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data" / "squad2"
if not (folder / "corpus.jsonl").is_file():
    print(f"no evaluation set at {folder}; give a folder with corpus.jsonl and questions.jsonl")
    sys.exit(0)
out = Path(tempfile.mkdtemp())
metrics = run_bench(folder, ["linear", "agentic"], out, OfflineModel(), Config(), limit=10)
for mode, m in metrics.items():
    print(f"{mode:8} accuracy {m['answer_accuracy']:.2f}  evidence recall {m['evidence_recall']:.2f}  "
          f"model calls {m['model_calls']:.1f}  abstain recall {m['abstain_recall'] or 0:.2f}")
print(f"report: {out / 'report.md'}")
