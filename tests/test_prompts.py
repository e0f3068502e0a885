from agentic_rag import Grade
from agentic_rag._prompts import TEMPLATES, format_evidence, render


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
