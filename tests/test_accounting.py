import pytest

from agentic_rag.core import _accounting as accounting


def test_counts_with_the_offline_cl100k_encoding():
    assert accounting.count_tokens("hello world") == 2
    assert accounting.count_tokens("") == 0


def test_falls_back_to_an_estimate_with_a_warning(monkeypatch):
    import tiktoken

    def unavailable(name):
        raise ValueError(f"no encoding file for {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)   # as when the encoding file is missing offline
    with pytest.warns(RuntimeWarning, match="estimates"):
        assert accounting.count_tokens("abcdefgh 你好") == 2 + 3  # two CJK characters + ceil(7 / 4)


def test_cost_from_the_price_table():
    assert accounting.cost_usd("m", 1_000_000, 500_000, {"m": (2.0, 8.0)}) == pytest.approx(6.0)
    assert accounting.cost_usd("offline", 10_000, 10_000) == 0.0


def test_new_usage_lives_in_accounting_and_models_still_exports_it():
    import agentic_rag.models as models
    from agentic_rag.models import _meter

    usage = accounting.new_usage()
    assert usage == {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
                     "overshoot_tokens": 0, "counted_prompt_tokens": 0, "counted_completion_tokens": 0,
                     "reported_prompt_tokens": 0, "reported_completion_tokens": 0, "invalid_usage": [], "by_task": {}}
    assert usage is not accounting.new_usage() and models.new_usage is _meter.new_usage is accounting.new_usage
