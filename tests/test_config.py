import pytest

from agentic_rag import Config, ConfigurationError


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
