from itertools import pairwise

from agentic_rag import chunk_text
from agentic_rag.kb import split_sentences


def test_short_text_is_one_chunk():
    assert chunk_text("Just one sentence.", 100, 10) == ["Just one sentence."]


def test_chinese_chunks_end_at_sentence_ends_with_punctuation_kept():
    text = "第一句话比较长一些。第二句话也不短！第三句是问题吗？第四句用分号；第五句结束。"
    chunks = chunk_text(text, 20, 0)
    assert all(len(c) <= 20 for c in chunks)
    assert all(c[-1] in "。！？；" for c in chunks), chunks
    assert "".join(chunks) == text


def test_english_sentences_not_cut_inside_versions_or_decimals():
    text = "Version 2.3.1 fixed the timeout. It took 3.5 days! Was it worth it? Yes."
    chunks = chunk_text(text, 40, 0)
    assert all(len(c) <= 40 for c in chunks)
    assert chunks[0] == "Version 2.3.1 fixed the timeout."
    assert any("3.5 days!" in c for c in chunks)


def test_paragraphs_split_before_sentences():
    text = "Para one is here.\n\nPara two is here. It has two sentences."
    assert chunk_text(text, 30, 0)[0] == "Para one is here."


def test_overlap_repeats_whole_previous_sentences():
    text = "Alpha is first. Beta is second. Gamma is third. Delta is fourth."
    chunks = chunk_text(text, 35, 17)
    assert len(chunks) > 1
    for before, after in pairwise(chunks):
        last_sentence = split_sentences(before)[-1].strip()
        assert after.startswith(last_sentence), (before, after)


def test_no_separator_falls_back_to_hard_cut():
    chunks = chunk_text("x" * 250, 100, 0)
    assert chunks == ["x" * 100, "x" * 100, "x" * 50]


def test_split_sentences_mixed():
    assert [s.strip() for s in split_sentences("你好。Hello world! 再见？")] == ["你好。", "Hello world!", "再见？"]
