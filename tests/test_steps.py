"""Every step alone, with ScriptedModel and literal inputs."""
import pytest

from agentic_rag import (
    CALCULATOR,
    Config,
    Evidence,
    KnowledgeBase,
    RouteDecision,
    ScriptedModel,
    SubQuery,
    Tool,
    ToolRegistry,
    call_tool,
    check_faithfulness,
    decompose_query,
    generate_answer,
    repair_answer,
    rewrite_query,
    route_query,
    vector_search,
    verify_citations,
    verify_sufficiency,
)
from agentic_rag.kb import Document
from agentic_rag.steps._search import pool_match, usable_filters

EVIDENCE_KEYS = Evidence.__required_keys__ | Evidence.__optional_keys__


def is_evidence(item: dict) -> bool:
    return Evidence.__required_keys__ <= set(item) <= EVIDENCE_KEYS


EVIDENCE = [
    {"id": "rn#0", "doc_id": "rn", "source": "rn.md", "title": "Release notes 2.3.1",
     "text": "Version 2.3.1 fixed the authentication timeout on 14 April 2026.", "kind": "passage"},
    {"id": "tk#0", "doc_id": "tk", "source": "t.jsonl:1", "title": "Ticket",
     "text": "Users saw an authentication failure after the session expired.", "kind": "passage"},
]


def test_route_rules_need_no_model():
    model = ScriptedModel()
    tools = ToolRegistry([CALCULATOR])
    assert route_query("你好", model, tools).route == "direct"
    assert route_query("Translate 'good morning' into French", model, tools).route == "direct"
    decision = route_query("What is 12*7+3?", model, tools)
    assert (decision.route, decision.tool, decision.arguments) == ("tool", "calculator", {"expression": "12*7+3"})
    assert route_query("What is 12*7+3?", model, tools, used_tools=("calculator",)).route == "vector"
    comparison = route_query("合同A和合同B的违约责任有什么区别？", model, tools)
    assert comparison.route == "multi_hop" and comparison.filters == {"type": ["contract"]}
    plain = route_query("When was version 2.3.1 released in 2026?", model, tools)
    assert plain.route == "vector" and plain.filters == {"date": {"gte": "2026-01-01", "lte": "2026-12-31"}}
    assert model.calls == []


def test_route_asks_the_model_only_when_rules_cannot_place_it():
    nested = "Who was the first president of the association which published the journal?"
    silent = ScriptedModel({})
    by_rule = route_query(nested, silent)  # no tool to weigh: a nested question is multi-hop, no call
    assert (by_rule.route, by_rule.by) == ("multi_hop", "rules") and silent.calls == []
    tools = ToolRegistry([CALCULATOR])     # with a tool the model may choose, the model routes it
    model = ScriptedModel({"route": [{"route": "multi_hop", "reason": "bridge"},
                                     {"route": "tool", "tool": "sql", "arguments": {}},
                                     {"route": "direct"}, "not json", "still not json"]})
    assert route_query(nested, model, tools).route == "multi_hop"
    unknown = route_query(nested, model, tools)
    assert unknown.route == "vector" and "unknown tool 'sql'" in unknown.reason
    assert route_query(nested, model, tools).route == "vector"          # a factual question never goes direct
    fallback = route_query(nested, model, tools)
    assert fallback.by == "fallback" and fallback.route == "vector"
    assert model.tasks() == ["route"] * 4


def test_route_sees_evidence_for_tool_arguments():
    lookup = Tool("lookup", "look up a code found in the evidence", fn=lambda code: f"code {code} ok",
                  patterns=(r"status",),
                  arguments=lambda q, evidence: ({"code": evidence[0]["text"].split()[-1]} if evidence else None))
    tools = ToolRegistry([lookup])
    assert route_query("What is the status?", ScriptedModel(), tools).route == "vector"
    decision = route_query("What is the status?", ScriptedModel(), tools, evidence=[{"text": "the code is X9"}])
    assert decision.route == "tool" and decision.arguments == {"code": "X9"}


def test_rewrite_never_returns_a_tried_query():
    model = ScriptedModel({"rewrite": [{"query": "login fixed 2.3.1"}, {"query": " Login  FIXED 2.3.1 "},
                                       "bad", "bad"]})
    assert rewrite_query("login fixed?", ["2.3.1"], [], EVIDENCE, model).query == "login fixed 2.3.1"
    assert rewrite_query("login fixed?", [], ["login fixed 2.3.1"], EVIDENCE, model) is None
    assert rewrite_query("login fixed?", [], [], EVIDENCE, model) is None      # invalid twice: no rewrite
    assert model.calls[0].inputs["missing"] == ["2.3.1"]


def test_decompose_dedupes_caps_and_remaps_dependencies():
    model = ScriptedModel({"decompose": [{"subqueries": [
        {"query": "already tried"}, {"query": "hop one"}, {"query": "hop two", "depends_on": [1]},
        {"query": "HOP ONE"}, {"query": "c"}, {"query": "d"}, {"query": "e"}, {"query": "f"}]}]})
    plan = decompose_query("q", ["Already  tried"], [], model, max_subqueries=4)
    assert [(s.query, s.depends_on) for s in plan.subqueries] == [
        ("hop one", []), ("hop two", [0]), ("c", []), ("d", [])]


def test_decompose_drops_dependencies_on_itself_and_later_queries():
    model = ScriptedModel({"decompose": [{"subqueries": [{"query": "a", "depends_on": [0, 1, -1]},
                                                         {"query": "b", "depends_on": [0, 1]}]}]})
    assert [s.depends_on for s in decompose_query("q", [], [], model).subqueries] == [[], [0]]


def test_cyclic_or_dangling_dependencies_run_as_they_are(search_kb):
    queries = [SubQuery(query="Acme founded", depends_on=[1]), SubQuery(query="Roadrunner", depends_on=[0, 1, 7])]
    outcome = vector_search(queries, search_kb, "Who founded Acme?", k=2)
    assert len(outcome.queries_run) == 2 and outcome.new_ids


@pytest.fixture
def search_kb():
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=0))
    kb.add_documents([
        Document("acme", "Acme Corporation makes the Roadrunner 3000 rocket skates.", title="Acme Corporation"),
        Document("founder", "Acme Corporation was founded by Wile Coyote in 1949.", title="Acme history"),
        Document("weather", "Rain is expected in Springfield tomorrow.", title="Weather"),
    ])
    return kb


def test_vector_search_grows_a_deduplicated_pool_ranked_against_the_question(search_kb):
    question = "Who founded the maker of the Roadrunner?"
    first = vector_search([SubQuery(query="Roadrunner 3000 maker")], search_kb, question, k=1)
    assert first.new_ids[0] == "acme#0" and first.queries_run == ["Roadrunner 3000 maker"]
    second = vector_search([SubQuery(query="Acme founded"), SubQuery(query="Roadrunner 3000 maker")], search_kb,
                           question, first.pool, k=2)
    ids = [item["id"] for item in second.pool]
    assert len(ids) == len(set(ids)) and "founder#0" in second.new_ids and "acme#0" not in second.new_ids
    assert all("relevance" in item and item["kind"] == "passage" and is_evidence(item) for item in second.pool)
    assert second.pool[0]["query"] in second.queries_run and second.pool[0]["rank"] >= 1
    assert second.pool[0]["relevance"] >= second.pool[-1]["relevance"]


def test_dependent_query_carries_the_bridge_name_from_its_hop(search_kb):
    queries = [SubQuery(query="Roadrunner 3000 rocket skates"), SubQuery(query="who founded it", depends_on=[0])]
    outcome = vector_search(queries, search_kb, "Who founded the maker?", k=2)
    assert outcome.queries_run[1].startswith("who founded it Acme Corporation")
    assert "founder#0" in outcome.round_ids


def test_filters_narrow_but_never_empty_a_search(search_kb):
    outcome = vector_search([SubQuery(query="Acme")], search_kb, "Acme", k=2, filters={"type": "none-such"})
    assert len(outcome.new_ids) == 2


def test_usable_filters_drop_what_the_knowledge_base_cannot_apply():
    kept, dropped = usable_filters({"date": {"near": "2026"}, "type": ["ticket"], "year": {"gte": 2024}})
    assert kept == {"type": ["ticket"], "year": {"gte": 2024}} and len(dropped) == 1 and "near" in dropped[0]
    assert usable_filters(None) == ({}, []) and usable_filters("ticket")[1] == ["filters must be an object, not str"]


def test_usable_filters_bound_a_model_made_filter_as_a_request_is():
    kept, dropped = usable_filters({"doc_id": {"gte": list(range(100_000))}, "type": "ticket"})
    assert kept == {"type": "ticket"} and "'gte' bound is a list" in dropped[0]
    kept, dropped = usable_filters({"doc_id": list(range(600)), "source": list(range(600))})  # each fine, not both
    assert kept == {} and dropped == ["the filters hold 1200 values (every field's value, list member and range "
                                      "bound counts); the limit is 1000: filter on fewer values"]
    assert usable_filters({f"f{i}": "x" for i in range(5_000)})[0] == {}


def test_call_tool_keeps_any_list_a_tool_returns_as_plain_evidence():
    odd = Tool("odd", "returns odd things", lambda: [1, {"title": 2, "text": None, "url": "u"}, "three"])
    items, error = call_tool(RouteDecision(route="tool", tool="odd"), ToolRegistry([odd]))
    assert error is None and [i["text"] for i in items] == ["1", "", "three"] and items[1]["title"] == "2"
    assert all(is_evidence(i) for i in items) and items[1]["source"] == "u" and [i["rank"] for i in items] == [1, 2, 3]


def test_call_tool_turns_results_into_evidence_and_records_errors():
    tools = ToolRegistry([CALCULATOR])
    items, error = call_tool(RouteDecision(route="tool", tool="calculator", arguments={"expression": "2*(3+4)"}), tools)
    assert error is None and items[0]["text"] == "2*(3+4) = 14" and items[0]["kind"] == "tool"
    assert items[0]["source"] == 'tool:calculator({"expression": "2*(3+4)"})'
    assert is_evidence(items[0]) and items[0]["relevance"] == 2.0 and "path" not in items[0]
    for decision, message in [(RouteDecision(route="tool", tool="sql"), "unknown tool 'sql'"),
                              (RouteDecision(route="tool", tool="calculator", arguments={"x": 1}), "bad arguments"),
                              (RouteDecision(route="tool", tool="calculator", arguments={"expression": "1/0"}),
                               "division by zero")]:
        items, error = call_tool(decision, tools)
        assert items == [] and message in error


def test_verify_settles_clear_cases_without_the_model():
    model = ScriptedModel()
    clear = verify_sufficiency("When was the authentication timeout fixed in version 2.3.1?", EVIDENCE, model)
    assert clear.sufficient and clear.by == "rules"
    hopeless = verify_sufficiency("Which warehouse ships bulky furniture?", EVIDENCE, model)
    assert not hopeless.sufficient and hopeless.by == "rules"
    assert model.calls == []


def test_verify_asks_the_model_when_unsure_and_falls_back_on_bad_output():
    question = "Was the authentication problem solved in the spring release?"
    model = ScriptedModel({"grade": [{"score": 0.7, "sufficient": False, "missing": []}, "bad", "bad"]})
    graded = verify_sufficiency(question, EVIDENCE, model, threshold=0.6)
    assert graded.by == "model" and graded.sufficient          # the threshold decides, not the model's flag
    fallback = verify_sufficiency(question, EVIDENCE, model)
    assert fallback.by == "fallback" and not fallback.sufficient


def test_generate_and_verify_citations():
    model = ScriptedModel({"generate": [{"answer": "It was fixed in 2.3.1 [1], see also [7]."}]})
    answer = generate_answer("Was it fixed?", EVIDENCE, model)
    text, citations, removed = verify_citations(answer.answer, EVIDENCE)
    assert text == "It was fixed in 2.3.1 [1], see also." and removed == [7]
    assert citations == [dict(EVIDENCE[0], n=1)]
    assert model.calls[0].inputs["evidence"] == EVIDENCE
    assert "[1] (Release notes 2.3.1)" in model.calls[0].messages[1]["content"]


def test_planted_unsupported_sentence_is_caught_and_repaired():
    answer = ("Version 2.3.1 fixed the authentication timeout on 14 April 2026. [1] "
              "It also added a dark mode for every user. [1]")
    model = ScriptedModel({"repair": [{"answer": answer + " And more padding."}]})
    verdict = check_faithfulness("Was the timeout fixed?", answer, EVIDENCE, model)
    assert verdict.score == 0.5 and verdict.unsupported == ["It also added a dark mode for every user. [1]"]
    assert verdict.by == "rules"
    repaired = repair_answer("Was the timeout fixed?", answer, verdict.unsupported, EVIDENCE, model)
    assert repaired.answer == "Version 2.3.1 fixed the authentication timeout on 14 April 2026. [1]"
    assert "longer" in repaired.reason


def test_unsure_sentences_go_to_the_judge():
    answer = "Version 2.3.1 fixed the session timeout for Windows users. [1]"   # partly supported
    model = ScriptedModel({"judge": [{"score": 0.0, "unsupported": [answer], "complete": True}]})
    verdict = check_faithfulness("Was it fixed?", answer, EVIDENCE, model)
    assert verdict.by == "model" and verdict.score == 0.0 and model.tasks() == ["judge"]


def _pool_kb(vector_weight: float) -> KnowledgeBase:
    from helpers import DenseHashing
    kb = KnowledgeBase(config=Config(vector_weight=vector_weight), embedder=DenseHashing())
    kb.add_documents([Document("a", "Rocket skates are sold by Acme."),
                      Document("b", "Acme rocket skates rocket skates, the rocket skates of Acme."),
                      Document("c", "Nothing about the question at all.")])
    return kb


def test_the_pool_is_matched_by_bm25_and_by_vectors_in_the_proportion_of_hybrid_search():
    question, ids = "Who sells rocket skates?", ["a#0", "b#0", "c#0"]
    lexical = _pool_kb(0.0)  # no vector weight: the BM25 score scaled to the pool's best, nothing else
    bm25 = lexical.bm25_scores(question, ids)
    assert pool_match(lexical, question, ids) == pytest.approx({i: bm25[i] / max(bm25.values()) for i in ids})
    kb = _pool_kb(3.0)       # vectors count three times BM25: 3/4 of the match is the similarity
    similar = kb.vector_scores(question, ids)
    low, high = min(similar.values()), max(similar.values())
    match = pool_match(kb, question, ids)
    assert match == pytest.approx({i: 0.25 * bm25[i] / max(bm25.values()) + 0.75 * (similar[i] - low) / (high - low)
                                   for i in ids})
    assert all(0.0 <= m <= 1.0 for m in match.values()) and match["c#0"] == min(match.values())



def test_a_judged_nested_answer_is_incomplete_while_a_hop_is_uncited():
    band = {"id": "m#0", "doc_id": "m", "source": "m.md", "title": "Maiden Japan", "kind": "passage",
            "text": "Maiden Japan is a live EP by the English heavy metal band Iron Maiden."}
    formed = {"id": "i#0", "doc_id": "i", "source": "i.md", "title": "Iron Maiden", "kind": "passage",
              "text": "Iron Maiden are an English heavy metal band formed in Leyton, East London, in 1975."}
    answer = "Iron Maiden started out in Leyton, a working-class district of East London. [2]"  # the judge decides
    model = ScriptedModel({"judge": [{"score": 1.0, "unsupported": [], "complete": True}]})
    verdict = check_faithfulness("Where did the band form that made the live album Maiden Japan?", answer,
                                 [band, formed], model)
    assert model.tasks() == ["judge"] and verdict.by == "model" and verdict.score == 1.0
    assert not verdict.complete and verdict.missing == ["hop 1: Maiden Japan"]
