from agentic_rag import Grade
from agentic_rag.steps._prompts import TEMPLATES, format_evidence, render


def test_evidence_is_numbered_as_it_must_be_cited():
    text = format_evidence([{"title": "A", "text": "first"}, {"source": "s.md", "text": "second"}])
    assert text == "[1] (A) first\n[2] (s.md) second"
    assert format_evidence([]) == "(none)"


def test_render_fills_every_task_and_appends_the_schema():
    for task in TEMPLATES:
        messages = render(task, Grade.model_json_schema(), question="Q?", evidence=[{"text": "e"}], tried=["q1"])
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "{" not in messages[1]["content"].split("JSON schema:")[0].replace("{question}", "")
        assert '"score"' in messages[1]["content"]
    user = render("rewrite", {}, question="Q?", missing=["a date"], tried=["q1", "q2"])[1]["content"]
    assert "- a date" in user and "- q1\n- q2" in user and "Evidence so far:\n(none)" in user


HEADING_RULE = "a heading, a table-of-contents line"


def test_the_grade_prompts_say_headings_and_restatements_answer_nothing():
    from agentic_rag import GradedAnswer
    from agentic_rag.steps._prompts import GRADING

    grade = render("grade", Grade.model_json_schema(), question="Q?", evidence=[{"text": "1. Overview"}])[1]["content"]
    assert HEADING_RULE in grade.lower() and "only restates the question" in grade
    assert "evidence made only of such lines is not sufficient" in grade
    folded = render("generate", GradedAnswer.model_json_schema(), question="Q?", evidence=[{"text": "e"}],
                    grading=GRADING)[1]["content"]
    assert HEADING_RULE in folded.lower() and "only restates the question" in folded
    assert "evidence made only of such lines is not sufficient" in folded
    plain = render("generate", Grade.model_json_schema(), question="Q?", evidence=[{"text": "e"}], grading="")
    assert "Never answer with a heading, a table-of-contents line or a restatement of the question" in \
        plain[1]["content"] and "evidence_score" not in plain[1]["content"].split("JSON schema:")[0]


def test_the_hosted_model_is_sent_the_rule_when_it_grades_and_when_it_answers():
    import json

    from agentic_rag import Endpoint, KnowledgeBase, ModelSet, OpenAIChatModel, run_agentic_rag
    from agentic_rag.kb import Document
    from openai_server import FakeOpenAI

    kb = KnowledgeBase()
    kb.add_documents([Document("w", "The warehouse ships orders paid before 15:00 the same day.", title="Warehouse")])
    answer = "The warehouse ships orders paid before 15:00 the same day. [1]"
    with FakeOpenAI(dim=16) as server:
        endpoint = Endpoint(base_url=server.url, api_key=None, timeout=5, max_retries=0)
        model, grader = OpenAIChatModel("small-model", endpoint), OpenAIChatModel("big-model", endpoint)
        server.chat.extend([json.dumps({"answer": answer, "evidence_score": 0.9})])    # graded in the answer's reply
        folded = run_agentic_rag("When do orders paid on weekends ship?", kb, model)
        server.chat.extend([json.dumps({"score": 0.9, "sufficient": True}), json.dumps({"answer": answer})])
        apart = run_agentic_rag("When do orders paid on weekends ship?", kb, ModelSet(model, grade=grader))
        sent = [r["messages"][-1]["content"] for r in server.chat_requests()]
    assert folded["answer"] == apart["answer"] == answer and len(sent) == 3
    assert all(HEADING_RULE in text.lower() for text in sent)      # the folded generate, the grade, the generate
    assert "only restates the question" in sent[0] and "only restates the question" in sent[1]
    assert "Never answer with a heading" in sent[2] and "only restates the question" not in sent[2]
