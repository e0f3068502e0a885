"""verify_sufficiency's deterministic check: a number the knowledge base never holds settles the grade."""
from agentic_rag import OfflineModel, ScriptedModel, verify_sufficiency
from agentic_rag.steps import quick_grade
from agentic_rag.steps._verify import question_weights, unseen_terms

EVIDENCE = [{"id": "n#0", "doc_id": "n", "title": "Release notes 2.3.1", "text": "Nimbus 2.3.1 fixed the login error."}]
KB_WEIGHTS = {"nimbus": 0.5, "2.3.1": 1.2, "releas": 0.9, "fix": 1.1}  # idf of the tokens the knowledge base holds


def test_a_number_the_knowledge_base_holds_nowhere_grades_zero_without_a_model_call():
    question = "What did Nimbus 3.0 fix?"
    unseen = unseen_terms(question, KB_WEIGHTS)
    assert unseen == ["3.0"]
    model = ScriptedModel()  # no replies queued: any model call would fail
    grade = verify_sufficiency(question, EVIDENCE, model, 0.6, question_weights(question, KB_WEIGHTS), unseen)
    assert (grade.score, grade.sufficient, grade.missing) == (0.0, False, ["3.0"]) and model.calls == []


def test_a_number_the_evidence_holds_does_not_settle_the_grade():
    question = "What did Nimbus 2.3.1 fix?"
    assert quick_grade(question, EVIDENCE, None, unseen_terms(question, KB_WEIGHTS)).sufficient


def test_unseen_terms_weigh_more_than_any_held_one_and_word_boundaries_least():
    weights = question_weights("公司的年假政策是什么？", {"公司": 2.0, "政策": 1.0, "年": 0.1, "假": 0.3})
    assert weights["年假"] > 2.0 and weights["假政"] > 2.0
    weights = question_weights("登录报错了吗？", {"登录": 2.0, "报错": 1.5})
    assert weights["录报"] == 1.5  # between two known words: the lowest weight the knowledge base gives


def test_the_offline_grade_scores_evidence_off_the_subject_zero():
    question = "公司的年假政策是什么？"
    evidence = [{"id": "r#0", "doc_id": "r", "title": "退换货政策",
                 "text": "本公司的退换货政策：自签收之日起 7 天内可退货。"}]
    grade = verify_sufficiency(question, evidence, OfflineModel())
    assert grade.score == 0.0 and not grade.sufficient and "年假" in grade.missing
