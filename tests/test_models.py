import json

import pytest

from agentic_rag import Answer, ConfigurationError, Grade, ModelError, ModelOutputError
from agentic_rag.models import (
    BudgetExceeded,
    Meter,
    ModelRequest,
    ModelSet,
    OfflineModel,
    ScriptedModel,
    complete_with_repair,
    has_capability,
    parse_reply,
)
from agentic_rag.models._protocol import budget_tokens, count_reply, prompt_tokens, shown


def request(task="grade", schema=Grade, content="hello world"):
    return ModelRequest(task=task, messages=[{"role": "user", "content": content}], inputs={}, schema=schema)


def test_parse_reply_finds_json_in_fences_and_prose():
    assert parse_reply('{"score": 0.5, "sufficient": false}', Grade).score == 0.5
    assert parse_reply('```json\n{"score": 1, "sufficient": true}\n```', Grade).sufficient
    assert parse_reply('Sure! {"answer": "x [1]"} Hope that helps.', Answer).answer == "x [1]"
    with pytest.raises(ModelOutputError, match="does not fit Grade"):
        parse_reply('{"score": 3, "sufficient": true}', Grade)   # score outside [0, 1]
    with pytest.raises(ModelOutputError):
        parse_reply("no json here", Grade)


def test_one_repair_attempt_then_a_clear_error():
    sent = []
    replies = iter(["not json", '{"score": 0.7, "sufficient": true}'])

    def send(messages):
        sent.append(messages)
        return next(replies)

    assert complete_with_repair(request(), send).score == 0.7
    assert "not valid" in sent[1][-1]["content"] and sent[1][-2] == {"role": "assistant", "content": "not json"}
    with pytest.raises(ModelOutputError):
        complete_with_repair(request(), lambda messages: "still not json")


def test_scripted_model_queues_records_defaults_and_raises():
    model = ScriptedModel({"grade": [{"score": 0.2, "sufficient": False}, Grade(score=0.9, sufficient=True),
                                     ModelError("server down")]},
                          default={"generate": {"answer": "fallback"}})
    assert model.complete(request()).score == 0.2
    assert model.complete(request()).score == 0.9
    with pytest.raises(ModelError, match="server down"):
        model.complete(request())
    with pytest.raises(ModelError, match="no reply left for task 'grade'"):
        model.complete(request())
    assert model.complete(request("generate", Answer)).answer == "fallback"
    assert model.tasks() == ["grade", "grade", "grade", "grade", "generate"]


def test_scripted_text_reply_is_repaired_by_the_next_queued_reply():
    model = ScriptedModel({"grade": ["garbage", '{"score": 0.4, "sufficient": false}', "bad", "worse"]})
    assert model.complete(request()).score == 0.4
    with pytest.raises(ModelOutputError):
        model.complete(request())


def test_meter_counts_tokens_per_task_and_enforces_the_budget():
    model = ScriptedModel(default={"grade": {"score": 0.5, "sufficient": False}})
    meter = Meter(model, budget=60)
    meter.complete(request(content="hello world"))
    usage = meter.usage
    assert usage["model_calls"] == 1 and usage["prompt_tokens"] == 2
    assert usage["completion_tokens"] > 5 and usage["by_task"]["grade"]["calls"] == 1
    with pytest.raises(BudgetExceeded, match="grade needs"):
        meter.complete(request(content="word " * 100))
    assert usage["model_calls"] == 1 and len(model.calls) == 1   # the refused call never reached the model


def test_model_set_sends_each_task_to_its_model():
    judge = ScriptedModel(default={"grade": {"score": 1, "sufficient": True}})
    writer = ScriptedModel(default={"generate": {"answer": "a"}})
    models = ModelSet(writer, grade=judge)
    assert models.complete(request()).sufficient and models.complete(request("generate", Answer)).answer == "a"
    assert judge.tasks() == ["grade"] and writer.tasks() == ["generate"]
    assert models.name == "set(default=scripted, grade=scripted)"


def test_offline_model_refuses_unknown_tasks():
    with pytest.raises(ModelError, match="no rule for task 'summarise'"):
        OfflineModel().complete(request("summarise"))


def test_budget_exceeded_is_in_the_error_tree():
    from agentic_rag.core import _errors as errors
    from agentic_rag.models import _meter as meter

    assert issubclass(errors.BudgetExceeded, errors.AgenticRAGError) and meter.BudgetExceeded is errors.BudgetExceeded


def test_every_call_carries_a_limit_no_larger_than_the_cap_or_what_the_budget_has_left():
    model = ScriptedModel(default={"grade": {"score": 0.5, "sufficient": False}})
    Meter(model, max_completion_tokens=300).complete(request())
    assert model.calls[-1].max_tokens == 300 and model.calls[-1].allowance is None   # no budget: the cap
    meter = Meter(model, budget=2000, max_completion_tokens=300)
    meter.complete(request())
    assert model.calls[-1].max_tokens == 300
    meter.usage.update(prompt_tokens=1800, completion_tokens=0)          # 200 left
    meter.complete(request(content=" ".join(["word"] * 100)))             # 100 prompt tokens; margin 10 + 8
    sent = model.calls[-1]
    assert sent.allowance == 200 - (100 // 10 + 8) and sent.max_tokens == sent.allowance - 100 == 82
    meter.usage.update(prompt_tokens=1880, completion_tokens=0)          # 120 left: 100 + margin, too little to reply
    with pytest.raises(BudgetExceeded, match="room for a reply"):
        meter.complete(request(content="word " * 100))


def test_a_reply_over_its_limit_is_cut_off_and_counts_as_the_limit():
    huge = {"score": 0.5, "sufficient": False, "missing": ["x " * 5000]}
    for reply in (huge, json.dumps(huge)):                                # a dict and a text reply alike
        model = ScriptedModel({"grade": [reply]})
        meter = Meter(model, budget=10_000, max_completion_tokens=100)
        with pytest.raises(ModelOutputError, match="cut off at its limit of 100 tokens"):
            meter.complete(request())
        assert meter.usage["model_calls"] == 1 and meter.usage["completion_tokens"] == 100
        assert meter.usage["prompt_tokens"] == 2 and meter.tokens_used <= 10_000
    with pytest.raises(ModelOutputError, match="cut off"):               # on its own too, as a real model would be
        ScriptedModel({"grade": [huge]}).complete(request())


def test_count_reply_keeps_a_servers_count_and_caps_its_own_at_the_limit():
    limited = ModelRequest(task="grade", messages=[], max_tokens=5)
    assert count_reply(limited, 3, "a b") == {"prompt_tokens": 3, "completion_tokens": 2}
    usage = {"prompt_tokens": 1, "completion_tokens": 1}
    with pytest.raises(ModelOutputError, match="cut off at its limit of 5") as own:
        count_reply(limited, 3, "word " * 50, usage=usage)
    assert own.value.usage is usage and usage == {"prompt_tokens": 4, "completion_tokens": 6}
    with pytest.raises(ModelOutputError) as served:
        count_reply(limited, 3, "a b", reported=40)                       # a server that ignored the limit
    assert served.value.usage == {"prompt_tokens": 3, "completion_tokens": 40}
    with pytest.raises(ModelOutputError) as cut:
        count_reply(limited, 3, "a b", cut=True)                          # the server stopped it at the limit
    assert cut.value.usage == {"prompt_tokens": 3, "completion_tokens": 5}


def test_replies_that_fail_to_validate_are_metered_like_any_other():
    model = ScriptedModel({"grade": ["garbage", '{"score": 7}']})
    meter = Meter(model, budget=10_000)
    with pytest.raises(ModelOutputError):
        meter.complete(request())
    usage = meter.usage
    assert usage["model_calls"] == 1 and usage["by_task"]["grade"]["calls"] == 1
    assert usage["prompt_tokens"] > 2 * 2 and usage["completion_tokens"] > 0      # both sends counted


def test_a_dict_reply_that_breaks_the_schema_is_repaired_like_text():
    model = ScriptedModel({"grade": [{"score": 3, "sufficient": True}, {"score": 0.4, "sufficient": False}]})
    assert model.complete(request()).score == 0.4
    with pytest.raises(ModelOutputError, match="does not fit Grade"):     # not a pydantic ValidationError
        ScriptedModel({"grade": [{"foo": 1}, Grade(score=1, sufficient=True).model_dump() | {"score": -1}]}).complete(
            request())


def test_no_repair_request_without_room_for_it_in_the_budget():
    model = ScriptedModel({"grade": ["not json", '{"score": 0.4, "sufficient": false}']})
    meter = Meter(model, budget=120, max_completion_tokens=50)
    with pytest.raises(ModelOutputError, match="no room for a repair"):
        meter.complete(request())
    assert meter.tokens_used <= 120 and meter.usage["model_calls"] == 1


class ProviderCounts:
    """A model whose provider counts more tokens than tiktoken does, without declaring that it reports them."""

    name = "reporting"

    def complete_with_usage(self, request):
        return Grade(score=0.5, sufficient=False), {"prompt_tokens": 900, "completion_tokens": 40}

    def complete(self, request):
        return self.complete_with_usage(request)[0]


class Reporting(ProviderCounts):
    reports_usage = True


def test_a_provider_counting_past_the_margin_is_recorded_as_overshoot():
    meter = Meter(Reporting(), budget=500)
    with pytest.raises(BudgetExceeded, match="counted past the budget"):   # the call's count passed it
        meter.complete(request())
    assert meter.usage["prompt_tokens"] == 900 and meter.usage["overshoot_tokens"] == 440
    assert meter.usage["reported_prompt_tokens"] == 900 and meter.usage["counted_prompt_tokens"] < 900
    with pytest.raises(BudgetExceeded):
        meter.complete(request())                                         # nothing is left: no further call


@pytest.mark.parametrize("figures", [(-900, 40), (900, -40), (900, 4.5), (True, 40), (900, "40")])
def test_usage_any_model_reports_is_checked_before_it_is_billed(figures):
    class Broken(Reporting):
        def complete_with_usage(self, request):
            return Grade(score=0.5, sufficient=False), {"prompt_tokens": figures[0], "completion_tokens": figures[1]}

    meter = Meter(Broken(), budget=5000)
    meter.complete(request())
    usage = meter.usage
    assert usage["prompt_tokens"] == usage["counted_prompt_tokens"] == prompt_tokens(request().messages)  # tiktoken's
    assert usage["completion_tokens"] == usage["counted_completion_tokens"] > 0
    assert usage["invalid_usage"] == [{"task": "grade", "prompt_tokens": shown(figures[0]),
                                       "completion_tokens": shown(figures[1])}]
    assert usage["reported_prompt_tokens"] == budget_tokens(figures[0]) and usage["overshoot_tokens"] == 0


def test_usage_too_large_to_bill_is_kept_budgeted_and_billed_by_tiktoken():
    class Huge(Reporting):
        def complete_with_usage(self, request):
            return Grade(score=0.5, sufficient=False), {"prompt_tokens": 10_000_001, "completion_tokens": 40}

    meter = Meter(Huge(), budget=20_000_000)                       # the provider's count fits this budget
    meter.complete(request())
    usage = meter.usage
    assert usage["prompt_tokens"] == usage["counted_prompt_tokens"] == prompt_tokens(request().messages)
    assert (usage["reported_prompt_tokens"], usage["reported_completion_tokens"]) == (10_000_001, 40)
    assert usage["invalid_usage"] == [{"task": "grade", "prompt_tokens": 10_000_001, "completion_tokens": 40}]
    with pytest.raises(BudgetExceeded, match="counted past the budget .*: 20000082 of 20000000"):
        meter.complete(request())                                   # the second count passes it
    assert meter.usage["overshoot_tokens"] == 82 and meter.usage["model_calls"] == 2
    with pytest.raises(BudgetExceeded, match="20000082 of 20000000 are used"):
        meter.complete(request())                                   # and no call is made past it


def test_usage_a_model_does_not_declare_it_reports_is_counted_by_tiktoken():
    for model in (ProviderCounts(), ModelSet(OfflineModel(), grade=ProviderCounts())):
        meter = Meter(model)
        meter.complete(request())
        assert meter.usage["prompt_tokens"] == prompt_tokens(request().messages) != 900
    meter = Meter(ModelSet(OfflineModel(), grade=Reporting()))
    meter.complete(request())
    assert meter.usage["prompt_tokens"] == 900                            # the set forwards the task's capability


class Streaming:
    """A third-party model that streams its answer in pieces."""

    name = "streaming"
    streams = True

    def complete(self, request):
        return Answer(answer="whole answer")

    def stream_answer(self, request, on_token):
        for piece in ("piece ", "by piece"):
            on_token(piece)
        return Answer(answer="piece by piece"), None


class Undeclared(Streaming):
    streams = False


@pytest.mark.parametrize("model, pieces", [(Streaming(), ["piece ", "by piece"]), (Undeclared(), ["whole answer"]),
                                           (ModelSet(OfflineModel(), generate=Streaming()), ["piece ", "by piece"]),
                                           (ModelSet(Undeclared()), ["whole answer"])])
def test_only_a_model_that_declares_streaming_is_streamed(model, pieces):
    received = []
    reply, _ = Meter(model).stream_answer(request("generate", Answer), received.append)
    assert received == pieces and reply.answer == "".join(pieces)


def test_an_unknown_capability_is_an_error_not_false():
    assert has_capability(ScriptedModel(), "reports_usage") and not has_capability(object(), "streams")
    with pytest.raises(ConfigurationError, match="unknown model capability 'stream'"):
        has_capability(Streaming(), "stream")


class Chatty:
    """A model that ignores the limit: the meter cuts it off."""

    name = "chatty"

    def complete(self, request):
        return Answer(answer="word " * 2000)


def test_the_meter_cuts_off_a_model_that_ignores_the_limit():
    meter = Meter(Chatty(), budget=5000, max_completion_tokens=64)
    with pytest.raises(ModelOutputError, match="cut off"):
        meter.complete(request("generate", Answer))
    assert meter.usage["completion_tokens"] == 64 and meter.usage["model_calls"] == 1
