"""bridge_names and bridge_search: a multi-hop question's next hop, from literal evidence."""
from agentic_rag import KnowledgeBase, SubQuery
from agentic_rag.kb import Document
from agentic_rag.steps import vector_search
from agentic_rag.steps._bridge import bridge_names, bridge_search

QUESTION = "Where was the person born who directed the film Quiet Harbor?"
EVIDENCE = [{"title": "Quiet Harbor", "text": "The film Quiet Harbor was directed by Anna Berg in 2019."},
            {"title": "Bergen", "text": "Many directors were born in Bergen, a city of festivals."}]


def test_bridge_names_are_the_names_the_evidence_holds_and_the_question_does_not():
    assert bridge_names(QUESTION, EVIDENCE) == ["Anna Berg", "Bergen"]       # not Quiet Harbor: it is asked
    assert bridge_names(QUESTION, EVIDENCE, limit=1) == ["Anna Berg"]        # the best passage's first
    assert bridge_names(QUESTION, EVIDENCE, tried=["Anna Berg"]) == ["Bergen"]  # never searched twice
    assert bridge_names(QUESTION, []) == []


def test_bridge_search_adds_the_passage_about_each_name_after_the_rounds_own():
    kb = KnowledgeBase()
    kb.add_documents([Document("film", EVIDENCE[0]["text"], title="Quiet Harbor"),
                      Document("berg", "Anna Berg was born in Tromsø and studied in Oslo.", title="Anna Berg"),
                      Document("other", EVIDENCE[1]["text"], title="Bergen")])
    first = vector_search([SubQuery(query=QUESTION)], kb, QUESTION, k=1)
    assert first.new_ids == ["film#0"]
    bridged = bridge_search(["Anna Berg"], first, kb, QUESTION)
    assert bridged.new_ids[:1] == ["film#0"] and "berg#0" in bridged.new_ids[1:]
    assert bridged.queries_run == [QUESTION, "Anna Berg"] and bridged.round_ids[:1] == ["film#0"]
    assert {e["id"] for e in bridged.pool} >= {"film#0", "berg#0"}
    assert len(bridged.new_ids) == 3 and len(bridge_search(["Anna Berg"], first, kb, QUESTION, k=1).new_ids) == 2
