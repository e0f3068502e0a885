"""Evaluation: data sets, metrics and benchmark runners that write reports. The retrieval and scale
benchmarks are commands: `python -m agentic_rag.eval.retrieval`, `python -m agentic_rag.eval.scale`."""
from ._answers import answer_correct

# for the package's other folders, not public API (the public names are in __all__)
from ._bench import MODES as MODES
from ._bench import run_bench
from ._datasets import Question, load_set
from ._metrics import all_relevant_at_k, bootstrap_ci, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k
from ._rgb import run_rgb

__all__ = ["run_bench", "run_rgb", "load_set", "Question", "answer_correct",
           "recall_at_k", "precision_at_k", "mrr_at_k", "ndcg_at_k", "all_relevant_at_k", "bootstrap_ci"]
