import json

import pytest

from agentic_rag import ConfigurationError
from agentic_rag.eval import load_set


def test_loads_the_shared_format(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"id": "c1", "title": "T", "text": "body"}) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps(
        {"id": "q1", "question": "what?", "answers": [["a", "b"]], "relevant_ids": ["c1"],
         "answerable": True, "kind": "single"}) + "\n\n")
    corpus, questions = load_set(tmp_path)
    assert corpus[0].id == "c1" and corpus[0].title == "T" and corpus[0].source == f"{tmp_path.name}/c1"
    assert questions[0].relevant_ids == ["c1"] and questions[0].answers == [["a", "b"]]


def test_missing_or_broken_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="corpus.jsonl not found"):
        load_set(tmp_path)
    (tmp_path / "corpus.jsonl").write_text("{broken\n")
    with pytest.raises(ConfigurationError, match=r"corpus.jsonl:1 is not valid JSON"):
        load_set(tmp_path)
