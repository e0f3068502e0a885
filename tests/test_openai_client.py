"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 (tests/openai_server.py)."""
import json

import numpy as np
import pytest

from agentic_rag import (
    Answer,
    BudgetExceeded,
    Config,
    ConfigurationError,
    DeadlineExceeded,
    Endpoint,
    Grade,
    KnowledgeBase,
    Meter,
    ModelError,
    ModelOutputError,
    ModelRequest,
    ModelSet,
    OfflineModel,
    OpenAIChatModel,
    OpenAIEmbedder,
    endpoint_from_env,
    format_trace,
    run_agentic_rag,
)
from agentic_rag.kb import Document
from agentic_rag.kb.embedders._openai import openai_embedder_name, parse_openai_embedder_name
from agentic_rag.models._meter import margin
from agentic_rag.models._protocol import budget_tokens, prompt_tokens, shown
from agentic_rag.steps import verify_sufficiency
from openai_server import FakeOpenAI, vector

GRADE = json.dumps({"score": 0.8, "sufficient": True, "missing": []})


@pytest.fixture
def server():
    with FakeOpenAI(dim=16) as fake:
        yield fake


def chat(server, **kwargs):
    endpoint = Endpoint(base_url=server.url, api_key=kwargs.pop("api_key", None), timeout=kwargs.pop("timeout", 5),
                        max_retries=kwargs.pop("max_retries", 2))
    return OpenAIChatModel("small-model", endpoint, **kwargs)


def request(task="grade", schema=Grade):
    return ModelRequest(task=task, messages=[{"role": "user", "content": "grade this"}], inputs={}, schema=schema)


def test_structured_reply_with_json_schema_and_task_temperature(server):
    server.chat.extend([GRADE, json.dumps({"answer": "x [1]"})])
    model = chat(server, api_key="sk-test")
    assert model.complete(request()).score == 0.8
    assert model.complete(request("generate", Answer)).answer == "x [1]"
    first, second = server.chat_requests()
    assert first["response_format"]["type"] == "json_schema" and first["temperature"] == 0.0
    assert first["response_format"]["json_schema"]["schema"]["title"] == "Grade"
    assert second["temperature"] == 0.2
    assert server.requests[0]["authorization"] == "Bearer sk-test"


def test_falls_back_to_json_mode_then_text_when_the_server_refuses(server):
    refuse = {"status": 400, "body": {"error": {"message": "response_format json_schema is not supported"}}}
    server.chat.extend([refuse, refuse, "Here you go: " + GRADE, GRADE])
    model = chat(server)
    assert model.complete(request()).score == 0.8
    assert model.complete(request()).score == 0.8
    formats = [r.get("response_format", {}).get("type") for r in server.chat_requests()]
    assert formats == ["json_schema", "json_object", None, None]     # the mode it found sticks


def test_rate_limit_is_retried_after_the_servers_pause(server):
    server.chat.extend([{"status": 429, "headers": {"retry-after-ms": "10"}}, GRADE])
    assert chat(server).complete(request()).score == 0.8
    assert len(server.chat_requests()) == 2


def test_server_errors_until_retries_run_out_are_one_clear_error(server):
    server.chat.extend([{"status": 500, "headers": {"retry-after-ms": "5"}}] * 3)
    with pytest.raises(ModelError, match=r"the grade call to small-model failed at .* with HTTP 500"):
        chat(server, max_retries=2).complete(request())
    assert len(server.chat_requests()) == 3


def test_retries_follow_the_servers_headers_as_the_sdk_does(server):
    import email.utils
    import time

    soon = email.utils.formatdate(time.time() + 1, usegmt=True)     # a date: at most a second from now
    server.chat.extend([{"status": 429, "headers": {"retry-after": soon}}, GRADE,
                        {"status": 500, "headers": {"x-should-retry": "false"}},
                        {"status": 429, "headers": {"retry-after": "200"}}])    # past two minutes: not waited for
    assert chat(server).complete(request()).score == 0.8
    with pytest.raises(ModelError, match="HTTP 500"):
        chat(server).complete(request())
    with pytest.raises(ModelError, match="HTTP 429"):
        chat(server).complete(request())
    assert len(server.chat_requests()) == 4


def test_other_client_errors_fail_at_once(server):
    server.chat.extend([{"status": 401, "body": {"error": {"message": "bad key"}}}, GRADE])
    with pytest.raises(ModelError, match="HTTP 401.*AGENTIC_RAG_API_KEY"):
        chat(server).complete(request())
    assert len(server.chat_requests()) == 1


def test_timeout(server):
    server.chat.extend([{"content": GRADE, "delay": 1.0}])
    with pytest.raises(ModelError, match="timed out after 0.2 s"):
        chat(server, timeout=0.2, max_retries=0).complete(request())


def test_invalid_json_then_a_valid_repair(server):
    server.chat.extend(["{not json", GRADE])
    assert chat(server).complete(request()).score == 0.8
    repair = server.chat_requests()[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "{not json"} and "not valid" in repair[-1]["content"]


def test_schema_invalid_twice_is_a_recorded_fallback(server):
    server.chat.extend(['{"score": 7}', '{"score": "high"}'])
    with pytest.raises(ModelOutputError):
        chat(server).complete(request())
    server.chat.extend(['{"score": 7}', '{"score": "high"}'])
    evidence = [{"title": "t", "text": "Contract B caps late delivery penalties at 5%."}]
    grade = verify_sufficiency("What does the contract say about damages for slow shipping?", evidence, chat(server))
    assert grade.by == "fallback" and not grade.sufficient


def test_usage_and_cost_come_from_the_api(server):
    server.chat.extend([GRADE])
    meter = Meter(chat(server, price=(1.0, 2.0)))
    meter.complete(request())
    assert (meter.usage["prompt_tokens"], meter.usage["completion_tokens"]) == (11, 7)
    assert meter.usage["cost_usd"] == pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6)


def test_model_set_keeps_api_usage_per_task(server):
    server.chat.extend([GRADE])
    meter = Meter(ModelSet(OfflineModel(), grade=chat(server)))
    meter.complete(request())
    assert meter.usage["by_task"]["grade"]["prompt_tokens"] == 11


def test_endpoint_settings_read_in_one_place():
    environ = {"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://o/v1", "AGENTIC_RAG_BASE_URL": "http://a/v1"}
    assert endpoint_from_env(environ) == Endpoint(base_url="http://a/v1", api_key="sk-o")
    assert endpoint_from_env(environ, base_url="http://x/v1").base_url == "http://x/v1"
    assert endpoint_from_env({}) == Endpoint()
    with pytest.raises(ConfigurationError):
        OpenAIChatModel("offline")


def test_embeddings_base64_batched_cached_and_checked(server):
    embedder = OpenAIEmbedder("embed-model", Endpoint(base_url=server.url), batch_size=2)
    assert embedder.dimension == 16 and embedder.name == "openai:embed-model"
    vectors = embedder.embed(["a", "b", "c", "a"])
    assert vectors.shape == (4, 16) and np.allclose(vectors[0], vector("a", 16), atol=1e-6)
    assert np.allclose(vectors[0], vectors[3])
    calls = embedder.calls
    embedder.embed(["c", "b"])
    assert embedder.calls == calls                   # cached by content hash: no new call
    bodies = [r["body"] for r in server.requests if r["path"].endswith("/embeddings")]
    assert bodies[1]["encoding_format"] == "base64" and len(bodies[1]["input"]) == 2
    with pytest.raises(ConfigurationError, match="returns 16 dimensions, not 8"):
        OpenAIEmbedder("embed-model", Endpoint(base_url=server.url), dimension=8)


def _embedding_bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests if r["path"].endswith("/embeddings")]


def test_embeddings_of_queries_and_documents_apart_by_input_type_or_query_model(server):
    alike = OpenAIEmbedder("embed-model", Endpoint(base_url=server.url))
    alike.embed(["a"]), alike.embed_query(["a"])
    assert all("input_type" not in b and b["model"] == "embed-model" for b in _embedding_bodies(server))
    server.requests.clear()
    typed = OpenAIEmbedder("embed-model", Endpoint(base_url=server.url), input_type=True)
    typed.embed(["a"]), typed.embed_query(["a"]), typed.embed_query(["a"])  # cached apart from the passage
    assert [b["input_type"] for b in _embedding_bodies(server)] == ["passage", "passage", "query"]
    assert typed.name == "openai:embed-model+input_type"
    server.requests.clear()
    two = OpenAIEmbedder("embed-model", Endpoint(base_url=server.url), query_model="small-model", input_type=True)
    two.embed(["a"]), two.embed_query(["a"])
    assert [(b["model"], b["input_type"]) for b in _embedding_bodies(server)] == [
        ("embed-model", "passage"), ("small-model", "query"), ("embed-model", "passage"), ("small-model", "query")]
    assert two.name == "openai:embed-model+input_type+query=small-model"


@pytest.mark.parametrize(("name", "parsed"), [
    ("openai:embed-model", ("embed-model", None, False)),
    ("openai:nomic-embed-text:latest", ("nomic-embed-text:latest", None, False)),
    ("openai:e5+input_type", ("e5", None, True)),
    ("openai:e5-passage+query=e5-query", ("e5-passage", "e5-query", False)),
    ("openai:e5+input_type+query=q", ("e5", "q", True)),
    ("openai:a+b", ("a+b", None, False)),  # no known option: an older name, all model
])
def test_embedder_names_parse_back_to_their_options(name, parsed):
    assert tuple(parse_openai_embedder_name(name).values()) == parsed
    assert openai_embedder_name(*parsed) == name


def test_an_embedder_name_that_would_not_reopen_is_refused():
    with pytest.raises(ConfigurationError, match="would not reopen"):
        OpenAIEmbedder("e5+input_type", query_model="q")


def test_embedding_failure_is_a_clear_error(server):
    server.embedding_errors.extend([{"status": 503, "headers": {"retry-after-ms": "5"}}] * 3)
    with pytest.raises(ModelError, match="embeddings call to embed-model failed .* HTTP 503"):
        OpenAIEmbedder("embed-model", Endpoint(base_url=server.url, max_retries=2))


def test_the_whole_loop_runs_against_the_server(server):
    kb = KnowledgeBase(embedder=OpenAIEmbedder("embed-model", Endpoint(base_url=server.url)))
    kb.add_documents([Document("b", "Contract B: late delivery costs 1% per week, capped at 5%.", title="Contract B"),
                      Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse")])
    server.chat.extend([  # the nested question is routed multi_hop by the rules (no tool to weigh)
        json.dumps({"subqueries": [{"query": "packaging contract"}]}),               # decompose
        json.dumps({"answer": "Late delivery costs 1% per week, capped at 5%. [1]",    # generate, grading too:
                    "evidence_score": 0.9, "missing": []}),                           # the check was unsure
    ])
    question = "What does the contract that covers the packaging say about late delivery?"
    state = run_agentic_rag(question, kb, chat(server, price=(1.0, 2.0)), config=Config(max_rounds=2))
    assert state["stop_reason"] == "sufficient" and state["citations"][0]["doc_id"] == "b"
    assert format_trace(state).endswith("verify:? -> generate -> verify:0.90 -> faithfulness:1.00")
    assert state["usage"]["model_calls"] == 2 and state["usage"]["prompt_tokens"] == 22
    assert state["usage"]["cost_usd"] == pytest.approx(2 * (11 + 14) / 1e6)
    assert sum(e["cost_usd"] for e in state["trace"]) == pytest.approx(state["usage"]["cost_usd"])
    assert [e["tokens"] for e in state["trace"] if e["step"] in ("route", "decompose", "verify", "generate")] == \
        [0, 18, 0, 18, 0]
    assert [r["temperature"] for r in server.chat_requests()] == [0.0, 0.2]
    merged = server.chat_requests()[1]["response_format"]  # one structured output holds the answer and the grade
    assert merged["type"] == "json_schema" and merged["json_schema"]["name"] == "GradedAnswer"
    assert {"answer", "evidence_score", "missing"} <= set(merged["json_schema"]["schema"]["properties"])


def test_a_model_failure_mid_run_ends_with_error(server):
    kb = KnowledgeBase()
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.")])
    server.chat.extend([{"status": 500, "headers": {"retry-after-ms": "1"}}] * 3)
    state = run_agentic_rag("When do orders paid on weekends ship?", kb, chat(server, max_retries=2))
    assert state["stop_reason"] == "error" and "HTTP 500" in state["error"] and "generate call" in state["error"]


def test_streaming_hands_over_the_draft_then_the_checks_run(server):
    kb = KnowledgeBase()
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse")])
    draft = "The warehouse ships orders paid before 15:00 the same day. [1] It also ships on Sundays for free. [1]"
    # a question the first search settles (no grade call): its answer streams as it is written
    server.chat.extend([draft,                                              # generate, streamed as text
                        json.dumps({"answer": "The warehouse ships orders paid before 15:00 the same day. [1]"})])
    pieces = []
    state = run_agentic_rag("When does the warehouse ship orders paid before 15:00?", kb, chat(server),
                            on_token=pieces.append)
    assert len(pieces) > 3 and "".join(pieces) == draft == state["draft_answer"]
    assert state["answer"] == "The warehouse ships orders paid before 15:00 the same day. [1]"
    streamed = server.chat_requests()[0]
    assert streamed["stream"] is True and "response_format" not in streamed
    assert state["usage"]["by_task"]["generate"]["prompt_tokens"] == 11


def test_offline_model_hands_over_the_whole_answer_once(tiny_kb):
    pieces = []
    state = run_agentic_rag("工作日 15:00 之前付款的订单什么时候发货？", tiny_kb, OfflineModel(),
                            on_token=pieces.append)
    assert pieces == [state["draft_answer"]] and state["answer"]


def test_embeddings_from_a_server_that_sends_float_lists(server):
    server.float_only = True
    embedder = OpenAIEmbedder("embed-model", Endpoint(base_url=server.url))
    assert np.allclose(embedder.embed(["hello"])[0], vector("hello", 16), atol=1e-6)


def test_every_request_carries_a_completion_limit_within_the_budget(server):
    server.chat.extend([GRADE, GRADE])
    chat(server).complete(request())
    Meter(chat(server), budget=300, max_completion_tokens=512).complete(request())
    unmetered, metered = server.chat_requests()
    assert unmetered["max_completion_tokens"] == Config().max_completion_tokens
    prompt = prompt_tokens(request().messages)
    assert metered["max_completion_tokens"] == 300 - prompt - margin(prompt, 1) < 512   # what the budget has left


def test_an_endpoint_that_refuses_max_completion_tokens_gets_max_tokens_from_then_on(server):
    server.refused_fields = {"max_completion_tokens"}
    server.chat.extend([GRADE, GRADE])
    model = chat(server)
    assert model.complete(request()).score == 0.8 and model.complete(request()).score == 0.8
    bodies = server.chat_requests()
    assert ["max_completion_tokens" in b for b in bodies] == [True, False, False]
    assert [b.get("max_tokens") for b in bodies] == [None, 1024, 1024]
    assert {b["response_format"]["type"] for b in bodies} == {"json_schema"}   # the output mode was not given up


def test_a_reply_cut_off_at_the_limit_is_invalid_and_counted(server):
    cut = {"content": '{"score": 0.8, "suffi', "finish_reason": "length",
           "usage": {"prompt_tokens": 11, "completion_tokens": 64, "total_tokens": 75}}
    server.chat.extend([cut])
    meter = Meter(chat(server), budget=10_000, max_completion_tokens=64)
    with pytest.raises(ModelOutputError, match="cut off at its limit of 64 tokens"):
        meter.complete(request())
    assert len(server.chat_requests()) == 1                      # no repair request for a reply cut off
    assert (meter.usage["model_calls"], meter.usage["completion_tokens"]) == (1, 64)
    server.chat.extend([cut])
    evidence = [{"title": "t", "text": "Contract B caps late delivery penalties at 5%."}]
    grade = verify_sufficiency("Was the spring release late, and by how many weeks?", evidence,
                               Meter(chat(server), max_completion_tokens=64))
    assert grade.by == "fallback" and "cut off" in grade.reason


def test_a_server_that_ignores_the_limit_is_cut_off_and_the_overshoot_recorded(server):
    server.chat.extend([{"content": GRADE, "usage": {"prompt_tokens": 11, "completion_tokens": 3000,
                                                     "total_tokens": 3011}}])
    meter = Meter(chat(server), budget=2000)
    with pytest.raises(BudgetExceeded, match="counted past the budget by the model's server") as caught:
        meter.complete(request())
    assert isinstance(caught.value.__cause__, ModelOutputError) and "cut off" in str(caught.value.__cause__)
    assert meter.usage["completion_tokens"] == 3000 and meter.usage["overshoot_tokens"] == 1011


def test_a_streamed_answer_carries_the_limit_and_is_cut_off_like_any_reply(server):
    server.chat.extend([{"content": "The warehouse ships", "finish_reason": "length"}])
    pieces = []
    meter = Meter(chat(server), budget=5000, max_completion_tokens=100)
    with pytest.raises(ModelOutputError, match="cut off"):
        meter.stream_answer(request("generate", Answer), pieces.append)
    assert server.chat_requests()[0]["max_completion_tokens"] == 100 and "".join(pieces) == "The warehouse ships"
    assert meter.usage["model_calls"] == 1 and meter.usage["completion_tokens"] == 7


TOO_LONG = {"status": 400, "body": {"error": {"message": "This model's maximum context length is 8192 tokens; "
                                                         "please reduce the length of the messages."}}}


def test_an_unrelated_400_is_a_clear_error_that_switches_nothing(server):
    server.chat.extend([TOO_LONG, GRADE])
    model = chat(server)
    with pytest.raises(ModelError, match=r"the grade call to small-model failed at .* HTTP 400: .*context length"):
        model.complete(request())
    assert model.complete(request()).score == 0.8
    first, second = server.chat_requests()                          # one request each: nothing was retried
    assert first["response_format"]["type"] == second["response_format"]["type"] == "json_schema"
    assert second["max_completion_tokens"] == 1024 and "max_tokens" not in second


def test_an_unrelated_400_in_text_mode_keeps_max_completion_tokens(server):
    refuse = {"status": 400, "body": {"error": {"message": "response_format is not supported"}}}
    server.chat.extend([refuse, refuse, GRADE, TOO_LONG, GRADE])
    model = chat(server)
    assert model.complete(request()).score == 0.8                  # found text mode
    with pytest.raises(ModelError, match="HTTP 400"):
        model.complete(request())
    assert model.complete(request()).score == 0.8
    bodies = server.chat_requests()
    assert len(bodies) == 5 and all("max_tokens" not in b and b["max_completion_tokens"] == 1024 for b in bodies)
    assert "response_format" not in bodies[-1]


def test_an_unrelated_400_on_a_streamed_call_keeps_max_completion_tokens(server):
    server.chat.extend([TOO_LONG, "The warehouse ships. [1]"])
    model = chat(server)
    with pytest.raises(ModelError, match="streamed generate call .* HTTP 400"):
        model.stream_answer(request("generate", Answer), lambda piece: None)
    reply, _ = model.stream_answer(request("generate", Answer), lambda piece: None)
    assert reply.answer == "The warehouse ships. [1]"
    assert [("max_completion_tokens" in b, "max_tokens" in b) for b in server.chat_requests()] == [(True, False)] * 2


def test_a_failed_retry_with_max_tokens_is_not_kept(server):
    """vLLM names both fields when the prompt leaves no room: the retry fails too, and switches nothing."""
    no_room = {"status": 400, "body": {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: "
                                                            "1024. This model's maximum context length is 4096"}}}
    server.chat.extend([no_room, no_room, GRADE])
    model = chat(server)
    with pytest.raises(ModelError, match="HTTP 400: .*too large"):
        model.complete(request())
    assert model.complete(request()).score == 0.8
    bodies = server.chat_requests()
    assert [("max_completion_tokens" in b, "max_tokens" in b) for b in bodies] == [(True, False), (False, True),
                                                                                  (True, False)]
    assert {b["response_format"]["type"] for b in bodies} == {"json_schema"}


def test_a_streamed_call_to_an_endpoint_that_refuses_max_completion_tokens_switches_once(server):
    server.refused_fields = {"max_completion_tokens"}
    server.chat.extend(["first [1]", "second [1]"])
    model = chat(server)
    for expected in ("first [1]", "second [1]"):
        assert model.stream_answer(request("generate", Answer), lambda piece: None)[0].answer == expected
    assert [b.get("max_tokens") for b in server.chat_requests()] == [None, 1024, 1024]


def deadline_meter(server, seconds: float, **kwargs) -> Meter:
    """A meter whose calls must end within `seconds`, around a model that would wait 10 s a try, three tries."""
    import time

    return Meter(chat(server, timeout=10, max_retries=2, **kwargs), deadline=time.monotonic() + seconds)


def test_a_hanging_server_is_given_up_at_the_deadline_with_no_retry(server):
    server.chat.extend([{"hang": True}] * 3)
    with pytest.raises(DeadlineExceeded, match="grade call to small-model was cut off by the run's deadline"):
        deadline_meter(server, 2.0).complete(request())
    assert len(server.chat_requests()) == 1          # the try's timeout was the time left: none after it
    with pytest.raises(DeadlineExceeded, match="not made: the run's deadline had passed"):
        deadline_meter(server, -1.0).complete(request())
    assert len(server.chat_requests()) == 1


def test_a_retry_after_past_the_deadline_is_not_waited_for(server):
    server.chat.extend([{"status": 429, "headers": {"retry-after": "20"}}])
    with pytest.raises(DeadlineExceeded, match="got HTTP 429; a retry in 20 s would end past the run's deadline"):
        deadline_meter(server, 2.0).complete(request())
    assert len(server.chat_requests()) == 1
    server.chat.extend([{"status": 429, "headers": {"retry-after-ms": "10"}}, GRADE])
    assert deadline_meter(server, 30.0).complete(request()).score == 0.8   # a pause that fits is taken
    assert len(server.chat_requests()) == 3


def test_a_try_that_times_out_well_before_the_deadline_is_retried(server):
    import time

    server.chat.extend([{"content": GRADE, "delay": 1.0}, GRADE])
    model = chat(server, timeout=0.3, max_retries=1)
    assert Meter(model, deadline=time.monotonic() + 60).complete(request()).score == 0.8
    assert len(server.chat_requests()) == 2


def test_a_reply_that_dribbles_past_the_deadline_is_closed(server):
    text = "The warehouse ships orders paid before 15:00 the same day. " * 4
    server.chat.extend([{"content": text, "dribble": 1.0}])
    pieces, meter = [], deadline_meter(server, 3.0)
    with pytest.raises(DeadlineExceeded, match="streamed generate call .* cut off"):
        meter.stream_answer(request("generate", Answer), pieces.append)
    assert 0 < len(pieces) < len(text) // 5 and "".join(pieces) == text[:len("".join(pieces))]
    assert meter.usage["model_calls"] == 1 and meter.usage["completion_tokens"] > 0   # what came is counted
    assert meter.usage["reported_completion_tokens"] == 0                            # by tiktoken: no server count
    server.chat.extend([{"content": GRADE, "dribble": 1.0}])                         # a plain reply, byte by byte
    with pytest.raises(DeadlineExceeded, match="cut off"):
        deadline_meter(server, 3.0).complete(request())
    assert len(server.chat_requests()) == 2


def _readers() -> set:
    """The threads reading model replies (agentic_rag.core._openai_api names them)."""
    import threading

    return {t for t in threading.enumerate() if t.name == "agentic-rag-model-call"}


def _eventually(condition, bound: float = 20.0) -> bool:
    """Whether `condition()` holds within `bound` seconds (polled: a generous bound, not a speed claim)."""
    import time

    end = time.monotonic() + bound
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)
    return condition()


def test_a_call_cut_off_at_the_deadline_ends_its_thread_and_its_connection(server):
    """Without the cut, each reader would go on receiving a byte (a piece) a second for a minute or more."""
    before = _readers()
    text = "The warehouse ships orders paid before 15:00 the same day. " * 5
    server.chat.extend([{"content": GRADE, "dribble": 1.0}, {"content": text, "dribble": 1.0},
                        {"content": text, "dribble": 1.0, "delay": 3.0}])   # the last one's headers: past the deadline
    with pytest.raises(DeadlineExceeded, match="grade call .* cut off"):
        deadline_meter(server, 2.0).complete(request())
    for _ in range(2):
        with pytest.raises(DeadlineExceeded, match="generate call .* cut off"):
            deadline_meter(server, 2.0).stream_answer(request("generate", Answer), lambda piece: None)
    assert _eventually(lambda: len(server.dropped) == 3), server.dropped        # the server saw each connection go
    assert _eventually(lambda: not _readers() - before), _readers() - before     # and no reader is left
    server.chat.extend([GRADE])                                     # a call that ends well keeps its connection
    assert deadline_meter(server, 30.0).complete(request()).score == 0.8 and len(server.dropped) == 3


def test_a_run_against_a_hanging_server_ends_at_its_deadline_with_a_refusal(server):
    kb = KnowledgeBase()
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.")])
    server.chat.extend([{"hang": True}] * 9)
    state = run_agentic_rag("When do orders paid on weekends ship?", kb, chat(server, timeout=10, max_retries=2),
                            config=Config(deadline_s=3))
    assert state["stop_reason"] == "deadline" and state["abstained"] and state["error"] is None
    assert "the deadline of 3 s passed" in state["abstain_reason"] and "cut off" in state["abstain_reason"]
    assert format_trace(state).endswith("abstain") and len(server.chat_requests()) == 1   # one try: no retry
    models = ModelSet(OfflineModel(), generate=chat(server, timeout=10, max_retries=2))   # a set passes it on
    state = run_agentic_rag("When do orders paid on weekends ship?", kb, models, config=Config(deadline_s=3),
                            on_token=lambda piece: None)
    assert state["stop_reason"] == "deadline" and "generate call to small-model" in state["abstain_reason"]
    assert len(server.chat_requests()) == 2


def test_an_embeddings_call_inside_a_run_is_cut_at_its_deadline_and_outside_one_is_not(server):
    kb = KnowledgeBase(embedder=OpenAIEmbedder("embed-model", Endpoint(base_url=server.url, timeout=10, max_retries=2)))
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.")])
    embedded = len([r for r in server.requests if r["path"].endswith("/embeddings")])
    server.embedding_errors.append({"hang": True})
    state = run_agentic_rag("When do orders paid on weekends ship?", kb, OfflineModel(), config=Config(deadline_s=2))
    assert state["stop_reason"] == "deadline" and state["error"] is None, (state["stop_reason"], state["error"])
    assert "embeddings call to embed-model was cut off" in state["abstain_reason"]
    assert len([r for r in server.requests if r["path"].endswith("/embeddings")]) == embedded + 1   # no retry
    before = _readers()
    server.embedding_errors.append({"dribble": 1.0})  # a reply a byte a second: its connection is shut at the deadline
    state = run_agentic_rag("When do orders paid on weekends ship?", kb, OfflineModel(), config=Config(deadline_s=2))
    assert state["stop_reason"] == "deadline" and "embeddings call to embed-model" in state["abstain_reason"]
    assert _eventually(lambda: server.dropped == ["/v1/embeddings"]), server.dropped
    assert _eventually(lambda: not _readers() - before), _readers() - before
    server.embedding_errors.append({"status": 500})   # outside a run no deadline is left over: retried, then found
    assert kb.search("When do orders ship?", k=1)[0].doc_id == "w"


def _run_with_usage(server, usage: dict, budget: int = 40_000) -> dict:
    """The two-call run of test_the_whole_loop_runs_against_the_server, its server reporting `usage` for each."""
    kb = KnowledgeBase(embedder=OpenAIEmbedder("embed-model", Endpoint(base_url=server.url)))
    kb.add_documents([Document("b", "Contract B: late delivery costs 1% per week, capped at 5%.", title="Contract B"),
                      Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse")])
    server.chat.extend([{"content": json.dumps({"subqueries": [{"query": "packaging contract"}]}), "usage": usage},
                        {"content": json.dumps({"answer": "Late delivery costs 1% per week, capped at 5%. [1]",
                                                "evidence_score": 0.9, "missing": []}), "usage": usage}])
    question = "What does the contract that covers the packaging say about late delivery?"
    return run_agentic_rag(question, kb, chat(server, price=(1.0, 2.0)),
                           config=Config(max_rounds=2, token_budget=budget))


@pytest.mark.parametrize("figures", [(11, -199_999), (-5, 7), (11, 7.5), (True, 7), ("11", 7)],
                         ids=["negative completion", "negative prompt", "a float", "a bool", "a string"])
def test_usage_a_server_reports_that_cannot_be_true_is_recorded_and_not_billed(server, figures):
    prompt, completion = figures
    state = _run_with_usage(server, {"prompt_tokens": prompt, "completion_tokens": completion})
    usage = state["usage"]
    assert state["stop_reason"] == "sufficient" and usage["model_calls"] == 2
    assert [u["prompt_tokens"] for u in usage["invalid_usage"]] == [shown(prompt)] * 2   # kept as sent, for the record
    assert format_trace(state).count("usage:invalid") == 2
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == \
        (usage["counted_prompt_tokens"], usage["counted_completion_tokens"])         # billed by tiktoken's count
    assert 0 < usage["prompt_tokens"] + usage["completion_tokens"] < 40_000
    assert usage["reported_prompt_tokens"] == 2 * budget_tokens(prompt)   # what of it is a count, for the budget
    assert 0 < usage["cost_usd"] < 0.01 and usage["overshoot_tokens"] == 0
    json.dumps(state)


@pytest.mark.parametrize("figures", [(11, 2e9), (11, "2000000000"), (None, 2_000_000_000), (11, "1e400")],
                         ids=["a float", "a string", "no prompt count", "past a float's range"])
def test_a_huge_count_written_any_way_still_ends_the_run_at_its_budget(server, figures):
    prompt, completion = figures
    state = _run_with_usage(server, {"prompt_tokens": prompt, "completion_tokens": completion})
    assert state["stop_reason"] == "token_budget" and state["usage"]["model_calls"] == 1, state["stop_reason"]
    assert state["usage"]["prompt_tokens"] + state["usage"]["completion_tokens"] < 40_000   # billed by tiktoken
    json.dumps(state)


@pytest.mark.parametrize("figures", [(2_000_000_000, 7), (11, 2_000_000_000), (10_000_001, 0)],
                         ids=["huge prompt", "huge completion", "just past the bound"])
def test_usage_too_large_to_bill_is_still_the_providers_count_and_ends_the_run_past_its_budget(server, figures):
    prompt, completion = figures
    state = _run_with_usage(server, {"prompt_tokens": prompt, "completion_tokens": completion})
    usage = state["usage"]
    assert state["stop_reason"] == "token_budget" and state["abstained"] and usage["model_calls"] == 1
    assert "counted past the budget" in state["abstain_reason"]
    assert usage["invalid_usage"] == [{"task": "decompose", "prompt_tokens": prompt, "completion_tokens": completion}]
    assert format_trace(state).count("usage:invalid") == 1
    assert (usage["reported_prompt_tokens"], usage["reported_completion_tokens"]) == figures   # the provider's, apart
    assert usage["overshoot_tokens"] == prompt + completion - 40_000
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == \
        (usage["counted_prompt_tokens"], usage["counted_completion_tokens"])         # billed: tiktoken's, sane
    assert 0 < usage["prompt_tokens"] + usage["completion_tokens"] < 40_000 and 0 < usage["cost_usd"] < 0.01
    server.chat.clear()                                             # the reply the first run did not ask for
    state = _run_with_usage(server, {"prompt_tokens": prompt, "completion_tokens": completion}, budget=10 ** 10)
    assert state["stop_reason"] == "sufficient" and state["usage"]["reported_prompt_tokens"] == 2 * prompt


def test_usage_a_server_reports_is_kept_beside_the_meters_and_its_excess_ends_the_run(server):
    state = _run_with_usage(server, {"prompt_tokens": 11, "completion_tokens": 7})
    usage = state["usage"]
    assert (usage["prompt_tokens"], usage["reported_prompt_tokens"]) == (22, 22) and usage["invalid_usage"] == []
    assert usage["counted_prompt_tokens"] > 22       # tiktoken counts the real prompts; the fake server says 11
    state = _run_with_usage(server, {"prompt_tokens": 25_000, "completion_tokens": 7})  # the second call passes
    assert state["stop_reason"] == "token_budget" and state["abstained"]                # the budget: no answer
    assert state["usage"]["reported_prompt_tokens"] == 50_000 and state["usage"]["overshoot_tokens"] == 10_014
    assert "counted past the budget" in state["abstain_reason"]


def test_a_hosted_decomposition_hops_from_the_first_answer_to_the_second_passage(server):
    kb = KnowledgeBase()
    kb.add_documents([
        Document("r", "The Roadrunner 3000 rocket skates are made by Acme Corporation.", title="Roadrunner 3000"),
        Document("a", "Acme Corporation was founded by Wile Coyote in 1949.", title="Acme Corporation"),
        Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse"),
        Document("b", "Beta Industries was founded by Road Runner in 1952.", title="Beta Industries")])
    server.chat.extend([
        json.dumps({"subqueries": [{"query": "maker of the Roadrunner 3000", "depends_on": []},
                                   {"query": "who founded the maker", "depends_on": [0]}]}),
        json.dumps({"answer": "Wile Coyote founded Acme Corporation [2], which makes the Roadrunner 3000 [1].",
                    "evidence_score": 0.9, "missing": []}),
        json.dumps({"score": 1.0, "unsupported": [], "complete": True}),  # the judge: one sentence, two sources
    ])
    question = "Who founded the company that makes the Roadrunner 3000?"
    # vector search only: a nested question with names otherwise starts with the graph walk
    state = run_agentic_rag(question, kb, chat(server), config=Config(max_rounds=2, sources=("vector",)))
    decompose = server.chat_requests()[0]
    assert decompose["response_format"]["json_schema"]["name"] == "Decomposition"
    assert f"Question: {question}" in decompose["messages"][-1]["content"]
    queries = state["rounds"][0]["queries"]  # the question itself, then the model's hops
    assert queries[:2] == [question, "maker of the Roadrunner 3000"]
    assert queries[2].startswith("who founded the maker") and "Acme Corporation" in queries[2]  # the name hop 1 found
    generate = server.chat_requests()[-1]["messages"][-1]["content"]
    assert "Roadrunner 3000 rocket skates are made by Acme" in generate and "founded by Wile Coyote" in generate
    assert {c["doc_id"] for c in state["citations"]} == {"r", "a"} and state["stop_reason"] == "sufficient"
