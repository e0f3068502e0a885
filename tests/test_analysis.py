"""The lexical layer: content words, and which key terms a text lacks (Chinese word boundaries aside)."""
import pytest

from agentic_rag.analysis import absent_terms, entities, has_content, key_terms


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
