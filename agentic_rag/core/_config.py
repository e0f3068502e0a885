"""Settings in three frozen dataclasses, one per layer, behind one flat `Config` front; defaults
chosen by measurement.

IndexConfig is what building a knowledge base fixes (its chunking is saved in the manifest; the
hnswlib graph is built with the rest), SearchConfig what a search takes, RunConfig what a run of
the agent loop takes. `Config` declares every field of the three under its old flat name, in the
order a state file saves them (asdict), each defaulting to its layer's default, so
`Config(max_rounds=2)`, `dataclasses.replace` and `asdict` work as they always have;
`config.index`, `config.search` and `config.run` are its layers, and `Config.from_layers` builds
one from them. Every field is checked against its declared type and range on construction.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any, TypeAlias, TypeVar

from ._errors import ConfigurationError

SEARCH_MODES = ("hybrid", "bm25", "vector")

# the least value of each field that must be above 0; every other number must be at least 0
_LEAST = {"chunk_size": 50, "hnsw_m": 2, "candidates": 1, "max_rounds": 1, "search_k": 1, "evidence_k": 1,
          "max_subqueries": 1, "parallel_searches": 1, "max_completion_tokens": 1}

_Layer: TypeAlias = "IndexConfig | SearchConfig | RunConfig"
_L = TypeVar("_L", bound=_Layer)


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python will print
        return "(a number too long to show)"
    return text if len(text) <= 80 else text[:77] + "..."


def _finite(number: int | float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int past any float: a run would fail on it later
        return False


def _type_problem(declared: str, value: Any, default: object) -> str | None:
    """What is wrong with `value` (of any type: this finds out) for a field declared `declared` (its
    annotation), and the fix; None when it fits."""
    optional, kind = declared.endswith(" | None"), declared.removesuffix(" | None")
    if value is None and optional:
        return None
    got, or_none = type(value).__name__, " or None" if optional else ""
    got = ("an " if got[0] in "aeiou" else "a ") + got
    example = f", e.g. {default!r}" if default is not None else ""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy's numbers too
    if kind == "int":
        fits, problem, fix = number and isinstance(value, numbers.Integral), f"is {got}, not an int", "a whole number"
    elif kind == "float":
        fits, problem, fix = number and _finite(value), f"is {got}, not a number", "a finite number"
        if number:
            problem = "is not a finite number"
    elif kind == "bool":
        fits, problem, fix, example = isinstance(value, bool), f"is {got}, not a bool", "True or False", ""
    elif kind == "str":
        fits, problem, fix = isinstance(value, str), f"is {got}, not a str", "a str"
    elif kind == "tuple[str, ...]":
        fits = isinstance(value, (tuple, list)) and all(isinstance(item, str) for item in value)
        problem, fix = "is not a tuple of str", "a tuple of str"
    else:  # a field declared with a type this module has no check for: a mistake here, not in the caller's value
        raise TypeError(f"agentic_rag.core._config has no check for fields declared {declared}")
    return None if fits else f"{problem}; give {fix}{or_none}{example}"


def _validate(settings: Any, label: str, layers: tuple[type[_Layer], ...]) -> None:
    """Raise ConfigurationError naming the first bad field of `settings` (`label` names its class):
    its type, then its least value, then the layers' own checks. `settings` is one of `layers` or the
    front (Config): typed Any, as each layer's check takes only its own class or the front."""
    checked = [f for layer in layers for f in fields(layer)]  # the front declares the same types and defaults
    for f in checked:
        value = getattr(settings, f.name)
        if (problem := _type_problem(str(f.type), value, f.default)) is not None:  # a str: postponed annotations
            raise ConfigurationError(f"{label}.{f.name} = {_shown(value)} {problem}")
        if type(value) not in (int, float, bool, str, tuple, list, type(None)):  # numpy's int64, float32, ...
            object.__setattr__(settings, f.name, int(value) if isinstance(value, numbers.Integral) else float(value))
    if isinstance(getattr(settings, "sources", ()), list):  # a tuple, so that the settings hash
        object.__setattr__(settings, "sources", tuple(settings.sources))
    for f in checked:
        value, least = getattr(settings, f.name), _LEAST.get(f.name, 0)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < least:
            why = f"is negative; use a value >= {least}" if value < 0 else f"must be at least {least}"
            raise ConfigurationError(f"{label}.{f.name} = {_shown(value)} {why}")
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
    def check(c: IndexConfig | Config, label: str) -> None:
        """Raise ConfigurationError for a bad index field of `c` (a layer or the front)."""
        if c.chunk_overlap >= c.chunk_size:
            raise ConfigurationError(
                f"{label}.chunk_overlap = {c.chunk_overlap} must be smaller than chunk_size = {c.chunk_size}")


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
    def check(c: SearchConfig | Config, label: str) -> None:
        """Raise ConfigurationError for a bad search field of `c` (a layer or the front)."""
        if c.bm25_weight == 0 and c.vector_weight == 0:
            raise ConfigurationError(
                f"{label}.bm25_weight and vector_weight are both 0; give at least one a weight above 0")
        if c.fusion not in (None, "rrf", "score"):
            raise ConfigurationError(f"{label}.fusion = {c.fusion!r}; choose 'rrf' or 'score' "
                                     "(or None: the embedder's default)")
        if not 0 <= c.bm25_b <= 1:
            raise ConfigurationError(f"{label}.bm25_b = {c.bm25_b} must lie in [0, 1]")


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
    # retrieval sources, in the order a low grade re-routes to them; each is used once per question.
    # "pagerank" (personalized PageRank from the evidence found so far) is offered, not a default: on
    # the multi-hop dev sets it ranked below the hybrid search seeding it
    sources: tuple[str, ...] = ("vector", "graph", "web")
    answer_when_exhausted: bool = True  # no query or source left: answer from what there is (else abstain)

    def __post_init__(self) -> None:
        _validate(self, "RunConfig", (RunConfig,))

    @staticmethod
    def check(c: RunConfig | Config, label: str) -> None:
        """Raise ConfigurationError for a bad run field of `c` (a layer or the front)."""
        if not c.sources or set(c.sources) - {"vector", "graph", "pagerank", "web"}:
            raise ConfigurationError(f"{label}.sources = {c.sources!r}: give some of 'vector', 'graph', "
                                     f"'pagerank', 'web'")
        for name in ("min_context_score", "min_faithfulness", "abstain_floor", "answer_floor", "low_confidence_floor",
                     "converge_jaccard"):
            if not 0 <= getattr(c, name) <= 1:
                raise ConfigurationError(f"{label}.{name} = {getattr(c, name)} must lie in [0, 1]")


LAYERS = {"index": IndexConfig, "search": SearchConfig, "run": RunConfig}

@dataclass(frozen=True)
class Config:
    """Every setting of the three layers under its flat name (IndexConfig, SearchConfig, RunConfig);
    immutable, safe to share. `config.index`, `config.search` and `config.run` are its layers."""

    # the order of these fields is the order a state file saves the settings in (asdict): keep it
    chunk_size: int = IndexConfig.chunk_size
    chunk_overlap: int = IndexConfig.chunk_overlap
    bm25_k1: float = SearchConfig.bm25_k1
    bm25_b: float = SearchConfig.bm25_b
    fusion: str | None = SearchConfig.fusion
    rrf_k: int = SearchConfig.rrf_k
    bm25_weight: float = SearchConfig.bm25_weight
    vector_weight: float | None = SearchConfig.vector_weight
    candidates: int = SearchConfig.candidates
    rerank: bool = SearchConfig.rerank
    hnsw_m: int = IndexConfig.hnsw_m
    hnsw_ef_construction: int = IndexConfig.hnsw_ef_construction
    hnsw_ef: int = SearchConfig.hnsw_ef
    exact_search_below: int = IndexConfig.exact_search_below
    seed: int = IndexConfig.seed
    max_rounds: int = RunConfig.max_rounds
    token_budget: int = RunConfig.token_budget
    max_completion_tokens: int = RunConfig.max_completion_tokens
    deadline_s: float = RunConfig.deadline_s
    search_k: int = RunConfig.search_k
    evidence_k: int = RunConfig.evidence_k
    min_context_score: float = RunConfig.min_context_score
    min_faithfulness: float = RunConfig.min_faithfulness
    abstain_floor: float = RunConfig.abstain_floor
    answer_floor: float = RunConfig.answer_floor
    low_confidence_floor: float = RunConfig.low_confidence_floor
    converge_jaccard: float = RunConfig.converge_jaccard
    max_rewrites: int = RunConfig.max_rewrites
    max_repairs: int = RunConfig.max_repairs
    max_subqueries: int = RunConfig.max_subqueries
    parallel_searches: int = RunConfig.parallel_searches
    sources: tuple[str, ...] = RunConfig.sources
    answer_when_exhausted: bool = RunConfig.answer_when_exhausted

    def __post_init__(self) -> None:
        _validate(self, "Config", tuple(LAYERS.values()))

    def _layer(self, layer: type[_L]) -> _L:
        """The layer of class `layer`, built (and checked) once: a search asks for its settings every time.
        Kept outside the fields, so equality, hashing, repr and asdict do not see it."""
        layers = self.__dict__.get("_layers")
        if layers is None:
            layers = {kind: kind(**{f.name: getattr(self, f.name) for f in fields(kind)}) for kind in LAYERS.values()}
            object.__setattr__(self, "_layers", layers)
        return layers[layer]

    @property
    def index(self) -> IndexConfig:
        """The settings building a knowledge base fixes."""
        return self._layer(IndexConfig)

    @property
    def search(self) -> SearchConfig:
        """The settings a search takes."""
        return self._layer(SearchConfig)

    @property
    def run(self) -> RunConfig:
        """The settings a run of the agent loop takes."""
        return self._layer(RunConfig)

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


def as_config(settings: Config | IndexConfig | SearchConfig | RunConfig | None) -> Config:
    """A Config from a Config, from one layer (the others take their defaults) or from None (all defaults)."""
    if settings is None:
        return Config()
    if isinstance(settings, Config):
        return settings
    for name, layer in LAYERS.items():
        if isinstance(settings, layer):
            return Config.from_layers(**{name: settings})  # type: ignore[arg-type]  # LAYERS pairs name and class
    raise ConfigurationError(f"config must be an agentic_rag.Config or one of its layers (IndexConfig, "
                             f"SearchConfig, RunConfig), not {type(settings).__name__}")
