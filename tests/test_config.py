import copy
import pickle
from dataclasses import FrozenInstanceError, asdict, fields, replace

import pytest

from agentic_rag import Config, ConfigurationError, IndexConfig, KnowledgeBase, RunConfig, SearchConfig


@pytest.mark.parametrize("kwargs, message", [
    ({"chunk_size": 10}, "chunk_size"),
    ({"chunk_overlap": 900}, "chunk_overlap"),
    ({"bm25_weight": 0, "vector_weight": 0}, "both 0"),
    ({"bm25_b": 1.5}, "bm25_b"),
    ({"rrf_k": -1}, "negative"),
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


def test_the_layers_partition_the_fronts_fields_with_the_same_defaults():
    names = [[f.name for f in fields(layer)] for layer in LAYER_OF.values()]
    every = [name for layer in names for name in layer]
    assert len(every) == len(set(every)) and sorted(every) == sorted(f.name for f in fields(Config))
    front = Config()
    for attribute, layer in LAYER_OF.items():
        assert getattr(front, attribute) == layer()
        assert all(getattr(front, f.name) == f.default for f in fields(layer))


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


def test_each_layer_names_itself_and_the_bad_field():
    with pytest.raises(ConfigurationError, match=r"^IndexConfig\.chunk_size = 10 is too small"):
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
