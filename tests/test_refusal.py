"""Refusing is part of answering: off-topic and content-free questions, end to end on the example
knowledge base, and the same answer whatever the hash seed."""
import json
import os
import subprocess
import sys

import pytest

from agentic_rag import OfflineModel, run_agentic_rag
from helpers import EXAMPLE_DATA, ROOT


@pytest.mark.parametrize("question", ["公司的年假政策是什么？", "Does Nimbus have an Android app?",
                                      "Nimbus 3.0 什么时候发布？"])
def test_a_question_the_knowledge_base_does_not_hold_is_refused(example_kb, question):
    state = run_agentic_rag(question, example_kb, OfflineModel())
    assert state["abstained"] and state["citations"] == [] and state["stop_reason"] != "sufficient"


def test_a_subject_only_unrelated_documents_speak_of_is_refused(tmp_path):
    from agentic_rag import KnowledgeBase, load_documents
    from agentic_rag.kb import Document

    kb = KnowledgeBase()
    kb.add_documents(load_documents(EXAMPLE_DATA).documents + [
        Document("pub-1", "Harbor Books is an independent publisher. Its CEO is Maria Lindqvist.",
                 title="Harbor Books"),
        Document("pub-2", "The CEO of Quill Press, Daniel Okafor, reported record sales.", title="Quill Press")])
    state = run_agentic_rag("Who is the CEO of Nimbus?", kb, OfflineModel())
    assert state["abstained"] and "Lindqvist" not in state["answer"] and "Okafor" not in state["answer"]


@pytest.mark.parametrize("question", ["的", "a", "??", "1"])
def test_a_question_with_no_content_word_is_direct_and_asks_for_a_question(example_kb, question):
    state = run_agentic_rag(question, example_kb, OfflineModel())
    assert state["stop_reason"] == "direct" and state["citations"] == [] and state["evidence"] == []
    assert "问题" in state["answer"] or "ask a question" in state["answer"].lower()


def test_the_questions_the_knowledge_base_does_hold_are_still_answered(example_kb):
    for question in ["登录报错的问题在 2.3.1 版本里修复了吗？", "合同A和合同B的违约责任有什么区别？"]:
        state = run_agentic_rag(question, example_kb, OfflineModel())
        assert not state["abstained"] and state["citations"], question


_RUN = """
import json, sys
from agentic_rag import KnowledgeBase, OfflineModel, load_documents, run_agentic_rag
kb = KnowledgeBase()
kb.add_documents(load_documents(sys.argv[1]).documents)
out = []
for q in ["Nimbus 有 Linux 客户端吗？", "合同A和合同B的违约责任有什么区别？", "Who is the CEO of Nimbus?"]:
    s = run_agentic_rag(q, kb, OfflineModel())
    out.append([s["stop_reason"], s["answer"], [c["id"] for c in s["citations"]], [e["summary"] for e in s["trace"]]])
print(json.dumps(out, ensure_ascii=False))
"""


def test_answers_do_not_depend_on_the_hash_seed():
    outputs = set()
    for seed in ("0", "1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", _RUN, str(EXAMPLE_DATA)], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1, "\n".join(outputs)
    assert json.loads(outputs.pop())[0][0]  # a stop reason was recorded
