from agentic_rag.models import _extractive as extractive
from agentic_rag.models import _planning as planning

CONTRACTS = [
    {"title": "Contract A", "text": "Clause 7: late delivery costs 0.5% per day, capped at 10%."},
    {"title": "Contract B", "text": "Clause 6: late delivery costs 1% per week, capped at 5%."},
]


def test_route_comparison_nested_and_plain():
    assert planning.route({"question": "合同A和合同B的违约责任有什么区别？"}).route == "multi_hop"
    assert planning.route({"question": "Who founded the company that makes the Model S?"}).route == "multi_hop"
    assert planning.route({"question": "When was Nimbus 2.3.1 released?"}).route == "vector"


def test_decompose_comparison_into_one_query_per_item():
    plan = planning.decompose({"question": "合同A和合同B的违约责任有什么区别？"})
    assert [q.query for q in plan.subqueries] == ["合同A 违约责任", "合同B 违约责任"]
    assert all(q.depends_on == [] for q in plan.subqueries)


def test_decompose_nested_question_into_a_bridge_hop():
    plan = planning.decompose({"question": "Who was the first president of the association which published "
                                           "Journal of Psychotherapy Integration?"})
    first, second = plan.subqueries
    assert "association" in first.query and "Journal of Psychotherapy Integration" in first.query
    assert second.depends_on == [0] and "first president" in second.query


def test_decompose_follows_bridge_names_found_in_evidence():
    evidence = [{"title": "Society for the Exploration of Psychotherapy Integration",
                 "text": "The Society for the Exploration of Psychotherapy Integration publishes the journal."}]
    plan = planning.decompose({"question": "Who was the first president of the publisher of the journal?",
                               "evidence": evidence})
    assert plan.subqueries[0].query.startswith("Society for the Exploration of Psychotherapy Integration")


def test_rewrite_adds_missing_and_feedback_terms_and_avoids_tried_queries():
    evidence = [{"text": "the session token refresh failed"}, {"text": "token refresh retried three times"}]
    first = planning.rewrite({"question": "login error fixed?", "missing": ["2.3.1"], "evidence": evidence})
    assert first.query.startswith("login error fixed? 2.3.1") and "token" in first.query
    second = planning.rewrite({"question": "login error fixed?", "missing": ["2.3.1"], "evidence": evidence,
                               "tried": [first.query]})
    assert second.query != first.query


def test_grade_rewards_terms_together_and_the_asked_answer_type():
    good = extractive.grade({"question": "What are the late delivery costs of Contract B?", "evidence": CONTRACTS})
    assert good.sufficient and good.score >= 0.6
    missing = extractive.grade({"question": "Does Contract B cover Linux servers?", "evidence": CONTRACTS,
                                "weights": {"contract": 0.5, "cover": 1.0, "linux": 5.0, "servers": 4.0}})
    assert not missing.sufficient and "linux" in missing.missing
    none = extractive.grade({"question": "anything?", "evidence": []})
    assert none.score < 0.5 and not none.sufficient


def test_generate_quotes_one_sentence_per_part_with_citations():
    answer = extractive.generate({"question": "Compare the penalties of Contract A and Contract B",
                                  "evidence": CONTRACTS, "parts": ["Contract A penalty", "Contract B penalty"]})
    assert answer.answer == ("Clause 7: late delivery costs 0.5% per day, capped at 10%. [1] "
                             "Clause 6: late delivery costs 1% per week, capped at 5%. [2]")
    assert "extractive" in answer.reason


def test_generate_without_evidence_is_a_direct_reply_that_says_so():
    assert "without consulting the knowledge base" in extractive.generate({"question": "hello"}).answer
    replies = {q: extractive.generate({"question": q, "evidence": []})
               for q in ("你好", "???", "的？", "Translate 'good night' into French")}
    assert [r.reason for r in replies.values()] == ["greeting", "no content word", "no content word",
                                                    "direct, offline"]
    assert replies["的？"].answer.startswith("请提出一个问题") and replies["???"].answer.startswith("Please ask")
    assert all(any(note in r.answer for note in ("not consulted", "without consulting", "未查询知识库"))
               for r in replies.values())


def test_judge_finds_the_planted_sentence_and_repair_removes_it():
    answer = ("Clause 6: late delivery costs 1% per week, capped at 5%. [2] "
              "Contract B also grants a free laptop to every employee. [2]")
    verdict = extractive.judge({"answer": answer, "evidence": CONTRACTS})
    assert verdict.score == 0.5
    assert verdict.unsupported == ["Contract B also grants a free laptop to every employee. [2]"]
    repaired = extractive.repair({"answer": answer, "unsupported": verdict.unsupported})
    assert repaired.answer == "Clause 6: late delivery costs 1% per week, capped at 5%. [2]"


def test_judge_checks_every_part_is_addressed():
    verdict = extractive.judge({"answer": "Clause 7: late delivery costs 0.5% per day. [1]", "evidence": CONTRACTS,
                                "parts": ["Contract A penalty", "Contract B weekly penalty"]})
    assert not verdict.complete and verdict.missing == ["Contract B weekly penalty"]


def test_generate_names_a_disagreement_and_cites_both_sources():
    evidence = [{"doc_id": "notes", "title": "Release notes", "text": "The session timeout is 15 minutes."},
                {"doc_id": "faq", "title": "FAQ", "text": "The session timeout is 30 minutes."},
                {"doc_id": "misc", "title": "Misc", "text": "Sessions are great."}]
    answer = extractive.generate({"question": "How many minutes is the session timeout?", "evidence": evidence})
    assert answer.answer == ("The sources disagree: The session timeout is 15 minutes. [1] "
                             "The session timeout is 30 minutes. [2]")
    agreeing = [evidence[0], dict(evidence[1], text="The session timeout is 15 minutes, as before.")]
    assert "disagree" not in extractive.generate({"question": "How many minutes is the session timeout?",
                                                  "evidence": agreeing}).answer


def test_generate_prefers_a_sentence_with_a_value_the_question_does_not_state():
    evidence = [{"doc_id": "a", "title": "News", "text": "2021年人口出生率引发关注，各地陆续发布数据。"},
                {"doc_id": "b", "title": "统计公报", "text": "2021年全年人口出生率为7.52‰。"}]
    answer = extractive.generate({"question": "我国2021年人口出生率", "evidence": evidence})
    assert answer.answer.startswith("2021年全年人口出生率为7.52‰。 [2]")


def test_generate_does_not_quote_the_same_sentence_twice():
    same = "The plant opened in 1998."
    evidence = [{"doc_id": "a", "text": same}, {"doc_id": "b", "text": same}]
    assert extractive.generate({"question": "When did the plant open?", "evidence": evidence}).answer == f"{same} [1]"


def _passage(doc, title, text):
    return {"id": f"{doc}#0", "doc_id": doc, "title": title, "text": text, "kind": "passage"}


def test_evidence_about_the_subject_follows_titles_hop_by_hop():
    singer = _passage("s", "Corey Taylor", "Corey Taylor was born in Des Moines.")
    city = _passage("c", "Des Moines", "Des Moines is the capital of Iowa.")
    state = _passage("i", "Iowa", "Iowa is a state in the Midwestern United States.")
    other = _passage("o", "London", "London is the capital of England.")
    question = "Which region is Corey Taylor's city of birth located?"
    assert extractive.about_subject(question, [other, state, city, singer]) == [state, city, singer]
    assert extractive.about_subject("Where is the Rhine?", [other]) == []
    assert extractive.about_subject("什么是年假？", [other]) == [other]  # no name to be about: all of it


def test_grade_is_zero_when_no_passage_is_about_what_the_question_names():
    evidence = [_passage("h", "Harbor Books", "Harbor Books is a publisher. Its CEO is Maria Lindqvist."),
                _passage("n", "Nimbus Notes overview", "Nimbus Notes is a team note-taking application.")]
    grade = extractive.grade({"question": "Who is the CEO of Nimbus?", "evidence": evidence})
    assert grade.score == 0.0 and not grade.sufficient and "no passage is about CEO of Nimbus" in grade.reason


BAND = _passage("m", "Maiden Japan", "Maiden Japan is a live EP by the English heavy metal band Iron Maiden. "
                                     "The title is a pun of Deep Purple's live album Made in Japan.")
FORMED = _passage("i", "Iron Maiden", "Iron Maiden are an English heavy metal band formed in Leyton, East London, "
                                      "in 1975 by bassist Steve Harris.")
PURPLE = _passage("d", "Deep Purple", "Deep Purple are an English rock band formed in Hertford in 1968.")
NESTED = "Where did the band form that made the live album Maiden Japan?"


def test_hop_levels_count_hops_from_the_question_names_and_share_a_title_s_hop():
    from agentic_rag.text._lexical import hop_levels
    more = _passage("m2", "Maiden Japan", "It was released in 1981.")  # the same subject: its hop, not the next
    assert hop_levels(NESTED, [BAND, FORMED, PURPLE, more]) == {0: 0, 1: 1, 2: 1, 3: 0}
    singer = _passage("s", "Corey Taylor", "Corey Taylor was born in Des Moines.")
    city = _passage("c", "Des Moines", "Des Moines is the capital of Iowa.")
    state = _passage("i", "Iowa", "Iowa is a state in the Midwestern United States.")
    assert hop_levels("Which region is Corey Taylor's city of birth located?", [state, city, singer]) == \
        {0: 2, 1: 1, 2: 0}


def test_a_nested_answer_quotes_the_last_hop_and_cites_each_hop():
    answer = extractive.generate({"question": NESTED, "evidence": [BAND, PURPLE, FORMED]}).answer
    assert answer.startswith("Iron Maiden are an English heavy metal band formed in Leyton") and answer.endswith(
        "Maiden Japan is a live EP by the English heavy metal band Iron Maiden. [1]")
    assert "[3]" in answer and "[2]" not in answer


def test_a_plain_or_comparison_question_is_answered_as_before():
    # not nested: the question's own passage answers, whatever passages its titles lead to
    plain = extractive.generate({"question": "Who made the live album Maiden Japan?", "evidence": [BAND, FORMED]})
    assert "[1]" in plain.answer and "[2]" not in plain.answer
    # a comparison is answered item by item, not along hops
    both = extractive.generate({"question": "Which was formed first, the band that made Maiden Japan or Deep "
                                            "Purple?", "evidence": [BAND, FORMED, PURPLE]}).answer
    assert not both.startswith("Iron Maiden are an English heavy metal band formed in Leyton")
    # nested, but no passage beyond the question's names: no chain to follow
    alone = extractive.generate({"question": NESTED, "evidence": [BAND]}).answer
    assert alone == "The title is a pun of Deep Purple's live album Made in Japan. [1] " \
                    "Maiden Japan is a live EP by the English heavy metal band Iron Maiden. [1]"


def test_the_check_counts_a_nested_answer_complete_only_when_each_hop_is_cited():
    from agentic_rag.text._lexical import missing_parts
    evidence = [BAND, FORMED]
    last_only = "Iron Maiden are an English heavy metal band formed in Leyton. [2]"
    first_only = "Maiden Japan is a live EP by the English heavy metal band Iron Maiden. [1]"
    assert missing_parts(last_only, evidence, [], NESTED) == ["hop 1: Maiden Japan"]
    assert missing_parts(first_only, evidence, [], NESTED) == ["hop 2: Iron Maiden"]
    assert missing_parts(f"{last_only} {first_only}", evidence, [], NESTED) == []
    assert missing_parts(first_only, [BAND], [], NESTED) == []  # no bridge shown: no hop to ask for
    assert missing_parts(first_only, evidence, []) == []        # without the question: parts only
    verdict = extractive.judge({"question": NESTED, "answer": last_only, "evidence": evidence})
    assert not verdict.complete and verdict.missing == ["hop 1: Maiden Japan"]
