"""What the user gets once an answer is final: its sources numbered 1..k in the order the answer
first cites them (the model cites evidence by its position in what it was shown), the same in the
saved state, the printed sources, the service's replies; and one line, in the question's language,
when the router wanted a tool this run has not got (the shop database without --db)."""
import json
import re

import pytest

from agentic_rag import (
    CALCULATOR,
    Config,
    ConfigurationError,
    KnowledgeBase,
    OfflineModel,
    ScriptedModel,
    format_trace,
    run_agentic_rag,
    shop_tools,
)
from agentic_rag.cli._display import _after_stream
from agentic_rag.kb import Document
from agentic_rag.steps import route_query
from agentic_rag.steps._answer import number_citations
from agentic_rag.tools import OffTool, ToolRegistry, shop_tools_off
from helpers import EXAMPLE_DATA, run

MARKER = re.compile(r"\[(\d+)\]")
SHOP_DB = EXAMPLE_DATA / "db" / "shop.sqlite"
FERRIES = [Document(f"ferry-{port}", f"The {port} ferry leaves at {hour}:00 every morning.", title=f"{port} ferry",
                    source=f"ferries/{port}.md") for port, hour in (("Hel", 7), ("Tal", 8), ("Sto", 9))]
FERRY_QUESTION = "When do the Hel, Tal and Sto ferries leave in the morning?"


class Cites:
    """A model (the Model protocol) that answers by quoting the shown evidence at `positions`, in
    that order, each marked with its position as an LLM writes it; other tasks go to the offline model."""

    name = "cites"

    def __init__(self, *positions: int):
        self.positions, self.offline = positions, OfflineModel()

    def complete(self, request):
        if request.task != "generate":
            return self.offline.complete(request)
        shown = request.inputs["evidence"]
        text = " ".join(f"{shown[p - 1]['text']} [{p}]" for p in self.positions)
        return request.schema.model_validate({"answer": text, "evidence_score": 0.9})


@pytest.fixture(scope="module")
def ferries():
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=0))
    kb.add_documents(FERRIES)
    return kb


def markers(text: str) -> list[int]:
    return [int(n) for n in MARKER.findall(text)]


def in_citation_order(answer: str, citations: list[dict]) -> bool:
    """Markers 1..k, each first seen after the one before, and one citation per number."""
    first = list(dict.fromkeys(markers(answer)))
    return first == list(range(1, len(first) + 1)) and [c["n"] for c in citations] == first


# -- numbering ------------------------------------------------------------------------------------


def test_number_citations_numbers_by_first_appearance_and_rewrites_every_marker():
    cited = [{"n": 1, "id": "a"}, {"n": 3, "id": "c"}]
    answer, citations = number_citations("C holds it. [3] A too. [1] Both say so. [3] [1]", cited)
    assert answer == "C holds it. [1] A too. [2] Both say so. [1] [2]"
    assert [(c["n"], c["id"]) for c in citations] == [(1, "c"), (2, "a")]
    assert number_citations("Only B. [2]", [{"n": 2, "id": "b"}]) == ("Only B. [1]", [{"n": 1, "id": "b"}])


def test_number_citations_leaves_an_uncited_answer_and_stray_markers_alone():
    assert number_citations("No sources here.", []) == ("No sources here.", [])
    assert number_citations("Refusal [7].", []) == ("Refusal [7].", [])
    assert number_citations("B [2] and x[9]", [{"n": 2}])[0] == "B [1] and x[9]"
    once = number_citations("C [3] A [1]", [{"n": 1}, {"n": 3}])
    assert number_citations(*once) == once   # numbered already: unchanged


def test_an_answer_citing_evidence_out_of_order_is_numbered_as_it_reads(ferries):
    probe = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1))
    shown = [e["doc_id"] for e in probe["evidence"]]
    assert in_citation_order(probe["answer"], probe["citations"]) and markers(probe["answer"]) == [1, 2]
    assert [c["doc_id"] for c in probe["citations"]] == [shown[2], shown[0]]
    assert probe["citations"][0]["text"] in probe["answer"].split("[1]")[0]   # [1] is the passage quoted first
    generated = next(e for e in probe["trace"] if e["step"] == "generate")
    assert markers(generated["detail"]["answer"]) == [3, 1]   # the trace keeps what the model wrote


def test_an_answer_citing_only_the_second_passage_cites_source_one(ferries):
    state = run_agentic_rag(FERRY_QUESTION, ferries, Cites(2))
    assert markers(state["answer"]) == [1] and [c["n"] for c in state["citations"]] == [1]
    assert state["citations"][0]["doc_id"] == state["evidence"][1]["doc_id"]
    assert markers(state["draft_answer"]) == [2] and not state["abstained"]


def test_a_stopped_and_resumed_run_is_numbered_once_like_a_whole_one(ferries):
    whole = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1))
    for step in ("route", "search", "generate"):
        stop = lambda event, state, step=step: "stop" if event["step"] == step else None  # noqa: E731
        paused = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1), on_step=stop)
        assert paused["stop_reason"] == "stopped" and paused["phase"] != "done"
        assert markers(paused["answer"]) in ([], [3, 1])   # a draft delivered before the checks: not numbered yet
        resumed = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1), state=json.loads(json.dumps(paused)))
        assert (resumed["answer"], resumed["citations"]) == (whole["answer"], whole["citations"])
    again = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1), state=json.loads(json.dumps(whole)))
    assert (again["answer"], again["citations"]) == (whole["answer"], whole["citations"])  # a done state stays


def test_a_hook_sees_the_last_event_with_the_answer_as_returned(ferries):
    seen: list[tuple[str, list]] = []
    state = run_agentic_rag(FERRY_QUESTION, ferries, Cites(3, 1),
                            on_step=lambda event, now: seen.append((now["answer"], now["citations"])))
    assert seen[-1] == (state["answer"], state["citations"]) and markers(state["answer"]) == [1, 2]


def test_the_service_replies_with_the_numbers_the_answer_uses(ferries):
    from agentic_rag.service import create_app
    from test_service import Server

    server = Server(create_app(Cites(3, 1), kb=ferries))
    try:
        status, _, reply = server.request("POST", "/v1/ask", {"question": FERRY_QUESTION})
        assert status == 200 and in_citation_order(reply["answer"], reply["citations"])
        assert markers(reply["answer"]) == [1, 2]
        status, _, chat = server.request("POST", "/v1/chat/completions", {
            "model": "agentic-rag", "messages": [{"role": "user", "content": FERRY_QUESTION}]})
        text = chat["choices"][0]["message"]["content"]
        listed = re.findall(r"^\[(\d+)\] (\S+ ferry)", text.split("Sources:")[1], re.M)
        assert [(int(n), title) for n, title in listed] == [(c["n"], c["title"]) for c in reply["citations"]]
    finally:
        server.close()


def test_the_printed_sources_match_the_markers_of_an_offline_answer(capsys, example_kb_dir):
    # the offline model cites the passages it quotes by their position in the evidence; an answer that
    # quotes the second passage before the first read "[2] ... [1]" before its numbers were given
    code, out, _ = run(capsys, "ask", "Does sync work offline?", "--kb", example_kb_dir, "--json")
    reply = json.loads(out)
    assert code == 0 and reply["citations"] and in_citation_order(reply["answer"], reply["citations"])
    code, out, _ = run(capsys, "ask", "Does sync work offline?", "--kb", example_kb_dir)
    answer, sources = out.split("\n\nSources:\n")[0], out.split("\n\nSources:\n")[1].split("\n\n")[0]
    assert list(dict.fromkeys(markers(answer))) == [int(n) for n in re.findall(r"^  \[(\d+)\]", sources, re.M)]


def test_after_a_streamed_draft_the_cli_says_what_changed():
    assert _after_stream("A. [1]", "A. [1]", []) == ""
    assert _after_stream("A. [1]\n(the database tool is off)", "A. [1]", ["(the database tool is off)"]) == \
        "\n(the database tool is off)"
    numbered = _after_stream("B. [1] A. [2]", "B. [2] A. [1]", [])
    assert "sources numbered as listed below" in numbered and numbered.endswith("B. [1] A. [2]")
    assert "the checks changed the draft" in _after_stream("B. [1]", "B. [2] A. [1]", [])


# -- a tool the router wants that this run has not got ----------------------------------------------


def test_the_registry_names_the_off_tool_select_would_have_picked():
    registry = ToolRegistry([CALCULATOR, *shop_tools_off()])
    assert registry.select("DK-200 还有库存吗？", []) is None and "stock" not in registry.tools
    assert registry.wanted_off("DK-200 还有库存吗？", []).name == "stock"
    assert registry.wanted_off("What is the status of order A1002?", []).name == "order_status"
    assert registry.wanted_off("还有库存吗？", []) is None             # no SKU: the tool would not apply
    assert registry.wanted_off("DK-200 还有库存吗？", [], ("stock",)) is None
    assert "run with --db FILE" in registry.off_note("stock", "Is DK-200 in stock?")
    assert "--db FILE" in registry.off_note("stock", "DK-200 还有库存吗？") and "库存" in registry.off_note(
        "stock", "DK-200 还有库存吗？")
    assert registry.off_note("weather", "How warm is it?") == "(no tool named 'weather' is available in this run)"
    with pytest.raises(ConfigurationError, match="two tools are named 'order_status'"):
        ToolRegistry([*shop_tools(SHOP_DB), *shop_tools_off()])


def test_route_query_names_a_wanted_tool_that_is_off_and_searches():
    off = ToolRegistry([CALCULATOR, *shop_tools_off()])
    decision = route_query("DK-200 还有库存吗？", OfflineModel(), off)
    assert decision.route == "vector" and decision.tool == "stock"
    assert route_query("退货政策是什么？", OfflineModel(), off).tool is None
    live = route_query("DK-200 还有库存吗？", OfflineModel(), ToolRegistry(shop_tools(SHOP_DB)))
    assert live.route == "tool" and live.tool == "stock"


def test_a_tool_the_model_router_chose_that_is_not_registered_is_named():
    model = ScriptedModel({"route": [{"route": "tool", "tool": "weather", "arguments": {"city": "Oslo"}}]})
    decision = route_query("What is the weather in the city where contract B was signed?", model,
                           ToolRegistry([CALCULATOR]))
    assert decision.route == "vector" and decision.tool == "weather" and decision.by == "fallback"


@pytest.mark.parametrize("question, note", [
    ("DK-200 还有库存吗？", "（数据库工具未开启：加上 --db FILE 运行才能查询实时库存）"),
    ("Is DK-200 in stock?", "(the database tool is off: run with --db FILE to query live stock)"),
])
def test_an_answer_without_the_database_says_the_tool_is_off(example_kb, question, note):
    state = run_agentic_rag(question, example_kb, OfflineModel(), [CALCULATOR, *shop_tools_off()])
    assert state["answer"].endswith("\n" + note) and state["answer"].count(note) == 1
    offs = [e for e in state["trace"] if e["summary"] == "tool:stock:off"]
    assert len(offs) == 1 and offs[0]["detail"]["note"] == note and "tool:stock:off" in format_trace(state)
    assert not state["used_tools"]
    with_db = run_agentic_rag(question, example_kb, OfflineModel(), [CALCULATOR, *shop_tools(SHOP_DB)])
    assert "DK-200" in with_db["answer"] and not any(w in with_db["answer"] for w in ("tool is off", "未开启"))


def test_a_refusal_says_the_tool_is_off_too(example_kb):
    state = run_agentic_rag("What is the status of order A1002?", example_kb, OfflineModel(), shop_tools_off())
    assert state["answer"].endswith("\n(the database tool is off: run with --db FILE to look up live orders)")


def test_a_question_that_wants_no_tool_gets_no_note(example_kb):
    state = run_agentic_rag("退货政策是什么？", example_kb, OfflineModel(), shop_tools_off())
    assert "未开启" not in state["answer"] and not any(e["summary"].endswith(":off") for e in state["trace"])


def test_an_off_tool_the_user_declares_is_reported_the_same_way(example_kb):
    weather = OffTool("weather", {"en": "(the weather tool is off)"}, (r"\bweather\b",),
                      lambda question, evidence: {"city": "Oslo"} if "Oslo" in question else None)
    state = run_agentic_rag("What is the weather in Oslo today?", example_kb, OfflineModel(), [weather])
    assert state["answer"].endswith("\n(the weather tool is off)")


def test_ask_without_db_says_so_and_with_db_answers_from_the_database(capsys, example_kb_dir):
    code, out, _ = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", example_kb_dir)
    assert code == 0 and "（数据库工具未开启：加上 --db FILE 运行才能查询实时库存）" in out and "tool:stock:off" in out
    code, out, _ = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", example_kb_dir, "--stream")
    assert code == 0 and out.count("数据库工具未开启") == 1 and "checked answer" not in out
    code, out, _ = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", example_kb_dir, "--db", str(SHOP_DB), "--json")
    reply = json.loads(out)
    assert "available to order" in reply["answer"] and "未开启" not in reply["answer"]
