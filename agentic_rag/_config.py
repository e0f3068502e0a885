"""One frozen dataclass holds every setting, with defaults chosen by measurement."""
from __future__ import annotations

from dataclasses import dataclass, fields

from ._errors import ConfigurationError

SEARCH_MODES = ("hybrid", "bm25", "vector")


@dataclass(frozen=True)
class Config:
    """Settings for chunking, retrieval and (later) the agent loop; immutable, safe to share."""

    # chunking, in characters (one CJK character is about one token, four Latin ones about one)
    chunk_size: int = 800
    chunk_overlap: int = 100
    # Okapi BM25 parameters, by their paper names
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    # hybrid search: "rrf" (reciprocal-rank fusion, k from Cormack et al. 2009) or "score" (min-max
    # normalised scores); fusion and vector_weight left None take the embedder's measured defaults
    # (HashingEmbedder.fusion, E5Embedder.fusion; docs/benchmarks.md)
    fusion: str | None = None
    rrf_k: int = 60
    bm25_weight: float = 1.0
    vector_weight: float | None = None
    candidates: int = 50  # how deep each retriever ranks before fusion
    rerank: bool = False
    # hnswlib graph of a dense embedder's vectors (a sparse one, hashing, is always searched exactly);
    # below exact_search_below vectors an exact numpy search is used instead. ef 256: recall@10 against
    # exact search 0.96-0.98 at 30,000 and 100,000 e5-like vectors, where 100 gave 0.91 (docs/benchmarks.md)
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    hnsw_ef: int = 256
    exact_search_below: int = 20_000
    seed: int = 100
    # the agent loop: budgets and stop conditions (docs/concepts/stop-conditions.md, docs/concepts/loop.md)
    max_rounds: int = 3
    token_budget: int = 40_000         # prompt + completion tokens of one run
    # the completion limit of each model call, lowered to what the budget has left: about four times
    # the longest valid reply (the offline model's longest measured ~160 tokens; an LLM's cited
    # three-sentence answer ~250); raise it for reasoning models, whose hidden reasoning counts in it
    max_completion_tokens: int = 1024
    deadline_s: float = 120.0          # wall clock of one run
    search_k: int = 8                  # hits per query (as many as a prompt shows)
    evidence_k: int = 8                # best passages of the pool shown to a prompt
    min_context_score: float = 0.6     # grade at which evidence is sufficient
    min_faithfulness: float = 0.86     # below this an answer is repaired
    abstain_floor: float = 0.45        # a repaired answer whose faithfulness stays below this: abstain
    answer_floor: float = 0.3          # retrieval stopped short of sufficient with a grade below this: abstain
    low_confidence_floor: float = 0.25  # two rounds in a row graded below this stop the run
    converge_jaccard: float = 0.8      # a round whose top passages overlap the last one's this much
    max_rewrites: int = 1
    max_repairs: int = 1
    max_subqueries: int = 5
    parallel_searches: int = 4
    # retrieval sources, in the order a low grade re-routes to them; each is used once per question
    sources: tuple = ("vector", "graph", "web")
    answer_when_exhausted: bool = True  # no query or source left: answer from what there is (else abstain)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise ConfigurationError(f"Config.{f.name} = {value!r} is negative; use a value >= 0")
        if self.chunk_size < 50:
            raise ConfigurationError(f"Config.chunk_size = {self.chunk_size} is too small; use at least 50 characters")
        if self.chunk_overlap >= self.chunk_size:
            raise ConfigurationError(
                f"Config.chunk_overlap = {self.chunk_overlap} must be smaller than chunk_size = {self.chunk_size}")
        if self.bm25_weight == 0 and self.vector_weight == 0:
            raise ConfigurationError(
                "Config.bm25_weight and vector_weight are both 0; give at least one a weight above 0")
        if self.fusion not in (None, "rrf", "score"):
            raise ConfigurationError(f"Config.fusion = {self.fusion!r}; choose 'rrf' or 'score' "
                                     "(or None: the embedder's default)")
        if not 0 <= self.bm25_b <= 1:
            raise ConfigurationError(f"Config.bm25_b = {self.bm25_b} must lie in [0, 1]")
        if self.candidates < 1 or self.hnsw_m < 2:
            raise ConfigurationError("Config.candidates must be >= 1 and Config.hnsw_m >= 2")
        if not self.sources or set(self.sources) - {"vector", "graph", "web"}:
            raise ConfigurationError(f"Config.sources = {self.sources!r}: give some of 'vector', 'graph', 'web'")
        for name in ("max_rounds", "search_k", "evidence_k", "max_subqueries", "parallel_searches",
                     "max_completion_tokens"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"Config.{name} = {getattr(self, name)} must be at least 1")
        for name in ("min_context_score", "min_faithfulness", "abstain_floor", "answer_floor", "low_confidence_floor",
                     "converge_jaccard"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigurationError(f"Config.{name} = {getattr(self, name)} must lie in [0, 1]")
