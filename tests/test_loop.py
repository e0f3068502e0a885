"""The loop: routing and every stop condition as a table, hooks and resume, threads, a golden trace,
and the reference scenarios, offline."""
import json
import threading

import pytest

from agentic_rag import (
    CALCULATOR,
    STOP_REASONS,
    Config,
    ConfigurationError,
    DeadlineExceeded,
    KnowledgeBase,
    ModelError,
    OfflineModel,
    RetrievalError,
    ScriptedModel,
    Tool,
    format_trace,
    new_state,
    run_agentic_rag,
)
from agentic_rag.kb import Document
from agentic_rag.loop import answer_notes
from helpers import ROOT

GOLDEN = ROOT / "tests" / "golden" / "login_2_3_1.json"
SUPPORTED = "工作日 15:00 之前付款的订单当天发货。 [1]"
MIDDLE = {"score": 0.5, "sufficient": False, "missing": ["x"]}
Q2 = "When do orders paid on weekends ship?"  # the shipping rules hold part of it: the grade is left to the model


def scripted(**replies):
    """A scripted model whose unqueued tasks give middling, valid replies."""
    return ScriptedModel(replies, default={"grade": MIDDLE, "generate": {"answer": SUPPORTED},
                                           "judge": {"score": 1.0, "complete": True},
                                           "rewrite": {"query": "仓库 发货 规则"}, "decompose": {"subqueries": []},
                                           "route": {"route": "vector"}})


def test_simple_question_costs_one_generation_and_at_most_one_judgement(tiny_kb):
    model = scripted()
    state = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb, model)
    assert state["stop_reason"] == "sufficient" and state["round"] == 1 and not state["abstained"]
    assert state["answer"] == SUPPORTED and state["citations"][0]["doc_id"] == "shipping"
    assert model.tasks().count("generate") == 1 and len(model.calls) <= 2
    assert "rewrite" not in format_trace(state)


STOPS = [
    # (question, config changes, scripted replies, expected stop_reason, abstained)
    ("工作日 15:00 之前付款的订单什么时候发货？", {}, {}, "sufficient", False),
    ("hello", {}, {}, "direct", False),
    (Q2, {"max_rounds": 1}, {}, "max_rounds", False),
    (Q2, {"token_budget": 400}, {}, "token_budget", True),
    (Q2, {},
     {"grade": [{"score": 0.1, "sufficient": False}] * 3}, "low_confidence", True),
    (Q2, {"sources": ("vector",)},
     {"rewrite": [{"query": "weekend orders paid ship"}]}, "converged", False),
    (Q2, {"deadline_s": 0}, {}, "deadline", True),
    (Q2, {"sources": ("vector",)},
     {"rewrite": [{"query": Q2}]}, "exhausted", False),
    (Q2, {},
     {"generate": [ModelError("the server answered 500 three times")]}, "error", True),
    ("When do Globex orders ship?", {}, {}, "unmentioned", True),  # no document mentions Globex
]


@pytest.mark.parametrize("question, changes, replies, stop_reason, abstained", STOPS,
                         ids=[row[3] for row in STOPS])
def test_every_stop_reason_is_reachable(tiny_kb, question, changes, replies, stop_reason, abstained):
    state = run_agentic_rag(question, tiny_kb, scripted(**replies), config=Config(**changes))
    assert state["stop_reason"] == stop_reason
    assert state["abstained"] is abstained and state["phase"] == "done"
    json.dumps(state)  # serialisable at the end of every kind of run
    if abstained and stop_reason != "error":
        assert state["abstain_reason"] and "does not hold" in state["answer"]
    if stop_reason == "error":
        assert "500" in state["error"] and state["trace"][-1]["step"] == "error"
        assert state["answer"] == "" and state["citations"] == [] and "500" in state["abstain_reason"]


def test_the_table_reaches_every_documented_stop_reason():
    # "stopped" is a hook's: test_a_hook_stops_the_run_and_the_state_resumes_it
    assert {row[3] for row in STOPS} | {"stopped"} == set(STOP_REASONS)


def test_converged_run_rewrote_once_and_found_nothing_new(tiny_kb):
    state = run_agentic_rag(STOPS[5][0], tiny_kb, scripted(**STOPS[5][2]), config=Config(sources=("vector",)))
    assert state["rewrites"] == 1 and state["rounds"][-1]["converged"]
    assert "rewrite" in format_trace(state)


def test_a_hook_stops_the_run_and_the_state_resumes_it(tiny_kb):
    question = Q2
    whole = run_agentic_rag(question, tiny_kb, OfflineModel())
    seen = []

    def stop_after_verify(event, state):
        json.dumps(state)
        seen.append(event["step"])
        return "stop" if event["step"] == "verify" else None

    paused = run_agentic_rag(question, tiny_kb, OfflineModel(), on_step=stop_after_verify)
    assert paused["stop_reason"] == "stopped" and paused["phase"] != "done" and seen[-1] == "verify"
    saved = json.loads(json.dumps(paused))          # as if stored and loaded again
    resumed = run_agentic_rag(question, tiny_kb, OfflineModel(), state=saved)
    assert resumed["answer"] == whole["answer"] and resumed["stop_reason"] == whole["stop_reason"]
    assert format_trace(resumed) == format_trace(whole)
    two_rounds = "Which release changed the sign-in page?"                      # needs a second round by default
    assert run_agentic_rag(two_rounds, tiny_kb, OfflineModel())["round"] == 2
    one_round = run_agentic_rag(two_rounds, tiny_kb, OfflineModel(), config=Config(max_rounds=1),
                                on_step=stop_after_verify)
    finished = run_agentic_rag(two_rounds, tiny_kb, OfflineModel(), state=json.loads(json.dumps(one_round)))
    assert finished["round"] == 1 and finished["stop_reason"] == "max_rounds"   # resumed with its own settings


def test_bad_input_is_a_clear_error_or_a_recorded_event(tiny_kb):
    with pytest.raises(ConfigurationError, match="empty"):
        run_agentic_rag("   ", tiny_kb, OfflineModel())
    with pytest.raises(ConfigurationError, match="quarter of the token budget"):
        new_state("word " * 400, Config(token_budget=1000))
    with pytest.raises(RetrievalError, match="empty"):
        run_agentic_rag("anything?", KnowledgeBase(), OfflineModel())
    model = scripted(route=["not json", "still not json"])
    state = run_agentic_rag("Who was the president of the company which built the sign-in page of 2_3_0?",
                            tiny_kb, model, [CALCULATOR])  # a tool to weigh: the model routes the nested question
    route = state["trace"][0]
    assert route["detail"]["by"] == "fallback" and "fallback" in route["detail"]["reason"]
    assert state["phase"] == "done"


def test_unsupported_answer_is_repaired_or_abstained(tiny_kb):
    planted = SUPPORTED + " 周末也照常发货并且免运费。 [1]"
    state = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb,
                            scripted(generate=[{"answer": planted}], repair=[{"answer": SUPPORTED}]))
    assert state["draft_answer"] == planted and state["answer"] == SUPPORTED and state["repairs"] == 1
    assert "repair" in format_trace(state)
    hopeless = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb,
                               scripted(generate=[{"answer": "火星上的仓库每天发货三次。 [1]"}],
                                        repair=[{"answer": "火星上的仓库每天发货三次。 [1]"}]))
    assert hopeless["abstained"] and "not supported" in hopeless["abstain_reason"]


def test_a_failure_after_generation_returns_no_answer_and_keeps_the_draft(tiny_kb):
    planted = SUPPORTED + " 周末也照常发货并且免运费。 [1]"     # an unsupported sentence: the check asks for a repair
    state = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb,
                            scripted(generate=[{"answer": planted}], repair=[ModelError("repair call: HTTP 503")]))
    assert state["stop_reason"] == "error" and state["error"] == "ModelError: repair call: HTTP 503"
    assert state["answer"] == "" and state["citations"] == [] and state["abstained"] is True
    assert "the run failed" in state["abstain_reason"] and "HTTP 503" in state["abstain_reason"]
    assert state["draft_answer"] == planted and state["trace"][-1]["step"] == "error"
    json.dumps(state)


def test_a_call_the_deadline_cut_off_ends_the_run_with_deadline_not_error(tiny_kb):
    import time

    planted = SUPPORTED + " 周末也照常发货并且免运费。 [1]"     # the check asks for a repair: the deadline cuts it
    model = scripted(generate=[{"answer": planted}],
                     repair=[DeadlineExceeded("the repair call to x was cut off by the run's deadline")])
    started = time.monotonic()
    state = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb, model, config=Config(deadline_s=300))
    assert state["stop_reason"] == "deadline" and state["error"] is None and state["abstained"]
    assert state["abstain_reason"] == "the deadline of 300 s passed: the repair call to x was cut off by the run's " \
                                      "deadline" and state["draft_answer"] == planted
    assert format_trace(state).endswith(" -> generate -> faithfulness:0.50 -> abstain"), format_trace(state)
    assert state["trace"][-1]["step"] == "abstain" and state["usage"]["by_task"]["repair"]["calls"] == 1
    assert all(started + 300 <= call.deadline <= time.monotonic() + 300 for call in model.calls)  # the run's, each
    json.dumps(state)


def test_golden_trace_of_the_reference_question(example_kb, request):
    state = run_agentic_rag("登录报错的问题在 2.3.1 版本里修复了吗？", example_kb, OfflineModel())
    observed = {"answer": state["answer"], "stop_reason": state["stop_reason"], "trace": format_trace(state),
                "citations": [c["id"] for c in state["citations"]],
                "evidence": [e["id"] for e in state["evidence"][:8]],
                "model_calls": state["usage"]["model_calls"], "prompt_tokens": state["usage"]["prompt_tokens"],
                "completion_tokens": state["usage"]["completion_tokens"]}
    if request.config.getoption("--update-golden"):
        GOLDEN.write_text(json.dumps(observed, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert observed == json.loads(GOLDEN.read_text(encoding="utf-8")), "rerun with --update-golden if intended"


def test_scenario_versions_and_synonyms(example_kb):
    state = run_agentic_rag("登录报错的问题在 2.3.1 版本里修复了吗？", example_kb, OfflineModel())
    assert "release-notes/nimbus-2.3.1.md" in [c["doc_id"] for c in state["citations"]]
    unversioned = run_agentic_rag("登录报错的问题修复了吗？", example_kb, OfflineModel())
    tickets = [e for e in unversioned["evidence"] if e["doc_id"].startswith("NT-") and "认证失败" in e["text"]]
    assert tickets and not unversioned["abstained"]


def test_scenario_contract_comparison_is_decomposed(example_kb):
    state = run_agentic_rag("合同A和合同B的违约责任有什么区别？", example_kb, OfflineModel())
    assert state["route"]["route"] == "multi_hop" and "decompose:2" in format_trace(state)
    cited = {c["doc_id"] for c in state["citations"]}
    assert {"contracts/contract-a.md", "contracts/contract-b.md"} <= cited


def test_scenario_unanswerable_question_abstains_and_says_why(example_kb):
    state = run_agentic_rag("Does Nimbus have an Android app?", example_kb, OfflineModel())
    assert state["abstained"] and state["citations"] == []
    assert "does not hold" in state["answer"] and "Searched for" in state["answer"]


def test_scenario_tools(example_kb, example_tools):
    arithmetic = run_agentic_rag("12*7+3等于多少？", example_kb, OfflineModel(), example_tools)
    assert arithmetic["route"]["tool"] == "calculator" and "87" in arithmetic["answer"]
    order = run_agentic_rag("订单 A1002 的状态是什么？", example_kb, OfflineModel(), example_tools)
    assert order["route"]["route"] == "tool" and "processing" in order["answer"]
    assert order["citations"][0]["kind"] == "database"


QUESTIONS = ["登录报错的问题在 2.3.1 版本里修复了吗？", "合同A和合同B的违约责任有什么区别？", "仓库的截单时间是几点？",
             "Does Nimbus have an Android app?", "What does the Team plan cost per member?", "DK-200 还有库存吗？",
             "退货政策是什么？", "How long are deleted notes kept in the trash?"]


def test_scenario_eight_threads_each_cite_only_their_own_evidence(example_kb, example_tools):
    alone = {q: run_agentic_rag(q, example_kb, OfflineModel(), example_tools) for q in QUESTIONS}
    together, errors = {}, []
    model = OfflineModel()  # one model shared by every thread, as in a service

    def ask(question):
        try:
            together[question] = run_agentic_rag(question, example_kb, model, example_tools)
        except Exception as exc:  # any exception here is a failure of isolation
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for question, state in together.items():
        assert state["question"] == question and state["answer"] == alone[question]["answer"]
        own = {e["id"] for e in state["evidence"]}
        assert {c["id"] for c in state["citations"]} <= own


def test_a_failing_tool_is_recorded_and_the_loop_goes_on(tiny_kb):
    from agentic_rag import CALCULATOR

    model = scripted(route=[{"route": "tool", "tool": "calculator", "arguments": {"formula": "1+1"}}])
    question = "Who approved the budget of the team which shipped the orders paid on weekends?"
    state = run_agentic_rag(question, tiny_kb, model, [CALCULATOR])
    tool_events = [e for e in state["trace"] if e["step"] == "tool"]
    assert tool_events and tool_events[0]["summary"] == "tool:calculator:error"
    assert "bad arguments" in state["rounds"][0]["error"]
    assert state["used_tools"] == ["calculator"] and state["phase"] == "done"
    assert any(e["step"] == "search" for e in state["trace"])     # it went on to search


# A corpus where every round can find something new: a search of 3 hits finds the weekend rule,
# the business-day rule and the depot; the graph walks from Harbor Depot on to its carrier; a
# rewrite finds the rules page, a decomposition the carrier; a web tool (no patterns, so never
# routed to as a tool) adds a page of its own. The scripted grade stays at 0.4: above the
# low-confidence floor, below sufficient, and names what is missing, so only max_rounds ends the run.
ROUTES_DOCS = [
    Document("weekend", "Orders paid on weekends ship on Monday from Harbor Depot.", title="Weekend orders"),
    Document("depot", "Harbor Depot hands its parcels to Atlas Freight.", title="Depot"),
    Document("freight", "Atlas Freight collects at noon on business days.", title="Carrier"),
    Document("rules", "Warehouse rules: weekend ship rules follow the carrier calendar.", title="Rules"),
    Document("business", "Business day orders leave the same day.", title="Business days"),
    Document("pricing", "The Team plan costs 8 USD per member and month.", title="Pricing"),
]
Q3 = "When do orders paid on weekends leave Harbor Depot?"
WEB = Tool("web_search", "search the web", kind="web",
           fn=lambda query: [{"title": "Carrier blog", "url": "https://example.test/weekend",
                              "text": "Orders paid on weekends ship on Monday from Harbor Depot."}])
FIRST = (Q3, 3)                      # (queries, new passages) of each kind of round
GRAPH, WEB_ROUND = (f"graph: {Q3}", 1), (f"web: {Q3}", 1)
REWRITE, DECOMPOSE = ("weekend ship rules", 1), ("business day orders", 1)
REROUTES = [
    # (configured sources, tools, [(source, query, new passages) of each round])
    (("vector", "graph", "web"), [WEB], [("vector",) + FIRST, ("graph",) + GRAPH, ("web",) + WEB_ROUND]),
    (("vector", "graph", "web"), [], [("vector",) + FIRST, ("graph",) + GRAPH, ("vector",) + REWRITE]),  # no web tool
    (("graph", "vector"), [], [("vector",) + FIRST, ("graph",) + GRAPH, ("vector",) + REWRITE]),  # first: what suits
    (("vector",), [], [("vector",) + FIRST, ("vector",) + REWRITE, ("vector",) + DECOMPOSE]),
]


@pytest.fixture(scope="module")
def routes_kb():
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=20))
    kb.add_documents(ROUTES_DOCS)
    return kb


@pytest.mark.parametrize("sources, tools, rounds", REROUTES,
                         ids=["+".join(r[0]) + ("+web tool" if r[1] else "") for r in REROUTES])
def test_low_grades_reroute_to_the_next_untried_source(routes_kb, sources, tools, rounds):
    # each round brings a passage that holds something the grade names as missing (else it would stall)
    missing = ["carrier calendar", "collection at noon", "carrier blog"]
    low = [{"score": 0.4, "sufficient": False, "missing": missing}] * 3
    model = scripted(grade=low, rewrite=[{"query": "weekend ship rules"}],
                     decompose=[{"subqueries": [{"query": "business day orders"}]}],
                     generate=[{"answer": "Orders paid on weekends ship on Monday from Harbor Depot. [1]"}] * 2)
    state = run_agentic_rag(Q3, routes_kb, model, tools, config=Config(sources=sources, search_k=3))
    assert [(r["source"], r["queries"], r["new"], r["converged"], r["grade"]) for r in state["rounds"]] == \
        [(source, [query], new, False, 0.4) for source, query, new in rounds]
    assert state["sources_tried"] == list(dict.fromkeys(source for source, _, _ in rounds))
    assert state["stop_reason"] == "max_rounds" and not state["abstained"]      # 0.4 is above answer_floor
    # the first reply drafted without a grade, so grades were asked apart from then on; the last round answered
    assert model.tasks().count("grade") == 3 and model.tasks().count("generate") == 2


def test_a_round_that_brings_nothing_the_grade_lacked_stalls_without_a_call(routes_kb):
    low = {"answer": "Orders paid on weekends ship on Monday from Harbor Depot. [1]", "evidence_score": 0.4,
           "missing": ["public holidays"]}  # no passage holds it: no later round can bring it
    model = scripted(generate=[low])
    state = run_agentic_rag(Q3, routes_kb, model, config=Config(sources=("vector", "graph"), search_k=3))
    assert format_trace(state).endswith("verify:0.40 -> route:vector@graph -> graph:freight -> verify:stalled "
                                        "-> generate:kept -> faithfulness:1.00")
    assert state["rounds"][-1]["stalled"] and state["rounds"][-1]["grade"] == 0.4
    assert state["stop_reason"] == "converged" and model.tasks().count("generate") == 1
    assert "freight#0" not in [e["id"] for e in state["evidence"]]  # the graded evidence stands as it was


def test_every_source_tried_and_nothing_left_is_exhausted(tiny_kb):
    question = "Who made the Pricing page of 2.3.0?"          # a relationship question: the graph first
    config = Config(sources=("vector", "graph"), max_rounds=5, answer_when_exhausted=False)
    state = run_agentic_rag(question, tiny_kb, scripted(grade=[{"score": 0.4, "sufficient": False}] * 5,
                                                        rewrite=[{"query": question}]), config=config)
    assert [(r["source"], r.get("exhausted", False)) for r in state["rounds"]] == \
        [("graph", False), ("vector", False), ("vector", True)]  # the third round found no query left to try
    assert state["stop_reason"] == "exhausted" and state["abstained"]
    answered = run_agentic_rag(question, tiny_kb, scripted(grade=[{"score": 0.4, "sufficient": False}] * 5,
                                                           rewrite=[{"query": question}],
                                                           generate=[{"answer": "New sign-in page in 2_3_0. [1]"}] * 2),
                               config=Config(sources=("vector", "graph"), max_rounds=5))
    assert answered["stop_reason"] == "exhausted" and not answered["abstained"]   # answers from what it has
    assert "decompose:0 -> generate" in format_trace(answered)


def test_relationship_question_answered_through_the_graph(example_kb):
    state = run_agentic_rag("哪份合同的乙方是深圳星河包装材料有限公司？", example_kb, OfflineModel())
    assert state["route"]["source"] == "graph" and format_trace(state).startswith("route:vector@graph -> graph:")
    assert state["citations"] and state["citations"][0]["doc_id"] == "contracts/contract-b.md"
    graph_event = next(e for e in state["trace"] if e["step"] == "graph")
    assert ["深圳星河包装材料有限公司", "供货合同 B（Supply contract B）"] in graph_event["detail"]["paths"].values()



def test_a_pagerank_round_follows_the_names_of_the_passages_found_so_far():
    kb = KnowledgeBase()
    kb.add_documents([Document("film", "The film Quiet Harbor was directed by Anna Berg in 2019.",
                               title="Quiet Harbor"),
                      Document("berg", "Anna Berg was raised in Tromsø and studied in Oslo.", title="Anna Berg")]
                     + [Document(f"born{i}", f"Where was the harbor pilot number {i} born? Nobody knows.")
                        for i in range(4)])
    question = "Where was the director of Quiet Harbor born?"
    model = scripted(grade=[{"score": 0.4, "sufficient": False}] * 2,
                     generate=[{"answer": "Anna Berg was raised in Tromsø. [1]"}] * 2)
    state = run_agentic_rag(question, kb, model, config=Config(sources=("vector", "pagerank"), search_k=2,
                                                                max_rounds=2))
    assert [r["source"] for r in state["rounds"]] == ["vector", "pagerank"]
    assert "route:vector@pagerank -> pagerank:berg" in format_trace(state)
    event = next(e for e in state["trace"] if e["step"] == "pagerank")
    assert "berg#0" in event["detail"]["new"] and state["rounds"][1]["queries"] == [f"pagerank: {question}"]
    with pytest.raises(ConfigurationError, match="give some of 'vector', 'graph', 'pagerank', 'web'"):
        Config(sources=("vector", "walk"))


Q1 = "工作日 15:00 之前付款的订单什么时候发货？"


def test_a_huge_reply_is_cut_off_and_the_run_stays_within_its_budget(tiny_kb):
    huge = {"answer": SUPPORTED + " " + "x " * 2_500_000}                 # 5 MB of text
    state = run_agentic_rag(Q1, tiny_kb, scripted(generate=[huge]))
    usage = state["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= Config().token_budget
    assert usage["by_task"]["generate"]["completion_tokens"] == Config().max_completion_tokens
    assert state["abstained"] and "cut off" in state["abstain_reason"] and state["phase"] == "done"


def test_a_budget_stop_reads_token_budget_whatever_the_grade_said(tiny_kb):
    state = run_agentic_rag(Q1, tiny_kb, scripted(), config=Config(token_budget=300))
    assert state["grade"]["sufficient"]                                    # the evidence sufficed ...
    assert state["stop_reason"] == "token_budget" and state["abstained"]  # ... but generation had no room
    assert state["usage"]["prompt_tokens"] + state["usage"]["completion_tokens"] <= 300


@pytest.mark.parametrize("reply", [{"score": 3, "sufficient": True}, {"foo": 1}, "not json", [1, 2]],
                         ids=["out of range", "wrong schema", "invalid json", "not an object"])
def test_a_reply_that_breaks_the_schema_falls_back_and_is_metered(tiny_kb, reply):
    state = run_agentic_rag(Q2, tiny_kb, scripted(grade=[reply, reply]))
    verify = next(e for e in state["trace"] if e["step"] == "verify" and "by" in e["detail"])  # after "verify:?"
    assert verify["detail"]["by"] == "fallback" and state["phase"] == "done" and state["stop_reason"] != "error"
    assert state["usage"]["by_task"]["grade"]["calls"] >= 1 and verify["tokens"] > 0


NESTED = "Who was the president of the company which built the sign-in page of 2_3_0?"   # nested: with a tool
# registered the model routes it (with none, the rules send it multi_hop)


def test_a_filter_with_an_invented_operator_is_dropped_and_traced(tiny_kb):
    route = {"route": "vector", "filters": {"date": {"near": "2026"}, "type": "release_note"}}
    state = run_agentic_rag(NESTED, tiny_kb, scripted(route=[route], repair=[{"answer": ""}]), [CALCULATOR])
    dropped = next(e for e in state["trace"] if e["step"] == "filters")
    assert dropped["summary"] == "filters:-1" and "near" in dropped["detail"]["dropped"][0]
    assert any(e["step"] == "search" for e in state["trace"]) and state["stop_reason"] != "error"


def test_a_tools_own_type_error_is_a_tool_failure_and_the_loop_reroutes(tiny_kb):
    from agentic_rag import Tool

    calls = []

    def lookup(sku: str) -> str:
        calls.append(sku)
        return len(sku) + "units"                                          # a bug inside the tool: TypeError

    tool = Tool("lookup", "stock by SKU", lookup, patterns=(r"DK-\d+",), arguments=lambda q, e: {"sku": "DK-200"})
    state = run_agentic_rag("Is DK-200 in stock at the warehouse?", tiny_kb, scripted(), [tool])
    error = state["rounds"][0]["error"]
    assert "lookup failed: TypeError" in error and "bad arguments" not in error
    assert calls == ["DK-200"] and state["used_tools"] == ["lookup"]      # not used again
    assert any(e["step"] == "search" for e in state["trace"]) and state["phase"] == "done"


def test_a_tool_whose_argument_finder_raises_is_traced_and_not_used_again(tiny_kb):
    from agentic_rag import Tool

    def arguments(question, evidence):
        raise KeyError("sku")

    tool = Tool("lookup", "stock by SKU", lambda sku: "3 units", patterns=(r"DK-\d+",), arguments=arguments)
    state = run_agentic_rag("Is DK-200 in stock at the warehouse?", tiny_kb, scripted(), [tool])
    failures = [e for e in state["trace"] if e["summary"] == "tool:lookup:error"]
    assert len(failures) == 1 and "KeyError" in failures[0]["detail"]["error"]
    assert state["used_tools"] == ["lookup"] and state["phase"] == "done" and state["stop_reason"] != "error"


class BrokenSearch(KnowledgeBase):
    def search(self, *args, **kwargs):
        raise IndexError("index 9 is out of bounds")


def test_an_unexpected_exception_ends_the_run_with_error_and_returns_the_state(tiny_docs):
    kb = BrokenSearch()
    kb.add_documents(tiny_docs)
    state = run_agentic_rag(Q2, kb, scripted())
    assert state["stop_reason"] == "error" and state["phase"] == "done"
    assert state["error"] == "IndexError: index 9 is out of bounds" and state["trace"][-1]["step"] == "error"
    json.dumps(state)
    crashing = run_agentic_rag(Q2, kb, ScriptedModel(default={"grade": RuntimeError("model library bug")}))
    assert crashing["stop_reason"] == "error"


def test_input_errors_raise_before_the_run_starts(tiny_kb):
    with pytest.raises(ConfigurationError, match="Config"):
        run_agentic_rag(Q2, tiny_kb, OfflineModel(), config={"max_rounds": 2})
    with pytest.raises(ConfigurationError, match="not a model"):
        run_agentic_rag(Q2, tiny_kb, "gpt-4o")
    with pytest.raises(ConfigurationError, match="max_completion_tokens"):
        run_agentic_rag(Q2, tiny_kb, OfflineModel(), config=Config(max_completion_tokens=0))


def test_stop_condition_holds_every_stop_in_its_order(tiny_kb):
    from agentic_rag.loop import Run, stop_condition
    from agentic_rag.models import Meter
    from agentic_rag.tools import ToolRegistry

    config = Config(max_rounds=3, token_budget=1000)
    run = Run(tiny_kb, Meter(OfflineModel(), config.token_budget), ToolRegistry(()), config, deadline=100.0)
    state = new_state("q", config)
    insufficient = {"score": 0.4, "sufficient": False}
    assert stop_condition(state, run, now=0.0) is None
    assert stop_condition(dict(state, phase="verify", round=9), run, now=999.0) is None  # only a round's start stops
    cases = [  # (changes to the state, the clock, the reason); each row also meets every condition below it
        ({"rounds": [{"exhausted": True, "converged": True}], "low_rounds": 2, "round": 3}, 999.0, "exhausted"),
        ({"rounds": [{"converged": True}], "low_rounds": 2, "round": 3, "grade": insufficient}, 999.0,
         "low_confidence"),
        ({"rounds": [{"converged": True}], "round": 3, "grade": insufficient}, 999.0, "converged"),
        ({"rounds": [{"converged": True}], "round": 3, "grade": {"score": 0.9, "sufficient": True}}, 999.0,
         "max_rounds"),
        ({"rounds": [{"converged": True, "incomplete_answer": True}], "round": 2, "grade": insufficient}, 999.0,
         "deadline"),  # the answer asked for another round: convergence no longer stops, the clock does
    ]
    for changes, now, reason in cases:
        assert stop_condition(dict(state, **changes), run, now) == reason, reason
    run.meter.usage["prompt_tokens"] = 1000
    assert run.meter.tokens_used >= 1000 and stop_condition(state, run, 0.0) == "token_budget"


def test_an_unsure_check_is_graded_in_the_answers_reply_at_linears_price(tiny_kb):
    model = scripted(generate=[{"answer": SUPPORTED, "evidence_score": 0.8, "missing": []}])
    state = run_agentic_rag(Q2, tiny_kb, model)  # the deterministic check is unsure about Q2
    assert format_trace(state).endswith("verify:? -> generate -> verify:0.80 -> faithfulness:1.00")
    assert state["stop_reason"] == "sufficient" and state["grade"]["by"] == "with the answer"
    assert model.tasks() == ["generate"] or model.tasks() == ["generate", "judge"]  # linear's call, at most one more


def test_a_low_grade_in_the_answers_reply_sends_the_run_on_and_a_stop_keeps_the_draft(tiny_kb):
    low = {"answer": SUPPORTED, "evidence_score": 0.4, "missing": ["weekend"], "grade_reason": "no weekend rule"}
    model = scripted(generate=[low])
    state = run_agentic_rag(Q2, tiny_kb, model, config=Config(max_rounds=1))
    assert format_trace(state).endswith("verify:? -> generate -> verify:0.40 -> generate:kept -> faithfulness:1.00")
    assert state["stop_reason"] == "max_rounds" and state["answer"] == (  # the answer says its grade
        f"{SUPPORTED}\n(Quoted from the closest passages found, which may not answer this: evidence score 0.40, "
        "sufficient at 0.60.)")
    assert model.tasks().count("generate") == 1 and "grade" not in model.tasks()
    refused = run_agentic_rag(Q2, tiny_kb, scripted(generate=[dict(low, evidence_score=0.1)]),
                              config=Config(max_rounds=1))
    assert refused["abstained"] and "no weekend rule" in refused["abstain_reason"]  # the folded grade may refuse


def test_a_models_set_with_its_own_grader_keeps_grading_apart(tiny_kb):
    from agentic_rag import ModelSet

    grader = scripted(grade=[{"score": 0.9, "sufficient": True}])
    writer = scripted(generate=[{"answer": SUPPORTED, "evidence_score": 0.1}])
    state = run_agentic_rag(Q2, tiny_kb, ModelSet(writer, grade=grader))
    assert grader.tasks() == ["grade"] and writer.tasks()[0] == "generate"  # the writer's own score is not asked
    assert state["stop_reason"] == "sufficient" and "verify:0.90 -> generate" in format_trace(state)


def test_a_multi_hop_round_searches_the_bridge_name_without_a_model_call():
    kb = KnowledgeBase()
    kb.add_documents([Document("film", "The film Quiet Harbor was directed by Anna Berg in 2019.",
                               title="Quiet Harbor"),
                      Document("berg", "Anna Berg was born in Tromsø and studied in Oslo.", title="Anna Berg"),
                      Document("other", "Many directors were born in Bergen, a city of festivals.", title="Bergen")])
    question = "Where was the person born who directed the film Quiet Harbor?"   # nested: multi_hop
    state = run_agentic_rag(question, kb, OfflineModel(), config=Config(search_k=1))  # one hit a search
    bridge = next(e for e in state["trace"] if e["step"] == "bridge")
    assert "Anna Berg" in bridge["detail"]["names"] and "berg#0" in bridge["detail"]["new"] and bridge["tokens"] == 0
    assert "Tromsø" in state["answer"] and "berg" in [c["doc_id"] for c in state["citations"]]
    assert "bridge" not in state["usage"]["by_task"]


def test_an_unusable_folded_score_keeps_the_answer_and_is_graded_apart(tiny_kb):
    model = scripted(generate=[{"answer": SUPPORTED, "evidence_score": 8}], grade=[{"score": 0.9, "sufficient": True}])
    state = run_agentic_rag(Q2, tiny_kb, model)
    assert state["answer"] == SUPPORTED and state["stop_reason"] == "sufficient"
    assert model.tasks()[:2] == ["generate", "grade"]


def test_a_kept_draft_outlives_an_exhausted_round_and_is_used_once(tiny_kb):
    low = {"answer": SUPPORTED, "evidence_score": 0.4}
    model = scripted(generate=[low], rewrite=[{"query": Q2}])  # the rewrite repeats the question: nothing left
    state = run_agentic_rag(Q2, tiny_kb, model, config=Config(sources=("vector",)))
    assert state["stop_reason"] == "exhausted" and "generate:kept" in format_trace(state)
    assert model.tasks().count("generate") == 1 and state["draft_for"] == []   # used up


def test_a_resumed_run_keeps_its_separate_grader(tiny_kb):
    from agentic_rag import ModelSet

    stop_at_unsure = lambda event, state: "stop" if event["summary"] == "verify:?" else None  # noqa: E731
    stopped = run_agentic_rag(Q2, tiny_kb, scripted(), on_step=stop_at_unsure)
    assert stopped["stop_reason"] == "stopped" and stopped["phase"] == "generate"
    grader = scripted(grade=[{"score": 0.1, "sufficient": False}])
    writer = scripted(generate=[{"answer": SUPPORTED, "evidence_score": 0.9}])
    resumed = run_agentic_rag(Q2, tiny_kb, ModelSet(writer, grade=grader), state=stopped,
                              config=Config(max_rounds=1))
    assert grader.tasks()[0] == "grade" and resumed["abstained"]  # the grader's 0.1, not the writer's 0.9


def test_the_graph_declares_every_phase_and_only_phases_it_runs():
    from agentic_rag.loop import GRAPH
    from agentic_rag.loop._state import PHASES

    assert set(GRAPH) == set(PHASES) - {"done"}
    for phase, declared in GRAPH.items():
        assert declared.may_return and declared.may_return <= set(PHASES), phase


def test_the_loop_page_shows_the_graph_and_the_tool_phase_as_they_read():
    import ast
    import inspect

    from agentic_rag.loop import _graph, _tool

    page = (ROOT / "docs" / "concepts" / "loop.md").read_text(encoding="utf-8")
    graph = inspect.getsource(_graph)
    assert graph[graph.index("GRAPH: dict[str, Phase] = {"):graph.index("\n}\n") + 3] in page
    lines = inspect.getsource(_tool.tool).splitlines(keepends=True)
    docstring = ast.parse("".join(lines)).body[0].body[0]   # the page shows the phase without it
    assert "".join(lines[:docstring.lineno - 1] + lines[docstring.end_lineno:]) in page


def test_an_undeclared_transition_ends_the_run_with_an_error_naming_both_phases(tiny_kb, monkeypatch):
    from agentic_rag.loop import GRAPH, Phase

    # search may go to verify or route only
    monkeypatch.setitem(GRAPH, "search", Phase(lambda state, run, patch: "check", GRAPH["search"].may_return))
    state = run_agentic_rag(Q2, tiny_kb, scripted())
    assert state["stop_reason"] == "error" and state["phase"] == "done" and state["abstained"]
    assert "TransitionError" in state["error"] and "'search' returned 'check'" in state["error"]
    assert "may go to route, verify" in state["error"] and state["trace"][-1]["step"] == "error"
    assert "'search' returned 'check'" in state["trace"][-1]["detail"]["message"]


TEAM = "Compare the Team plan price and the annual billing discount"     # a comparison: parts to cover
EDGE_RUNS = [  # (question, model, tools, config changes): together they take every declared edge
    (Q2, OfflineModel, (), {}),                                                        # verify:? -> grade -> check
    ("工作日 15:00 之前付款的订单什么时候发货？", OfflineModel, (), {}),  # a sure grade: verify -> generate
    ("hello", OfflineModel, (), {}),                                                   # direct: generate -> done
    ("What is 12*7+3?", OfflineModel, (CALCULATOR,), {}),                              # route -> tool -> generate
    ("Is there a mobile app for phones?", OfflineModel, (), {}),                       # low: stall, settle abstains
    ("Does Nimbus have an Android app?", OfflineModel, (), {}),                        # unmentioned: route -> done
    ("Which release changed the sign-in page?", OfflineModel, (), {}),                 # graded low: grade -> route
    (Q2, lambda: scripted(generate=[{"answer": "", "evidence_score": 0.9}]), (), {}),  # grade -> done (no answer)
    (Q2, lambda: scripted(rewrite=[{"query": Q2}]), (), {"sources": ("vector",)}),     # nothing left: exhausted
    (TEAM, lambda: scripted(decompose=[{"subqueries": [{"query": "Team plan price"}, {"query": "unicorn stables"}]}],
                            generate=[{"answer": "The Team plan costs 8 USD per member and month. [1]",
                                       "evidence_score": 0.9}], repair=[{"answer": ""}]), (), {}),  # check -> route
    ("Who approved the budget of the team which shipped the orders paid on weekends?",
     lambda: scripted(route=[{"route": "tool", "tool": "calculator", "arguments": {"formula": "1+1"}}]),
     (CALCULATOR,), {}),                                                               # the tool fails: route
]


def _watch_handlers(monkeypatch, watch):
    """Every handler of GRAPH, and settle (which runs in route's place when a round may not start),
    wrapped by watch(phase, handler)."""
    from agentic_rag.loop import GRAPH, Phase
    from agentic_rag.loop import _driver as driver

    for phase, declared in list(GRAPH.items()):
        monkeypatch.setitem(GRAPH, phase, Phase(watch(phase, declared.handle), declared.may_return))
    monkeypatch.setattr(driver, "settle", watch("route", driver.settle))


def _edge_runs(tiny_kb):
    """The runs of EDGE_RUNS, a resume that may not fold its grade and a follow-up: every declared edge."""
    from agentic_rag import ModelSet

    for question, model, tools, changes in EDGE_RUNS:
        assert run_agentic_rag(question, tiny_kb, model(), list(tools), config=Config(**changes))["error"] is None
    stop_at_unsure = lambda event, state: "stop" if event["summary"] == "verify:?" else None  # noqa: E731
    stopped = run_agentic_rag(Q2, tiny_kb, scripted(), on_step=stop_at_unsure)
    run_agentic_rag(Q2, tiny_kb, ModelSet(scripted(), grade=scripted()), state=stopped)  # generate -> verify
    run_agentic_rag("And in 2.4?", tiny_kb, OfflineModel(), history=[{"role": "user", "content": Q2}])  # condense


def test_every_declared_edge_is_taken(tiny_kb, monkeypatch):
    from agentic_rag.loop import GRAPH

    taken = set()

    def watched(phase, handler):
        def run_phase(state, run, patch, *stop):  # settle also takes the stop
            taken.add((phase, result := handler(state, run, patch, *stop)))
            return result
        return run_phase

    _watch_handlers(monkeypatch, watched)
    _edge_runs(tiny_kb)
    assert taken == {(phase, target) for phase, declared in GRAPH.items() for target in declared.may_return}


def _read_only(written, called):
    """A watch for _watch_handlers that takes the state's whole text (repr: every key, value, type and
    order, nested) before each handler and settle runs and again after, whether it returns or raises,
    and notes in `written` each one whose state changed."""
    def watch(phase, handler):
        def run_phase(state, run, patch, *stop):
            before = repr(state)
            called.add(phase)
            try:
                return handler(state, run, patch, *stop)
            finally:
                if repr(state) != before:
                    written.append(phase)
        return run_phase
    return watch


def test_only_the_driver_changes_the_state(tiny_kb, monkeypatch):
    """A handler reads the state and puts its changes in the patch: over runs that take every edge, and
    every stop (a handler stopped by the budget, the deadline or a failure mid-phase included), no
    handler changes the state it is given; and a state holds exactly the keys AgentState declares."""
    from agentic_rag.loop import GRAPH, STATE_KEYS

    written, called = [], set()
    _watch_handlers(monkeypatch, _read_only(written, called))
    _edge_runs(tiny_kb)
    for question, changes, replies, _, _ in STOPS:
        state = run_agentic_rag(question, tiny_kb, scripted(**replies), config=Config(**changes))
        assert set(state) == STATE_KEYS
    assert written == [] and called == set(GRAPH)


def test_the_read_only_check_catches_a_handler_that_writes(tiny_kb, monkeypatch):
    from agentic_rag.loop import GRAPH, Phase

    for phase, write in [("route", lambda state: state.update(round=state["round"] + 1)),   # a key set
                         ("search", lambda state: state["queries_tried"].append("x")),     # a list grown in place
                         ("verify", lambda state: state["rounds"][-1].update(grade=0.5))]:  # a nested dict
        handle = GRAPH[phase].handle

        def writes(state, run, patch, handle=handle, write=write):
            write(state)
            return handle(state, run, patch)

        with monkeypatch.context() as patched:
            patched.setitem(GRAPH, phase, Phase(writes, GRAPH[phase].may_return))
            written, called = [], set()
            _watch_handlers(patched, _read_only(written, called))
            run_agentic_rag(Q2, tiny_kb, scripted())
        assert written and written[0] == phase, phase


def test_a_patch_refuses_a_key_the_state_does_not_declare(tiny_kb, monkeypatch):
    from agentic_rag.loop import GRAPH, Patch, Phase

    with pytest.raises(KeyError, match="trace_line, which AgentState does not declare"):
        Patch().set(trace_line="route -> search")
    with pytest.raises(KeyError, match="trace_line"):
        Patch({"trace_line": ""})

    def undeclared(state, run, patch):
        patch.set(notes="a key of its own")
        return "verify"

    monkeypatch.setitem(GRAPH, "search", Phase(undeclared, GRAPH["search"].may_return))
    state = run_agentic_rag(Q2, tiny_kb, scripted())
    assert state["stop_reason"] == "error" and "notes" not in state and "notes, which AgentState" in state["error"]


def test_a_hook_may_stop_between_the_draft_and_its_folded_grade(tiny_kb):
    whole = run_agentic_rag(Q2, tiny_kb, OfflineModel())
    at_draft = lambda event, state: "stop" if event["step"] == "generate" else None  # noqa: E731
    stopped = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=at_draft)
    assert stopped["phase"] == "grade" and stopped["draft_reply"]["answer"] == stopped["draft_answer"]
    resumed = run_agentic_rag(Q2, tiny_kb, OfflineModel(), state=json.loads(json.dumps(stopped)))
    assert format_trace(resumed) == format_trace(whole) and resumed["answer"] == whole["answer"]
    assert resumed["draft_reply"] is None and not resumed["grade_pending"]


def test_a_grade_phase_resumed_with_on_token_streams_its_answer(tiny_kb):
    at_draft = lambda event, state: "stop" if event["step"] == "generate" else None  # noqa: E731
    stopped = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=at_draft)
    assert stopped["phase"] == "grade"
    tokens = []
    resumed = run_agentic_rag(Q2, tiny_kb, OfflineModel(), state=json.loads(json.dumps(stopped)),
                              on_token=tokens.append)
    assert resumed["answer"] and "".join(tokens) == stopped["draft_answer"]
    assert resumed["trace"][-2]["detail"]["by"] == "with the answer"   # streamed runs fold the grade too
    assert resumed["usage"]["model_calls"] == run_agentic_rag(Q2, tiny_kb, OfflineModel())["usage"]["model_calls"]


@pytest.mark.parametrize("stop_at", ["verify", "generate"])
def test_a_run_with_its_own_grader_asks_it_wherever_the_state_stopped(tiny_kb, stop_at):
    from agentic_rag import ModelSet

    folded = {"answer": SUPPORTED, "evidence_score": 0.9}
    stopped = run_agentic_rag(Q2, tiny_kb, scripted(generate=[folded]),
                              on_step=lambda event, state: "stop" if event["step"] == stop_at else None)
    assert stopped["phase"] == {"verify": "generate", "generate": "grade"}[stop_at]
    assert stop_at == "verify" or stopped["draft_reply"]["evidence_score"] == 0.9
    grader = scripted(grade=[{"score": 0.1, "sufficient": False}])
    writer = scripted(generate=[folded])
    resumed = run_agentic_rag(Q2, tiny_kb, ModelSet(writer, grade=grader), state=stopped, config=Config(max_rounds=1))
    assert grader.tasks() == ["grade"] and resumed["abstained"]   # the grader's 0.1, not the writer's 0.9
    assert format_trace(resumed).endswith("verify:0.10 -> abstain") and resumed["grade"]["score"] == 0.1
    whole = run_agentic_rag(Q2, tiny_kb, ModelSet(scripted(generate=[folded]), grade=scripted(
        grade=[{"score": 0.1, "sufficient": False}])), config=Config(max_rounds=1))
    assert format_trace(whole).endswith("verify:0.10 -> abstain")   # as the run never stopped
    assert (resumed["answer"], resumed["stop_reason"]) == (whole["answer"], whole["stop_reason"])


@pytest.mark.parametrize("name", ["loop-pending-grade", "loop-kept-draft"])
def test_a_state_saved_with_the_old_round_markers_resumes_as_it_did(tiny_kb, name):
    saved = json.loads((ROOT / "tests" / "fixtures" / "saved" / f"{name}.json").read_text(encoding="utf-8"))
    resumed = run_agentic_rag(saved["question"], tiny_kb, OfflineModel(), state=saved["state"])
    notes = "".join(f"\n{note}" for note in answer_notes(resumed))  # lines this version adds below answers
    observed = {"answer": resumed["answer"].removesuffix(notes), "trace": format_trace(resumed),
                "stop_reason": resumed["stop_reason"],
                "citations": [c["id"] for c in resumed["citations"]], "abstained": resumed["abstained"],
                "model_calls": resumed["usage"]["model_calls"], "round": resumed["round"]}
    assert observed == saved["expected"]
    assert not any("drafted" in r or r.get("grade", 0) is None for r in resumed["rounds"])


def test_a_state_in_an_unknown_phase_is_refused_before_the_run(tiny_kb):
    state = dict(new_state(Q2), phase="answer")
    with pytest.raises(ConfigurationError, match="'answer' is none of condense, route, search"):
        run_agentic_rag(Q2, tiny_kb, OfflineModel(), state=state)


def _no_grade_in_the_reply():
    """A model whose replies never carry the grade asked for with the answer."""
    return ScriptedModel(default={
        "grade": {"score": 0.4, "sufficient": False, "missing": ["carrier calendar", "collection at noon"]},
        "generate": {"answer": "Orders paid on weekends ship on Monday from Harbor Depot. [1]"},
        "judge": {"score": 1.0, "complete": True}, "route": {"route": "vector"},
        "rewrite": {"query": "weekend ship rules"}, "decompose": {"subqueries": [{"query": "business day orders"}]}})


def test_a_resumed_run_remembers_that_grading_went_apart(routes_kb):
    cfg = Config(sources=("vector",), search_k=3)
    model = _no_grade_in_the_reply()
    whole = run_agentic_rag(Q3, routes_kb, model, config=cfg)
    assert whole["fold_grades"] is False and model.tasks().count("generate") == 2
    graded_apart = lambda event, state: "stop" if event["summary"] == "verify:0.40" else None  # noqa: E731
    stopped = run_agentic_rag(Q3, routes_kb, _no_grade_in_the_reply(), config=cfg, on_step=graded_apart)
    assert stopped["fold_grades"] is False
    resumed_model = _no_grade_in_the_reply()
    resumed = run_agentic_rag(Q3, routes_kb, resumed_model, state=json.loads(json.dumps(stopped)))
    assert format_trace(resumed) == format_trace(whole)
    assert [resumed["usage"][k] for k in ("model_calls", "prompt_tokens", "completion_tokens")] == \
        [whole["usage"][k] for k in ("model_calls", "prompt_tokens", "completion_tokens")]
    assert resumed_model.tasks().count("generate") == 1   # the last round's answer; no draft asked to grade


def test_an_empty_direct_reply_abstains():
    kb = KnowledgeBase()
    kb.add_documents([Document("a", "Some text.")])
    state = run_agentic_rag("hello", kb, ScriptedModel(default={"route": {"route": "direct"},
                                                                "generate": {"answer": ""}}))
    assert state["abstained"] and state["answer"].startswith("The knowledge base does not hold")
    assert state["abstain_reason"] == "the direct reply was empty" and state["stop_reason"] == "direct"
    assert format_trace(state) == "route:direct -> generate -> abstain"


@pytest.mark.parametrize("answer", [0, 0.0, None, "", "go on", True])
def test_only_false_or_stop_from_a_hook_stops_the_run(tiny_kb, answer):
    state = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=lambda event, state: answer)
    assert state["stop_reason"] != "stopped" and state["phase"] == "done"


def test_a_hook_that_raises_ends_the_run_with_error_and_keeps_the_state(tiny_kb):
    def hook(event, state):
        if event["step"] == "verify":
            raise ValueError("the hook's own bug")

    state = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=hook)
    assert state["stop_reason"] == "error" and state["phase"] == "done" and state["abstained"]
    assert state["error"] == "the on_step hook raised ValueError: the hook's own bug"
    assert state["trace"][-1]["step"] == "error" and "the hook's own bug" in state["trace"][-1]["detail"]["message"]
    json.dumps(state)


def test_a_question_other_than_the_states_is_refused(tiny_kb):
    stopped = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=lambda event, state: "stop")
    for question in ("Something else?", ""):
        with pytest.raises(ConfigurationError, match="is not the state's"):
            run_agentic_rag(question, tiny_kb, OfflineModel(), state=stopped)


def test_settings_given_on_resume_are_kept_in_the_state(tiny_kb):
    from agentic_rag import RunConfig

    stopped = run_agentic_rag(Q2, tiny_kb, OfflineModel(), on_step=lambda event, state: "stop")
    resumed = run_agentic_rag(Q2, tiny_kb, OfflineModel(), state=stopped, config=Config(max_rounds=1),
                              on_step=lambda event, state: "stop")
    assert resumed["config"]["max_rounds"] == 1 and resumed["config"] == new_state(Q2, Config(max_rounds=1))["config"]
    with_run = run_agentic_rag(Q2, tiny_kb, OfflineModel(), state=stopped, config=RunConfig(max_rounds=2))
    assert with_run["config"]["max_rounds"] == 2 and with_run["config"]["chunk_size"] == stopped["config"]["chunk_size"]


def test_a_run_config_is_taken_and_other_settings_are_refused(tiny_kb):
    from agentic_rag import IndexConfig, RunConfig

    state = run_agentic_rag(Q2, tiny_kb, OfflineModel(), config=RunConfig(max_rounds=1))
    assert state["config"]["max_rounds"] == 1 and state["error"] is None
    for bad in ({"max_rounds": 2}, IndexConfig()):
        with pytest.raises(ConfigurationError, match="Config or RunConfig"):
            run_agentic_rag(Q2, tiny_kb, OfflineModel(), config=bad)


def test_a_stalled_round_goes_to_verify_which_keeps_the_grade(routes_kb):
    low = {"answer": "Orders paid on weekends ship on Monday from Harbor Depot. [1]", "evidence_score": 0.4,
           "missing": ["public holidays"]}
    after_search = lambda event, state: "stop" if event["step"] == "graph" else None  # noqa: E731
    cfg = Config(sources=("vector", "graph"), search_k=3)
    stopped = run_agentic_rag(Q3, routes_kb, scripted(generate=[low]), config=cfg, on_step=after_search)
    assert stopped["phase"] == "verify" and stopped["rounds"][-1]["stalled"] and "grade" not in stopped["rounds"][-1]
    model = scripted()
    resumed = run_agentic_rag(Q3, routes_kb, model, state=stopped)
    assert format_trace(resumed).endswith("graph:freight -> verify:stalled -> generate:kept -> faithfulness:1.00")
    assert "grade" not in model.tasks() and resumed["rounds"][-1]["grade"] == 0.4
