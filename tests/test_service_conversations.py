"""The chat endpoint as a conversation, tested as chat front ends use it: a real waitress server on
127.0.0.1 and the openai SDK. The whole `messages` list is the history (follow-ups condensed, our
Sources block not taken for the user's words), system messages are instructions, max_tokens bounds
the model calls, and conversations the service keeps (conversation_id) are bound to their key,
bounded, and answered one turn at a time."""
import json
import sqlite3
import threading

import pytest
from openai import OpenAI

from agentic_rag import Endpoint, OfflineModel, OpenAIChatModel
from agentic_rag.service import ServiceLimits, create_app
from helpers import start_service, stop_service
from openai_server import FakeOpenAI
from test_service import READ, WRITE, Server

LOGIN = "登录报错的问题在 2.3.1 版本里修复了吗？"
TEAM = "What does the Team plan cost?"


@pytest.fixture
def served(example_kb_dir, tmp_path):
    """A server over the example knowledge base with a read and a write key, its conversations in
    a state folder of its own."""
    server = Server(create_app(OfflineModel(), kb_dir=example_kb_dir, read_keys=[READ], write_keys=[WRITE],
                               state_dir=tmp_path / "state"))
    yield server
    server.close()


def _client(server: Server, key: str = READ) -> OpenAI:
    return OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=key, max_retries=0)


def _ask(client: OpenAI, messages: list[dict], **extra):
    """One chat turn: (the reply's text, its agentic_rag object)."""
    reply = client.chat.completions.create(model="agentic-rag", messages=messages, extra_body=extra or None)
    return reply.choices[0].message.content, reply.model_extra["agentic_rag"]


def _streamed(client: OpenAI, messages: list[dict], **extra):
    """One streamed chat turn: (the text put together, the last chunk's agentic_rag object)."""
    pieces = list(client.chat.completions.create(model="agentic-rag", messages=messages, stream=True,
                                                 extra_body=extra or None))
    return "".join(p.choices[0].delta.content or "" for p in pieces), pieces[-1].model_extra["agentic_rag"]


@pytest.mark.parametrize("first, follow_up, standalone, holds", [
    (LOGIN, "那 2.4 里呢？", "登录报错的问题在 2.4 版本里修复了吗？", "认证"),
    (TEAM, "And the Business plan?", "What does the Business plan cost?", "15 USD"),
])
def test_a_follow_up_in_the_whole_messages_list_is_condensed_streamed_or_not(served, first, follow_up,
                                                                             standalone, holds):
    client = _client(served)
    answer, extra = _ask(client, [{"role": "user", "content": first}])
    assert "\n\nSources:\n[1]" in answer and not extra["abstained"] and extra["standalone"] == first
    assert extra["conversation_id"] is None  # none was asked for: nothing is kept
    messages = [{"role": "user", "content": first}, {"role": "assistant", "content": answer},
                {"role": "user", "content": follow_up}]
    text, extra = _ask(client, messages)
    assert extra["standalone"] == standalone and not extra["abstained"] and holds in text
    assert "\n\nSources:\n[1]" in text and extra["stop_reason"] in ("sufficient", "converged")
    streamed, streamed_extra = _streamed(client, messages)
    assert streamed == text and streamed_extra["standalone"] == standalone


def test_a_follow_up_the_knowledge_base_does_not_cover_is_refused(served):
    client = _client(served)
    answer, extra = _ask(client, [{"role": "user", "content": LOGIN}])
    assert not extra["abstained"]
    text, extra = _ask(client, [{"role": "user", "content": LOGIN}, {"role": "assistant", "content": answer},
                                {"role": "user", "content": "那 3.0 里呢？"}])
    assert extra["standalone"] == "登录报错的问题在 3.0 版本里修复了吗？"
    assert extra["abstained"] and "Sources:" not in text and "没有找到可靠的答案" in text


def test_a_conversation_kept_by_the_service_needs_only_the_new_message(served):
    client = _client(served)
    answer, extra = _ask(client, [{"role": "user", "content": LOGIN}], conversation=True)
    conversation = extra["conversation_id"]
    assert conversation.startswith("conv_") and len(conversation) > 30 and not extra["abstained"]
    text, extra = _streamed(client, [{"role": "user", "content": "那 2.4 里呢？"}], conversation_id=conversation)
    assert extra["standalone"] == "登录报错的问题在 2.4 版本里修复了吗？" and extra["conversation_id"] == conversation
    turns = served.app.conversations.turns(conversation)
    assert [(t["role"], t["content"]) for t in turns[::2]] == [("user", LOGIN), ("user", extra["standalone"])]
    assert turns[1]["content"] and "Sources:" not in turns[1]["content"]       # the answer, not our block
    assert turns[1]["evidence"] and all(e["id"] and e["text"] for e in turns[1]["evidence"])  # carried next turn
    _, extra = _ask(client, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEAM}],
                    conversation_id=conversation)  # a system message may come with the new message
    assert "instructions were not followed" in extra["answer_reason"] and "8 USD" in _ask(
        client, [{"role": "user", "content": "Team plan price?"}], conversation_id=conversation)[0]
    assert len(served.app.conversations.turns(conversation)) == 8


def _error(call) -> tuple[int, dict]:
    """The status and error object of a call the service refuses."""
    from openai import APIStatusError

    with pytest.raises(APIStatusError) as refused:
        call()
    return refused.value.status_code, refused.value.body


def test_a_conversation_is_bound_to_the_key_that_opened_it(served):
    _, extra = _ask(_client(served), [{"role": "user", "content": TEAM}], conversation=True)
    other = _client(served, WRITE)  # a valid key, but not the one that opened it
    status, body = _error(lambda: _ask(other, [{"role": "user", "content": "And the Business plan?"}],
                                       conversation_id=extra["conversation_id"]))
    assert status == 404 and body["type"] == "conversation_not_found" and "no such conversation" in body["message"]
    assert len(served.app.conversations.turns(extra["conversation_id"])) == 2   # nothing of the other key's
    status, body = _error(lambda: _ask(_client(served), [{"role": "user", "content": "x"}],
                                       conversation_id="conv_made-up"))
    assert status == 404 and "no such conversation" in body["message"]


def test_without_keys_a_conversation_is_bound_to_no_key(example_kb_dir, tmp_path):
    server = Server(create_app(OfflineModel(), kb_dir=example_kb_dir, state_dir=tmp_path / "state"))
    try:
        client = _client(server, "anything-the-client-sends")
        _, extra = _ask(client, [{"role": "user", "content": TEAM}], conversation=True)
        text, extra = _ask(_client(server, "something-else-entirely"),
                           [{"role": "user", "content": "And the Business plan?"}],
                           conversation_id=extra["conversation_id"])
        assert extra["standalone"] == "What does the Business plan cost?" and "15 USD" in text
    finally:
        server.close()


def test_two_clients_on_one_conversation_take_turns_and_never_mix(served):
    client = _client(served)
    _, extra = _ask(client, [{"role": "user", "content": TEAM}], conversation=True)
    conversation, replies = extra["conversation_id"], {}
    questions = {"What does the Business plan cost?": "15 USD", LOGIN: "认证超时"}

    def turn(question):
        replies[question] = _ask(_client(served), [{"role": "user", "content": question}],
                                 conversation_id=conversation)

    threads = [threading.Thread(target=turn, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for question, holds in questions.items():
        text, extra = replies[question]
        assert holds in text and extra["standalone"] == question           # each answers its own question
    turns = served.app.conversations.turns(conversation)
    asked = [t["content"] for t in turns if t["role"] == "user"]
    assert asked[0] == TEAM and sorted(asked[1:]) == sorted(questions) and len(turns) == 6  # none lost
    for user, assistant in zip(turns[::2], turns[1::2], strict=True):
        assert questions.get(user["content"], "8 USD") in assistant["content"]     # each after its own question


def test_a_conversation_busy_past_the_wait_is_409_and_the_turn_is_not_lost(example_kb_dir, tmp_path):
    app = create_app(OfflineModel(), kb_dir=example_kb_dir, state_dir=tmp_path / "state",
                     limits=ServiceLimits(conversation_wait_s=0.2))
    server = Server(app)
    try:
        _, extra = _ask(_client(server), [{"role": "user", "content": TEAM}], conversation=True)
        held = app.conversations.claim(extra["conversation_id"], None, 60)  # another worker's turn under way
        status, body = _error(lambda: _ask(_client(server), [{"role": "user", "content": "And the Business plan?"}],
                                           conversation_id=extra["conversation_id"]))
        assert status == 409 and body["type"] == "conversation_busy" and "one turn at a time" in body["message"]
        app.conversations.save(held, {"question": "What does the Pro plan cost?", "answer": "A2", "abstained": False,
                                      "citations": []})
        _ask(_client(server), [{"role": "user", "content": "And the Business plan?"}],
             conversation_id=extra["conversation_id"])
        asked = [t["content"] for t in app.conversations.turns(extra["conversation_id"]) if t["role"] == "user"]
        assert asked == [TEAM, "What does the Pro plan cost?", "What does the Business plan cost?"]  # as condensed
    finally:
        server.close()


@pytest.mark.slow  # ten turns, one after another
def test_conversations_are_bounded_in_count_age_and_length(example_kb_dir, tmp_path):
    state = tmp_path / "state"
    app = create_app(OfflineModel(), kb_dir=example_kb_dir, state_dir=state,
                     limits=ServiceLimits(max_conversations=2))
    server = Server(app)
    try:
        client = _client(server)
        ids = [_ask(client, [{"role": "user", "content": TEAM}], conversation=True)[1]["conversation_id"]
               for _ in range(3)]
        status, body = _error(lambda: _ask(client, [{"role": "user", "content": "x"}], conversation_id=ids[0]))
        assert status == 404 and "evicted (past 2 conversations)" in body["message"]        # the oldest went
        with sqlite3.connect(state / "conversations.sqlite") as db:  # a day and more without a turn
            db.execute("UPDATE conversations SET updated = updated - 90000 WHERE id = ?", (ids[1],))
        status, body = _error(lambda: _ask(client, [{"role": "user", "content": "x"}], conversation_id=ids[1]))
        assert status == 404 and "has expired: no turn for 24 h" in body["message"]
        for n in range(10):
            _ask(client, [{"role": "user", "content": f"What does the Team plan cost in month {n}?"}],
                 conversation_id=ids[2])
        turns = app.conversations.turns(ids[2])
        assert sum(t["role"] == "user" for t in turns) == 8 and turns[-2]["content"].endswith("month 9?")
    finally:
        server.close()


def _hosted(fake: FakeOpenAI):
    return OpenAIChatModel("small-model", Endpoint(base_url=fake.url, timeout=10, max_retries=0))


def _generated(answer: str) -> str:
    return json.dumps({"answer": answer, "evidence_score": 0.9, "missing": []}, ensure_ascii=False)


def test_system_messages_and_max_tokens_reach_a_hosted_model(example_kb_dir, tmp_path):
    with FakeOpenAI() as fake:
        server = Server(create_app(_hosted(fake), kb_dir=example_kb_dir, cache_size=0, state_dir=tmp_path))
        try:
            first = "The Team plan costs 8 USD per member and month. [1]"
            fake.chat.append(_generated(first))
            _ask(_client(server), [{"role": "system", "content": "Answer in one sentence."},
                                   {"role": "developer", "content": "Name the price."},
                                   {"role": "user", "content": TEAM}], max_tokens=300)
            generate = fake.chat_requests()[-1]
            system = [m["content"] for m in generate["messages"] if m["role"] == "system"]
            assert len(system) == 2 and system[1].endswith("Answer in one sentence.\n\nName the price.")
            assert generate["max_completion_tokens"] == 300            # the completion limit the client asked
            fake.chat.extend([json.dumps({"standalone": "What does the Business plan cost?", "readings": []}),
                              _generated("The Business plan costs 15 USD. [1]")])
            text, extra = _ask(_client(server), [{"role": "user", "content": TEAM},
                                                 {"role": "assistant", "content": first + "\n\nSources:\n[1] Plans "
                                                  "and pricing (manual/05-pricing.md)"},
                                                 {"role": "user", "content": "And the Business plan?"}],
                               max_completion_tokens=200)
            condense, generate = fake.chat_requests()[-2:]
            shown = json.dumps(condense["messages"], ensure_ascii=False)
            assert "And the Business plan?" in shown and "8 USD" in shown and "Sources:" not in shown
            assert extra["standalone"] == "What does the Business plan cost?" and "15 USD" in text
            assert condense["max_completion_tokens"] == generate["max_completion_tokens"] == 200
            assert [m["role"] for m in generate["messages"]].count("system") == 1   # no instructions this turn
        finally:
            server.close()


def test_the_offline_model_says_it_did_not_follow_the_system_message(served):
    _, extra = _ask(_client(served), [{"role": "system", "content": "Answer like a pirate."},
                                      {"role": "user", "content": TEAM}])
    assert "instructions were not followed" in extra["answer_reason"] and not extra["abstained"]
    _, plain = _ask(_client(served), [{"role": "user", "content": TEAM}])
    assert "instructions" not in plain["answer_reason"]   # and without one, it says nothing of them


@pytest.mark.parametrize("change, field", [
    ({"messages": [{"role": "tool", "content": "42", "tool_call_id": "t1"}, {"role": "user", "content": TEAM}]},
     "messages[0] has role 'tool': this model calls its own tools"),
    ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content is a number; send text"),
    ({"messages": [{"role": "user", "content": {"text": TEAM}}]}, "messages[0].content is an object"),
    ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0] is not a {\"type\": ...} part"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "a text part without text"),
    ({"messages": [{"content": TEAM}]}, "messages[0] has role null"),
    ({"messages": ["hi"]}, "messages[0] is text, not a"),
    ({"messages": "hi"}, "messages must be a non-empty list"),
    ({"messages": []}, "messages must be a non-empty list"),
    ({"messages": [{"role": "user", "content": TEAM}, {"role": "assistant", "content": "8 USD"}]},
     "end messages with a user message"),
    ({"messages": [{"role": "user", "content": "hi"}] * 10_000}, "10,000 messages; the limit is 256"),
    ({"messages": [{"role": "system", "content": "x" * 5000}, {"role": "user", "content": TEAM}]},
     "the system messages hold 5,000 characters; the limit is 4,000"),
    ({"messages": [{"role": "user", "content": TEAM}, {"role": "assistant", "content": "8 USD"},
                   {"role": "user", "content": "And Business?"}], "conversation_id": "conv_x"},
     "with conversation_id send only the new user message"),
    ({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    ({"max_tokens": "300"}, "max_tokens: Input should be a valid integer"),
    ({"max_completion_tokens": True}, "max_completion_tokens: Input should be a valid integer"),
    ({"max_tokens": 2.5}, "max_tokens: Input should be a valid integer"),
    ({"conversation": "yes"}, "conversation: Input should be a valid boolean"),
    ({"conversation_id": ""}, "conversation_id: String should have at least 1 character"),
])
def test_a_malformed_chat_request_is_a_clear_400(served, change, field):
    body = {"model": "agentic-rag", "messages": [{"role": "user", "content": TEAM}], **change}
    status, _, reply = served.request("POST", "/v1/chat/completions", body, key=READ)
    assert status == 400 and reply["error"]["type"] == "invalid_request", reply
    assert field in reply["error"]["message"] and "\n" not in reply["error"]["message"], reply


def test_the_openapi_schema_lists_the_chat_fields(served):
    schemas = served.request("GET", "/openapi.json")[2]["components"]["schemas"]
    assert {"max_tokens", "max_completion_tokens", "conversation_id", "conversation"} <= set(
        schemas["ChatRequest"]["properties"])
    assert {"standalone", "conversation_id"} <= set(schemas["ChatExtra"]["properties"])
    assert "developer" in json.dumps(schemas["ChatMessage"])


def test_server_processes_sharing_a_state_dir_share_their_conversations(example_kb_dir, tmp_path):
    (a, port_a), (b, port_b) = (start_service(example_kb_dir, tmp_path, name, "--state-dir", str(tmp_path / "state"))
                                          for name in "ab")
    try:
        clients = [OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
                   for port in (port_a, port_b)]
        _, extra = _ask(clients[0], [{"role": "user", "content": LOGIN}], conversation=True)
        text, extra = _ask(clients[1], [{"role": "user", "content": "那 2.4 里呢？"}],
                           conversation_id=extra["conversation_id"])
        assert extra["standalone"] == "登录报错的问题在 2.4 版本里修复了吗？" and "认证" in text
        assert (tmp_path / "state" / "conversations.sqlite").stat().st_mode & 0o077 == 0   # its owner's only
    finally:
        for process in (a, b):
            stop_service(process)


def test_a_state_folder_that_cannot_be_made_is_a_503_naming_no_server_path(example_kb_dir, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    server = Server(create_app(OfflineModel(), kb_dir=example_kb_dir, state_dir=blocked / "state"))
    try:
        body = {"model": "agentic-rag", "messages": [{"role": "user", "content": TEAM}], "conversation": True}
        status, headers, reply = server.request("POST", "/v1/chat/completions", body)
        assert status == 503 and reply["error"]["type"] == "unavailable" and headers["Retry-After"]
        assert "conversation store" in reply["error"]["message"] and str(tmp_path) not in reply["error"]["message"]
        body.pop("conversation")   # a chat of its messages alone needs no store
        assert server.request("POST", "/v1/chat/completions", body)[0] == 200
    finally:
        server.close()
