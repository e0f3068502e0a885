"""The lexical layer: content words, which key terms a text lacks (Chinese word boundaries aside),
names, answer types and the shape of a question (direct, comparison, nested)."""
import pytest

from agentic_rag.text._lexical import (
    absent_terms,
    adds_needed,
    answer_type,
    entities,
    has_content,
    is_comparison,
    is_direct,
    is_nested,
    key_terms,
)
from agentic_rag.text._names import names


@pytest.mark.parametrize("question", ["的", "a", "??", "1", "2.3.1", "为什么？", "What?", "   "])
def test_a_question_without_a_content_word_has_none(question):
    assert not has_content(question)


@pytest.mark.parametrize("question", ["年假", "Who is the CEO?", "DK-200 还有库存吗？", "ask a"])
def test_a_word_or_a_chinese_term_is_content(question):
    assert has_content(question)


def test_a_chinese_word_the_text_lacks_is_absent_though_its_characters_occur_elsewhere():
    question = "公司的年假政策是什么？"
    held = {"公司", "政策", "年", "假"}.__contains__  # 年 and 假 occur in other words; 年假 nowhere
    assert absent_terms(question, key_terms(question), held) == ["年假", "假政"]


def test_a_bigram_across_two_held_words_or_a_one_character_gap_is_a_word_boundary():
    question = "登录报错的问题在 2.3.1 版本里修复了吗？"
    held = {"登录", "报错", "问题", "版本", "2.3.1", "修复"}.__contains__
    assert absent_terms(question, key_terms(question), held) == []  # 录报, 本里, 里修 straddle words
    question = "苏博为什么改名成苏镜宇？"
    assert absent_terms(question, key_terms(question), {"苏博", "改名", "苏镜", "镜宇"}.__contains__) == []


def test_latin_terms_are_absent_when_not_held():
    question = "Does Nimbus have an Android app?"
    assert absent_terms(question, key_terms(question), {"nimbus"}.__contains__) == ["android", "app"]


def test_entities_drop_the_possessive():
    assert entities("Which region is Corey Taylor's city of birth located?") == ["Corey Taylor"]


def test_entities_drop_question_words_where_names_drop_sentence_openers():
    text = "Compare DK-200 with the old one. Released by Acme Corp's team."
    assert entities(text) == ["DK-200", "Released", "Acme Corp"]   # a question names things anywhere
    assert names(text) == ["Compare DK-200", "Acme Corp's"]        # a passage's sentence opener is no name


def test_answer_type_reads_chinese_noun_phrase_questions():
    assert answer_type("我国2021年人口出生率") == "number"
    assert answer_type("《七人乐队》的导演是谁？") == "person"
    assert answer_type("2022世界5G大会举办的地点是哪里") == "place"
    assert answer_type("What century did the Normans first gain their identity?") == "date"


@pytest.mark.parametrize("question", ["hi", "Thank you!", "你好", "translate this to French: bonjour",
                                      "翻译成英文：早上好"])
def test_greetings_and_translations_are_direct(question):
    assert is_direct(question)


@pytest.mark.parametrize("question", ["hi, who founded Acme?", "What is the translation memory size?",
                                      "谢谢你的年假政策是什么"])
def test_a_factual_question_is_not_direct(question):
    assert not is_direct(question)


def test_comparisons_and_nested_questions():
    assert is_comparison("合同A和合同B的违约责任有什么区别？") and is_comparison("DK-200 and DK-300 weight")
    assert not is_comparison("When was Nimbus 2.3.1 released?")
    assert is_nested("Who founded the company that makes the Model S?") and is_nested("公司的年假的天数的上限")
    assert not is_nested("From which country does Nimbus come?")


def test_a_new_passage_adds_what_is_needed_only_when_it_holds_a_missing_or_unheld_key_term():
    before = [{"id": "a", "title": "Weekend orders", "text": "Orders paid on weekends ship on Monday."}]
    q = "When do orders paid on weekends leave Harbor Depot?"
    depot = {"id": "b", "title": "Depot", "text": "Harbor Depot hands its parcels to Atlas Freight."}
    again = {"id": "c", "title": "More", "text": "Weekend orders are paid and ship later."}
    assert adds_needed(q, [], before, before + [depot])                 # "harbor", "depot" were held nowhere
    assert not adds_needed(q, [], before, before + [again])             # only terms the evidence held
    assert adds_needed(q, ["pick-up time"], before + [depot], before + [depot, dict(again, text="Pick-up at noon.")])
    assert not adds_needed(q, ["pick-up time"], before + [depot], before + [depot])  # nothing new shown
    assert adds_needed("周末付款的订单什么时候从港口仓库发货？", [], [{"id": "a", "text": "周末付款的订单周一发货。"}],
                       [{"id": "b", "text": "港口仓库每天中午交给承运商。"}])
