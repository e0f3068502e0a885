import pytest

from agentic_rag.errors import ModelError, ModelOutputError
from agentic_rag.models import (BudgetExceeded, Meter, ModelRequest, ModelSet, OfflineModel, ScriptedModel,
                                complete_with_repair, parse_reply)
from agentic_rag.schemas import Answer, Grade


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
