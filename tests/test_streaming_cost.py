"""Streaming costs no extra model call: a run asked with `on_token` makes the calls the same run
makes without it. An unsure grade still comes in the answer's reply (folded); that reply is handed to
`on_token` whole once its grade stands, and an answer to evidence the deterministic check settled
streams as the model writes it. Offline, and against a real OpenAI-protocol server on 127.0.0.1."""
import json

import pytest

from agentic_rag import Endpoint, KnowledgeBase, OfflineModel, OpenAIChatModel, format_trace, run_agentic_rag
from agentic_rag.kb import Document
from openai_server import FakeOpenAI

ANSWER = "The warehouse ships orders paid before 15:00 the same day. [1]"
UNSURE = "When do orders paid on weekends ship?"                     # the rules cannot settle it: graded by the model
SETTLED = "When does the warehouse ship orders paid before 15:00?"  # every key term is in the passage: no grade call


@pytest.fixture(scope="module")
def warehouse():
    kb = KnowledgeBase()
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse")])
    return kb


def calls_by_task(state) -> dict:
    """Calls and tokens per task (not their milliseconds, which no two runs share)."""
    return {task: (n["calls"], n["prompt_tokens"], n["completion_tokens"])
            for task, n in state["usage"]["by_task"].items()}


def both_ways(question, kb, model_for):
    """The run without on_token and with it (a fresh model each), and the pieces handed over."""
    plain = run_agentic_rag(question, kb, model_for())
    pieces: list[str] = []
    streamed = run_agentic_rag(question, kb, model_for(), on_token=pieces.append)
    return plain, streamed, pieces


@pytest.mark.parametrize("question", ["登录报错的问题在 2.3.1 版本里修复了吗？", "合同A和合同B的违约责任有什么区别？",
                                      "DK-200 还有库存吗？"])
def test_the_offline_model_costs_the_same_calls_streamed_or_not(example_kb, question):
    plain, streamed, pieces = both_ways(question, example_kb, OfflineModel)
    assert streamed["usage"]["model_calls"] == plain["usage"]["model_calls"]
    assert calls_by_task(streamed) == calls_by_task(plain)
    assert format_trace(streamed) == format_trace(plain) and streamed["answer"] == plain["answer"]
    assert pieces == [streamed["draft_answer"]]   # it cannot stream: its answer comes whole, once


def test_an_unsure_grade_still_comes_with_the_offline_answer_when_streaming(tiny_kb):
    plain, streamed, pieces = both_ways(UNSURE, tiny_kb, OfflineModel)
    assert format_trace(streamed).startswith("route:vector -> search:shipping") and "verify:? -> generate" in \
        format_trace(streamed)                       # unsure, so the answer's reply carried the grade
    assert "grade" not in streamed["usage"]["by_task"] and calls_by_task(streamed) == calls_by_task(plain)
    assert pieces == [streamed["draft_answer"]]


def served_model(server: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("small-model", Endpoint(base_url=server.url, api_key=None, timeout=5, max_retries=0))


def hosted(question, kb, replies, on_token=None):
    """One run against a fresh scripted server: the state and the chat requests it received."""
    with FakeOpenAI(dim=16) as server:
        server.chat.extend(replies)
        state = run_agentic_rag(question, kb, served_model(server), on_token=on_token)
        return state, server.chat_requests()


def test_a_streaming_model_with_an_unsure_grade_makes_one_graded_call_streamed_or_not(warehouse):
    graded = json.dumps({"answer": ANSWER, "evidence_score": 0.9, "missing": []})
    plain, plain_calls = hosted(UNSURE, warehouse, [graded])
    pieces: list[str] = []
    streamed, streamed_calls = hosted(UNSURE, warehouse, [graded], pieces.append)
    assert len(streamed_calls) == len(plain_calls) == 1 == streamed["usage"]["model_calls"]
    assert streamed["usage"]["by_task"].keys() == {"generate"}   # no grade call of its own
    assert not streamed_calls[0].get("stream") and "evidence_score" in json.dumps(streamed_calls[0])
    assert pieces == [ANSWER] and streamed["answer"] == plain["answer"] == ANSWER   # whole, once it stands
    assert format_trace(streamed) == format_trace(plain)


def test_a_streaming_model_streams_an_answer_its_evidence_settled_at_the_same_cost(warehouse):
    plain, plain_calls = hosted(SETTLED, warehouse, [json.dumps({"answer": ANSWER})])
    pieces: list[str] = []
    streamed, streamed_calls = hosted(SETTLED, warehouse, [ANSWER], pieces.append)  # streamed as plain text
    assert "verify:1.00" in format_trace(streamed)
    assert len(streamed_calls) == len(plain_calls) == 1 == streamed["usage"]["model_calls"]
    assert streamed_calls[0]["stream"] is True and len(pieces) > 3 and "".join(pieces) == ANSWER
    assert streamed["answer"] == plain["answer"] == ANSWER
