"""Follow-up questions through the library: the condense step, history, carried evidence, Conversation,
and the condense prompt of a hosted model against a real OpenAI-protocol server on 127.0.0.1."""
from __future__ import annotations

import json
import threading

import pytest

from agentic_rag import (
    ConfigurationError,
    Conversation,
    Endpoint,
    KnowledgeBase,
    OfflineModel,
    OpenAIChatModel,
    ScriptedModel,
    condense_query,
    format_trace,
    run_agentic_rag,
)
from agentic_rag.kb import Document
from agentic_rag.loop._history import MAX_TURNS, history_messages
from openai_server import FakeOpenAI

LOGIN = "登录报错的问题在 2.3.1 版本里修复了吗？"


def test_a_chinese_ellipsis_keeps_the_earlier_question(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    first = conv.ask(LOGIN)
    second = conv.ask("那 2.4 里呢？")
    assert second["question"] == "那 2.4 里呢？"
    assert second["standalone"] == "登录报错的问题在 2.4 版本里修复了吗？"
    assert format_trace(second).startswith("condense -> route")
    assert not format_trace(first).startswith("condense")  # a first question adds no step
    assert second["queries_tried"][0] == second["standalone"]  # what is searched is the condensed question


def test_an_english_pronoun_becomes_what_the_previous_question_was_about(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    conv.ask("What is the warehouse's order cut-off time?")
    state = conv.ask("Does it ship on weekends?")
    assert state["standalone"] == "Does the warehouse ship on weekends?"
    assert not state["abstained"] and any("warehouse" in c["source"] for c in state["citations"])


def test_a_chinese_pronoun_becomes_the_topic_of_the_previous_question(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    conv.ask("合同 B 的违约金上限是多少？")
    state = conv.ask("它的违约金按什么计算？")
    assert state["standalone"].startswith("合同 B") and "违约金" in state["standalone"]
    assert not state["abstained"] and state["citations"][0]["doc_id"] == "contracts/contract-b.md"


@pytest.mark.parametrize("first, follow_up", [
    ("What is the warehouse's order cut-off time?", "Does it deliver to the Moon?"),
    ("合同 B 的违约金上限是多少？", "它的签署人的生日是哪天？"),
])
def test_a_follow_up_the_knowledge_base_does_not_cover_is_refused(example_kb, first, follow_up):
    conv = Conversation(example_kb, OfflineModel())
    assert not conv.ask(first)["abstained"]
    state = conv.ask(follow_up)
    assert state["abstained"] and state["citations"] == [] and state["standalone"] != follow_up


def test_the_previous_answers_passages_are_carried_and_cited_only_when_used(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    first = conv.ask("合同 B 的违约金上限是多少？")
    state = conv.ask("它的违约金按什么计算？")
    carried = [e["id"] for e in state["evidence"] if e.get("carried")]
    assert carried and set(carried) <= {c["id"] for c in first["citations"]}
    assert next(e for e in state["trace"] if e["step"] == "condense")["detail"]["carried"] == carried
    assert state["citations"][0]["doc_id"] == "contracts/contract-b.md"  # the search alone ranks contract A first
    assert state["faithfulness"]["score"] == 1.0  # a carried passage cited is one the answer quotes
    login = Conversation(example_kb, OfflineModel())
    login.ask(LOGIN)
    other = login.ask("那 2.4 里呢？")  # another version: the passages about 2.3.1 are not carried
    assert not any(e.get("carried") for e in other["evidence"])
    weekend = Conversation(example_kb, OfflineModel())
    weekend.ask("What is the warehouse's order cut-off time?")
    ships = weekend.ask("Does it ship on weekends?")
    kept = {e["id"] for e in ships["evidence"] if e.get("carried")}
    assert kept and not kept <= {c["id"] for c in ships["citations"]}  # carried, not cited for being carried
    moon = conv.ask("Does it run on the Moon?")
    assert moon["abstained"] and moon["citations"] == []  # carried passages are no answer on their own


def test_a_passage_the_knowledge_base_no_longer_holds_is_not_carried(tiny_kb):
    history = [{"role": "user", "content": "When do orders paid on weekends ship?"},
               {"role": "assistant", "content": "On Monday. [1]",
                "evidence": [{"id": "gone#0", "text": "Orders paid on weekends ship on Monday."}]}]
    state = run_agentic_rag("And on holidays?", tiny_kb, OfflineModel(), history=history)
    assert not any(e.get("carried") for e in state["evidence"])


def test_history_may_be_states_or_messages_and_our_sources_block_is_not_the_users(example_kb):
    first = run_agentic_rag(LOGIN, example_kb, OfflineModel())
    from_state = run_agentic_rag("那 2.4 里呢？", example_kb, OfflineModel(), history=[first])
    reply = first["answer"] + "\n\nSources:\n[1] Nimbus 2.3.1 (release-notes/nimbus-2.3.1.md)\n"
    messages = [{"role": "user", "content": LOGIN}, {"role": "assistant", "content": reply}]
    from_messages = run_agentic_rag("那 2.4 里呢？", example_kb, OfflineModel(), history=messages)
    assert from_state["standalone"] == from_messages["standalone"] == "登录报错的问题在 2.4 版本里修复了吗？"
    assert "Sources:" not in from_messages["history"][1]["content"]
    assert from_state["history"][1]["evidence"] and "evidence" not in from_messages["history"][1]


def test_a_question_that_stands_alone_is_kept_as_asked(example_kb):
    history = [{"role": "user", "content": LOGIN}, {"role": "assistant", "content": "Yes. [1]"}]
    state = run_agentic_rag("仓库的截单时间是几点？", example_kb, OfflineModel(), history=history)
    assert state["standalone"] == state["question"] and format_trace(state).startswith("condense:as-asked")


@pytest.mark.parametrize("history, message", [
    ("hello", "history is a str, not a list"),
    ([1, 2], "history item 1 is a int, not a message"),
    ([{"role": "tool", "content": "x"}], "history item 1 has role 'tool'"),
    ([{"role": "user", "content": 42}], "history item 1's content is a int, not text"),
    ([{"question": 1, "answer": "x"}], "history item 1 is not a state"),
])
def test_a_malformed_history_is_one_clear_error_before_the_run(tiny_kb, history, message):
    with pytest.raises(ConfigurationError, match=message):
        run_agentic_rag("And then?", tiny_kb, OfflineModel(), history=history)


def test_a_long_history_is_bounded_and_the_trace_says_what_was_dropped(tiny_kb):
    history = [m for i in range(30) for m in ({"role": "user", "content": f"question {i} " + "word " * 300},
                                              {"role": "assistant", "content": f"answer {i}"})]
    state = run_agentic_rag("And the warehouse?", tiny_kb, OfflineModel(), history=history)
    assert 0 < len(state["history"]) <= 2 * MAX_TURNS and state["history"][-1]["content"] == "answer 29"
    dropped = next(e for e in state["trace"] if e["step"] == "history")
    assert dropped["summary"] == f"history:-{60 - len(state['history'])}"
    messages, _ = history_messages([{"role": "user", "content": "x" * 100_000}])
    assert len(messages[0]["content"]) < 5000


def test_a_resumed_state_keeps_its_own_history(tiny_kb):
    state = run_agentic_rag("When do orders ship?", tiny_kb, OfflineModel())
    with pytest.raises(ConfigurationError, match="keeps its own history"):
        run_agentic_rag("When do orders ship?", tiny_kb, OfflineModel(), state=state,
                        history=[{"role": "user", "content": "x"}])


def test_a_conversation_saves_resumes_and_resets(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    conv.ask(LOGIN)
    saved = conv.to_json()
    assert json.loads(saved)["turns"][0] == {"role": "user", "content": LOGIN}
    resumed = Conversation.from_json(saved, example_kb, OfflineModel())
    assert resumed.ask("那 2.4 里呢？")["standalone"] == "登录报错的问题在 2.4 版本里修复了吗？"
    assert len(resumed.history) == 4 and len(conv.history) == 2  # the copies are independent
    resumed.reset()
    assert resumed.history == [] and resumed.ask("那 2.4 里呢？")["standalone"] == "那 2.4 里呢？"
    for bad in ("not json", "[]", '{"format": 1, "turns": 3}'):
        with pytest.raises(ConfigurationError, match="saved conversation"):
            Conversation.from_json(bad, example_kb, OfflineModel())


def test_turns_asked_from_two_threads_run_one_after_the_other(example_kb):
    conv = Conversation(example_kb, OfflineModel())
    questions = [LOGIN, "仓库的截单时间是几点？"]
    threads = [threading.Thread(target=conv.ask, args=(q,)) for q in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    asked = [m["content"] for m in conv.history if m["role"] == "user"]
    assert sorted(asked) == sorted(questions)
    assert [m["role"] for m in conv.history] == ["user", "assistant"] * 2  # never interleaved


def test_offline_readings_are_decided_by_the_knowledge_base():
    kb = KnowledgeBase()
    kb.add_documents([Document("p", "The Journal of Psychotherapy Integration is published by the American "
                                    "Psychological Association.", title="Journal of Psychotherapy Integration"),
                      Document("a", "G. Stanley Hall was the first president of the American Psychological "
                                    "Association.", title="American Psychological Association")])
    history = ["user: What company published Journal of Psychotherapy Integration?",
               "assistant: American Psychological Association"]
    condensed = condense_query("Who was the first president of it?", history, OfflineModel(), kb)
    assert condensed.standalone == "Who was the first president of American Psychological Association?"
    assert condensed.readings == ["Who was the first president of Journal of Psychotherapy Integration?"]
    assert "the knowledge base fits" in condensed.reason


@pytest.fixture
def server():
    with FakeOpenAI(dim=16) as fake:
        yield fake


def hosted(server):
    return OpenAIChatModel("small-model", Endpoint(base_url=server.url, timeout=5, max_retries=0))


def test_a_hosted_model_condenses_through_its_prompt_and_gets_the_instructions(server, tiny_kb):
    server.chat.extend([
        json.dumps({"standalone": "When do orders paid on weekends ship?", "readings": [], "reason": "it: orders"}),
        json.dumps({"answer": "They ship the next business day. [1]", "evidence_score": 0.9, "missing": []}),
    ])
    history = [{"role": "user", "content": "When do orders paid on Friday ship?"},
               {"role": "assistant", "content": "The same day. [1]"}]
    state = run_agentic_rag("And on weekends?", tiny_kb, hosted(server), history=history,
                            instructions="Answer in one short sentence.")
    condense, generate = server.chat_requests()[0], server.chat_requests()[-1]
    prompt = condense["messages"][-1]["content"]
    assert "user: When do orders paid on Friday ship?" in prompt and "Last question: And on weekends?" in prompt
    assert condense["response_format"]["json_schema"]["name"] == "Condensed"
    assert state["standalone"] == "When do orders paid on weekends ship?"
    assert state["queries_tried"][0] == state["standalone"]
    systems = [m["content"] for m in generate["messages"] if m["role"] == "system"]
    assert any("Answer in one short sentence." in s for s in systems)
    assert not any("Answer in one short sentence." in m["content"] for m in condense["messages"])
    assert state["usage"]["by_task"]["condense"]["calls"] == 1


def test_a_condense_reply_that_breaks_the_schema_leaves_the_question_as_asked(server, tiny_kb):
    server.chat.extend(["not json at all", json.dumps({"readings": "no"}), "still not json"])
    condensed = condense_query("And on weekends?", ["user: When do orders ship?"], hosted(server), tiny_kb)
    assert condensed.standalone == "And on weekends?" and condensed.reason.startswith("fallback")


def test_the_offline_model_says_it_did_not_follow_instructions(tiny_kb):
    state = run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, OfflineModel(),
                            instructions="Answer like a pirate.")
    generate = next(e for e in state["trace"] if e["step"] == "generate")
    assert "instructions were not followed" in generate["detail"]["reason"]


def test_a_scripted_condense_is_the_step_alone(tiny_kb):
    model = ScriptedModel({"condense": [{"standalone": "  ", "reason": "blank"}]})
    assert condense_query("And then?", ["user: x"], model).standalone == "And then?"
    assert condense_query("And then?", [], model).reason == "no history"  # no call without a history
    assert model.tasks() == ["condense"]
