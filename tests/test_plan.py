"""plan_strategy and first_hop_plan: how a vector round chooses its queries, from literal inputs."""
import pytest

from agentic_rag import SubQuery
from agentic_rag.steps._plan import first_hop_plan, plan_strategy


@pytest.mark.parametrize("route, vector_tried, strategy", [
    ("vector", False, "question"), ("vector", True, "rewrite"),
    ("multi_hop", False, "decompose"), ("multi_hop", True, "decompose")])
def test_plan_strategy_by_route_and_round(route, vector_tried, strategy):
    assert plan_strategy(route, vector_tried) == strategy


def test_a_first_hop_searches_the_question_then_its_sub_queries_shifted_past_it():
    question = "Where was the director of Quiet Harbor born?"
    chain = [SubQuery(query="director of Quiet Harbor"), SubQuery(query="where was he born", depends_on=[0])]
    plan, parts = first_hop_plan(question, chain)
    assert [(q.query, q.depends_on) for q in plan] == [(question, []), ("director of Quiet Harbor", []),
                                                        ("where was he born", [1])]
    assert parts == []                                                   # a chain: no part to cover apart
    items = [SubQuery(query="contract A penalty"), SubQuery(query="contract B penalty")]
    assert first_hop_plan("Compare A and B", items)[1] == ["contract A penalty", "contract B penalty"]
    assert first_hop_plan("Compare A and B", []) == ([SubQuery(query="Compare A and B")], [])
