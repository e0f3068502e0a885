import ast
import copy
import inspect
import json
import pickle
from dataclasses import FrozenInstanceError, asdict, fields, replace

import pytest

import agentic_rag.core._config
from agentic_rag import Config, ConfigurationError, IndexConfig, KnowledgeBase, RunConfig, SearchConfig


@pytest.mark.parametrize("kwargs, message", [
    ({"chunk_size": 10}, "chunk_size"),
    ({"chunk_overlap": 900}, "chunk_overlap"),
    ({"bm25_weight": 0, "vector_weight": 0}, "both 0"),
    ({"bm25_b": 1.5}, "bm25_b"),
    ({"rrf_k": -1}, "negative"),
    ({"hnsw_m": 1}, "hnsw_m"),
    ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ({"max_rounds": 0}, "max_rounds"),
    ({"candidates": 0}, "candidates"),
    ({"min_context_score": 1.5}, "min_context_score"),
    ({"low_confidence_floor": 2}, "low_confidence_floor"),
    ({"converge_jaccard": 1.01}, "converge_jaccard"),
    ({"sources": ("vector", "bing")}, "sources"),
    ({"sources": ()}, "sources"),
])
def test_bad_values_name_the_field(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        Config(**kwargs)


LAYER_OF = {"index": IndexConfig, "search": SearchConfig, "run": RunConfig}


def test_the_layers_partition_the_fronts_fields_with_the_same_types_and_defaults():
    names = [[f.name for f in fields(layer)] for layer in LAYER_OF.values()]
    every = [name for layer in names for name in layer]
    assert len(every) == len(set(every)) and sorted(every) == sorted(f.name for f in fields(Config))
    front, declared = Config(), {f.name: (f.type, f.default) for f in fields(Config)}
    for attribute, layer in LAYER_OF.items():
        assert getattr(front, attribute) == layer()
        assert all(declared[f.name] == (f.type, f.default) for f in fields(layer))


def test_the_front_keeps_the_order_state_files_save_its_settings_in():
    # the order of Config's fields before it was split by layer: a state file's "config" keeps it
    assert list(asdict(Config())) == [
        "chunk_size", "chunk_overlap", "bm25_k1", "bm25_b", "fusion", "rrf_k", "bm25_weight", "vector_weight",
        "candidates", "rerank", "hnsw_m", "hnsw_ef_construction", "hnsw_ef", "exact_search_below", "seed",
        "max_rounds", "token_budget", "max_completion_tokens", "deadline_s", "search_k", "evidence_k",
        "min_context_score", "min_faithfulness", "abstain_floor", "answer_floor", "low_confidence_floor",
        "converge_jaccard", "max_rewrites", "max_repairs", "max_subqueries", "parallel_searches", "sources",
        "answer_when_exhausted"]
    assert vars(Config(max_rounds=2)) == asdict(Config(max_rounds=2))


def test_the_front_round_trips_replaces_and_hashes():
    config = Config(chunk_size=300, fusion="score", max_rounds=2, sources=("vector",))
    assert Config(**asdict(config)) == config and hash(Config(**asdict(config))) == hash(config)
    assert pickle.loads(pickle.dumps(config)) == config and copy.deepcopy(config) == config
    changed = replace(config, max_rounds=4)
    assert changed.max_rounds == 4 and changed.run.max_rounds == 4 and changed.index == config.index
    assert changed != config and len({config, changed, Config(**asdict(config))}) == 2
    with pytest.raises(ConfigurationError, match="Config.max_rounds = 0 must be at least 1"):
        replace(config, max_rounds=0)
    with pytest.raises(FrozenInstanceError):
        config.max_rounds = 5



def test_a_layer_is_built_once_and_changes_nothing_a_config_shows():
    config, fresh = Config(max_rounds=2), Config(max_rounds=2)
    assert config.search is config.search and config.run is config.run  # a search asks each time: built once
    assert config == fresh and hash(config) == hash(fresh) and repr(config) == repr(fresh)
    assert asdict(config) == asdict(fresh) and pickle.loads(pickle.dumps(config)) == fresh


def test_each_layer_names_itself_and_the_bad_field():
    with pytest.raises(ConfigurationError, match=r"^IndexConfig\.chunk_size = 10 must be at least 50$"):
        IndexConfig(chunk_size=10)
    with pytest.raises(ConfigurationError, match=r"^IndexConfig\.hnsw_m = 1 must be at least 2"):
        IndexConfig(hnsw_m=1)
    with pytest.raises(ConfigurationError, match=r"^SearchConfig\.rrf_k = -1 is negative"):
        SearchConfig(rrf_k=-1)
    with pytest.raises(ConfigurationError, match=r"^SearchConfig\.fusion = 'max'; choose 'rrf' or 'score'"):
        SearchConfig(fusion="max")
    with pytest.raises(ConfigurationError, match=r"^RunConfig\.converge_jaccard = 1.01 must lie in \[0, 1\]"):
        RunConfig(converge_jaccard=1.01)
    with pytest.raises(ConfigurationError, match=r"^Config\.hnsw_m = 1 must be at least 2"):
        Config(hnsw_m=1)


def test_a_front_is_built_from_its_layers():
    config = Config.from_layers(index=IndexConfig(chunk_size=300), run=RunConfig(max_rounds=2))
    assert config == Config(chunk_size=300, max_rounds=2)
    assert config.index == IndexConfig(chunk_size=300) and config.search == SearchConfig()
    assert Config.from_layers(config.index, config.search, config.run) == config
    with pytest.raises(ConfigurationError, match="index must be the IndexConfig layer, not a RunConfig"):
        Config.from_layers(index=RunConfig())


def test_a_knowledge_base_takes_a_layer_or_the_front_alike(tiny_docs):
    pairs = [(IndexConfig(chunk_size=200, chunk_overlap=20), Config(chunk_size=200, chunk_overlap=20)),
             (SearchConfig(fusion="score", vector_weight=0.5), Config(fusion="score", vector_weight=0.5)),
             (Config.from_layers(IndexConfig(chunk_size=200, chunk_overlap=20), SearchConfig(candidates=5)),
              Config(chunk_size=200, chunk_overlap=20, candidates=5))]
    for layered, flat in pairs:
        a, b = KnowledgeBase(config=layered), KnowledgeBase(config=flat)
        a.add_documents(tiny_docs)
        b.add_documents(tiny_docs)
        assert a.config == flat and len(a) == len(b)
        for query in ("authentication timeout 2.3.1", "认证失败", "Team plan price"):
            assert a.search(query, k=3) == b.search(query, k=3)
    with pytest.raises(ConfigurationError, match="config must be an agentic_rag.Config or one of its layers"):
        KnowledgeBase(config={"chunk_size": 200})


@pytest.mark.parametrize("kwargs, message", [
    ({"max_rounds": "3"}, r"Config\.max_rounds = '3' is a str, not an int; give a whole number, e\.g\. 3"),
    ({"max_rounds": None}, r"Config\.max_rounds = None is a NoneType, not an int"),
    ({"max_rounds": 2.5}, r"Config\.max_rounds = 2\.5 is a float, not an int"),
    ({"max_rounds": True}, r"Config\.max_rounds = True is a bool, not an int"),
    ({"token_budget": 40_000.0}, r"Config\.token_budget = 40000\.0 is a float, not an int"),
    ({"deadline_s": float("nan")},
     r"Config\.deadline_s = nan is not a finite number; give a finite number, e\.g\. 120\.0"),
    ({"deadline_s": float("inf")}, r"Config\.deadline_s = inf is not a finite number"),
    ({"deadline_s": 10 ** 400}, r"Config\.deadline_s = 1000000.+ is not a finite number"),
    ({"deadline_s": "60"}, r"Config\.deadline_s = '60' is a str, not a number"),
    ({"bm25_k1": float("nan")}, r"Config\.bm25_k1 = nan is not a finite number"),
    ({"bm25_weight": float("-inf")}, r"Config\.bm25_weight = -inf is not a finite number"),
    ({"vector_weight": float("nan")},
     r"Config\.vector_weight = nan is not a finite number; give a finite number or None"),
    ({"rerank": 1}, r"Config\.rerank = 1 is an int, not a bool; give True or False"),
    ({"answer_when_exhausted": "no"}, r"Config\.answer_when_exhausted = 'no' is a str, not a bool"),
    ({"fusion": 3}, r"Config\.fusion = 3 is an int, not a str; give a str or None"),
    ({"sources": "vector"}, r"Config\.sources = 'vector' is not a tuple of str"),
    ({"sources": ("vector", None)}, r"Config\.sources = \('vector', None\) is not a tuple of str"),
])
def test_a_value_of_the_wrong_type_is_a_configuration_error_naming_the_field(kwargs, message):
    with pytest.raises(ConfigurationError, match=f"^{message}"):
        Config(**kwargs)
    layer = next(layer for layer in LAYER_OF.values() if next(iter(kwargs)) in {f.name for f in fields(layer)})
    with pytest.raises(ConfigurationError, match=f"^{layer.__name__}" + message.removeprefix("Config")):
        layer(**kwargs)


def test_numbers_of_the_declared_kinds_are_kept_as_given():
    # an int where a float is declared is a number: kept as it is, so the saved settings do not change
    config = Config(deadline_s=60, min_context_score=1, bm25_weight=2, vector_weight=0, fusion=None)
    assert asdict(config)["deadline_s"] == 60 and type(asdict(config)["deadline_s"]) is int
    assert Config(vector_weight=None, fusion="rrf").vector_weight is None


def test_a_non_finite_weight_never_reaches_a_search(tiny_kb):
    with pytest.raises(ConfigurationError, match="SearchConfig.vector_weight = nan is not a finite number"):
        SearchConfig(vector_weight=float("nan"))
    assert len(tiny_kb.search("authentication timeout 2.3.1", k=3)) == 3


@pytest.mark.parametrize("kwargs, least", [
    ({"max_rounds": -1}, 1), ({"chunk_size": -1}, 50), ({"hnsw_m": -1}, 2), ({"candidates": -5}, 1),
    ({"rrf_k": -1}, 0), ({"token_budget": -1}, 0), ({"deadline_s": -0.5}, 0),
])
def test_a_negative_value_is_told_the_fields_own_least_value(kwargs, least):
    name, value = next(iter(kwargs.items()))
    with pytest.raises(ConfigurationError, match=rf"^Config\.{name} = {value} is negative; use a value >= {least}$"):
        Config(**kwargs)
    if least:  # the least value it names is accepted, one below it is not
        with pytest.raises(ConfigurationError, match=rf"^Config\.{name} = {least - 1} must be at least {least}$"):
            Config(**{name: least - 1, **({"chunk_overlap": 0} if name == "chunk_size" else {})})
        Config(**{name: least, **({"chunk_overlap": 0} if name == "chunk_size" else {})})


def test_sources_given_as_a_list_are_kept_as_a_tuple():
    listed, tupled = Config(sources=["vector", "web"]), Config(sources=("vector", "web"))
    assert listed.sources == ("vector", "web") and hash(listed) == hash(tupled) and listed == tupled
    assert asdict(listed) == asdict(tupled) and listed.run.sources == ("vector", "web")
    assert RunConfig(sources=["graph"]).sources == ("graph",) and hash(RunConfig(sources=["graph"]))
    saved = json.loads(json.dumps(asdict(listed)))  # a state file's "config" holds a list
    assert Config(**saved) == listed and hash(Config(**saved)) == hash(listed)


def test_the_front_is_declared_in_its_module_as_type_checkers_read_it():
    # a class statement with one annotated line a field, in the saved order: what mypy and editors see
    tree = ast.parse(inspect.getsource(agentic_rag.core._config))
    front = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Config")
    declared = [line.target.id for line in front.body if isinstance(line, ast.AnnAssign)]
    assert declared == list(asdict(Config())) == [f.name for f in fields(Config)]


def test_numpy_numbers_are_taken_as_plain_ones():
    import numpy as np

    config = Config(max_rounds=np.int64(2), min_faithfulness=np.float32(0.5), token_budget=np.int32(30_000))
    assert type(config.max_rounds) is int and type(config.min_faithfulness) is float and config.max_rounds == 2
    assert json.loads(json.dumps(asdict(config)))["token_budget"] == 30_000 and hash(config) is not None
    with pytest.raises(ConfigurationError, match="max_rounds = np.float64.2.0. is a float64, not an int"):
        Config(max_rounds=np.float64(2))
