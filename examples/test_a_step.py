"""Unit-testing one step with ScriptedModel: queue the model's replies, call the step, check it.

    python examples/test_a_step.py      (or: pytest examples/test_a_step.py)
"""
from agentic_rag import ScriptedModel, check_faithfulness, repair_answer, verify_sufficiency

EVIDENCE = [{"title": "Release notes 2.3.1", "text": "Version 2.3.1 fixed the authentication timeout."}]


def test_grade_is_left_to_the_model_only_when_the_rules_are_unsure():
    model = ScriptedModel({"grade": [{"score": 0.8, "sufficient": True, "missing": []}]})
    grade = verify_sufficiency("Was the sign-in problem solved in the spring release?", EVIDENCE, model)
    assert grade.sufficient and model.tasks() == ["grade"]           # one call, recorded


def test_a_planted_claim_is_caught_and_removed():
    answer = "Version 2.3.1 fixed the authentication timeout. [1] It also doubled the price. [1]"
    model = ScriptedModel()                                          # no reply needed: lexical checks decide
    verdict = check_faithfulness("Was it fixed?", answer, EVIDENCE, model)
    assert verdict.unsupported == ["It also doubled the price. [1]"]
    model = ScriptedModel({"repair": [{"answer": "Version 2.3.1 fixed the authentication timeout. [1]"}]})
    assert repair_answer("Was it fixed?", answer, verdict.unsupported, EVIDENCE, model).answer.endswith("[1]")


if __name__ == "__main__":
    test_grade_is_left_to_the_model_only_when_the_rules_are_unsure()
    test_a_planted_claim_is_caught_and_removed()
    print("both step tests pass")
