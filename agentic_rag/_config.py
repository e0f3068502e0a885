"""Settings in three frozen dataclasses, one per layer, behind one flat `Config` front; defaults
chosen by measurement.

IndexConfig is what building a knowledge base fixes (its chunking is saved in the manifest; the
hnswlib graph is built with the rest), SearchConfig what a search takes, RunConfig what a run of
the agent loop takes. `Config` holds every field of the three under its old flat names, so
`Config(max_rounds=2)`, `dataclasses.replace` and `asdict` (how a state file saves the settings)
work as they always have; `config.index`, `config.search` and `config.run` are its layers, and
`Config.from_layers` builds one from them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass

from ._errors import ConfigurationError

SEARCH_MODES = ("hybrid", "bm25", "vector")


def _check_negative(settings, label: str, names) -> None:
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise ConfigurationError(f"{label}.{name} = {value!r} is negative; use a value >= 0")


def _validate(settings, label: str, layers) -> None:
    """Raise ConfigurationError naming the first bad field of `settings` (`label` names its class)."""
    _check_negative(settings, label, [f.name for layer in layers for f in fields(layer)])
    for layer in layers:
        layer.check(settings, label)


@dataclass(frozen=True)
class IndexConfig:
    """What building a knowledge base fixes: chunking (saved in its manifest) and the hnswlib graph."""

    # chunking, in characters (one CJK character is about one token, four Latin ones about one)
    chunk_size: int = 800
    chunk_overlap: int = 100
    # hnswlib graph of a dense embedder's vectors (a sparse one, hashing, is always searched exactly),
    # built once exact_search_below vectors are held (below that an exact numpy search is used); the
    # graph is saved with the knowledge base, so a loaded one keeps the m and seed it was built with
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    exact_search_below: int = 20_000
    seed: int = 100

    def __post_init__(self) -> None:
        _validate(self, "IndexConfig", (IndexConfig,))

    @staticmethod
    def check(c, label: str) -> None:
        """Raise ConfigurationError for a bad index field of `c` (a layer or the front)."""
        if c.chunk_size < 50:
            raise ConfigurationError(f"{label}.chunk_size = {c.chunk_size} is too small; use at least 50 characters")
        if c.chunk_overlap >= c.chunk_size:
            raise ConfigurationError(
                f"{label}.chunk_overlap = {c.chunk_overlap} must be smaller than chunk_size = {c.chunk_size}")
        if c.hnsw_m < 2:
            raise ConfigurationError(f"{label}.hnsw_m = {c.hnsw_m} must be at least 2")


@dataclass(frozen=True)
class SearchConfig:
    """What a search takes: BM25 scoring, fusion, candidate depth, reranking, the graph's search breadth."""

    # Okapi BM25 parameters, by their paper names; scores are computed from the saved term counts,
    # so other values need no rebuild
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
    # ef 256: recall@10 against exact search 0.96-0.98 at 30,000 and 100,000 e5-like vectors, where
    # 100 gave 0.91 (docs/benchmarks.md)
    hnsw_ef: int = 256

    def __post_init__(self) -> None:
        _validate(self, "SearchConfig", (SearchConfig,))

    @staticmethod
    def check(c, label: str) -> None:
        """Raise ConfigurationError for a bad search field of `c` (a layer or the front)."""
        if c.bm25_weight == 0 and c.vector_weight == 0:
            raise ConfigurationError(
                f"{label}.bm25_weight and vector_weight are both 0; give at least one a weight above 0")
        if c.fusion not in (None, "rrf", "score"):
            raise ConfigurationError(f"{label}.fusion = {c.fusion!r}; choose 'rrf' or 'score' "
                                     "(or None: the embedder's default)")
        if not 0 <= c.bm25_b <= 1:
            raise ConfigurationError(f"{label}.bm25_b = {c.bm25_b} must lie in [0, 1]")
        if c.candidates < 1:
            raise ConfigurationError(f"{label}.candidates = {c.candidates} must be at least 1")


@dataclass(frozen=True)
class RunConfig:
    """What a run of the agent loop takes: budgets, thresholds and stop conditions."""

    # budgets and stop conditions (docs/concepts/stop-conditions.md, docs/concepts/loop.md)
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
        _validate(self, "RunConfig", (RunConfig,))

    @staticmethod
    def check(c, label: str) -> None:
        """Raise ConfigurationError for a bad run field of `c` (a layer or the front)."""
        if not c.sources or set(c.sources) - {"vector", "graph", "web"}:
            raise ConfigurationError(f"{label}.sources = {c.sources!r}: give some of 'vector', 'graph', 'web'")
        for name in ("max_rounds", "search_k", "evidence_k", "max_subqueries", "parallel_searches",
                     "max_completion_tokens"):
            if getattr(c, name) < 1:
                raise ConfigurationError(f"{label}.{name} = {getattr(c, name)} must be at least 1")
        for name in ("min_context_score", "min_faithfulness", "abstain_floor", "answer_floor", "low_confidence_floor",
                     "converge_jaccard"):
            if not 0 <= getattr(c, name) <= 1:
                raise ConfigurationError(f"{label}.{name} = {getattr(c, name)} must lie in [0, 1]")


LAYERS = {"index": IndexConfig, "search": SearchConfig, "run": RunConfig}

# The front's fields in the order Config has always had them, which is the order of the settings a
# state file saves (asdict): the layers say which field is where and what it defaults to, this only
# keeps that order (checked below to name each layer's fields exactly once).
_SAVED_ORDER = (
    "chunk_size", "chunk_overlap", "bm25_k1", "bm25_b", "fusion", "rrf_k", "bm25_weight", "vector_weight",
    "candidates", "rerank", "hnsw_m", "hnsw_ef_construction", "hnsw_ef", "exact_search_below", "seed",
    "max_rounds", "token_budget", "max_completion_tokens", "deadline_s", "search_k", "evidence_k",
    "min_context_score", "min_faithfulness", "abstain_floor", "answer_floor", "low_confidence_floor",
    "converge_jaccard", "max_rewrites", "max_repairs", "max_subqueries", "parallel_searches", "sources",
    "answer_when_exhausted",
)


def _front_fields() -> list[tuple]:
    """Every layer's fields, in _SAVED_ORDER; an import error if the two disagree."""
    owners = [f for layer in LAYERS.values() for f in fields(layer)]
    by_name = {f.name: f for f in owners}
    if len(by_name) != len(owners) or sorted(by_name) != sorted(_SAVED_ORDER):
        raise ImportError("agentic_rag._config: the layers' fields and _SAVED_ORDER disagree")
    return [(name, by_name[name].type, field(default=by_name[name].default)) for name in _SAVED_ORDER]


class _Front:
    """Every setting of the three layers under its flat name (IndexConfig, SearchConfig, RunConfig);
    immutable, safe to share. `config.index`, `config.search` and `config.run` are its layers."""

    def __post_init__(self) -> None:
        _validate(self, "Config", tuple(LAYERS.values()))

    def _layer(self, name: str):
        layer = LAYERS[name]
        return layer(**{f.name: getattr(self, f.name) for f in fields(layer)})

    @property
    def index(self) -> IndexConfig:
        """The settings building a knowledge base fixes."""
        return self._layer("index")

    @property
    def search(self) -> SearchConfig:
        """The settings a search takes."""
        return self._layer("search")

    @property
    def run(self) -> RunConfig:
        """The settings a run of the agent loop takes."""
        return self._layer("run")

    @classmethod
    def from_layers(cls, index: IndexConfig | None = None, search: SearchConfig | None = None,
                    run: RunConfig | None = None) -> Config:
        """A Config of the given layers (a layer not given takes its defaults)."""
        given = {"index": index, "search": search, "run": run}
        values = {}
        for name, layer in LAYERS.items():
            settings = given[name] if given[name] is not None else layer()
            if not isinstance(settings, layer):
                raise ConfigurationError(f"{name} must be the {layer.__name__} layer, not a {type(settings).__name__}")
            values.update({f.name: getattr(settings, f.name) for f in fields(layer)})
        return cls(**values)


Config = make_dataclass("Config", _front_fields(), bases=(_Front,), frozen=True,
                        namespace={"__doc__": _Front.__doc__, "__module__": __name__})


def as_config(settings: Config | IndexConfig | SearchConfig | RunConfig | None) -> Config:
    """A Config from a Config, from one layer (the others take their defaults) or from None (all defaults)."""
    if settings is None:
        return Config()
    if isinstance(settings, Config):
        return settings
    for name, layer in LAYERS.items():
        if isinstance(settings, layer):
            return Config.from_layers(**{name: settings})
    raise ConfigurationError(f"config must be an agentic_rag.Config or one of its layers (IndexConfig, "
                             f"SearchConfig, RunConfig), not {type(settings).__name__}")
