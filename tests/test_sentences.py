"""split_sentences' line joins: a hard-wrapped English line is joined by a space, a wrapped Chinese
line by nothing (Chinese is written without spaces); the chunker keeps the source's line breaks."""
from agentic_rag import OfflineModel, run_agentic_rag
from agentic_rag.kb.ingestion._chunking import chunk_text
from agentic_rag.text import split_sentences
from helpers import EXAMPLE_DATA

WRAPPED_CLAUSE = "乙方逾期交货的，违约金总额\n不超过该批货款的 10%。逾期超过 30 日的，甲方有权解除合同。"


def test_a_line_wrapped_between_two_chinese_characters_joins_with_nothing():
    assert split_sentences(WRAPPED_CLAUSE)[0] == "乙方逾期交货的，违约金总额不超过该批货款的 10%。"


def test_a_line_wrapped_beside_chinese_punctuation_joins_with_nothing():
    assert split_sentences("价格为\n“十元”，已确认\n。") == ["价格为“十元”，已确认。"]
    assert split_sentences("第一项完成，\n第二项待定。") == ["第一项完成，第二项待定。"]
    assert split_sentences("第一项（\n草案）已定。") == ["第一项（草案）已定。"]


def test_spaces_left_at_a_wrapped_chinese_line_end_go_too():
    assert split_sentences("违约金总额  \n不超过该批货款的 5%。") == ["违约金总额不超过该批货款的 5%。"]


def test_latin_and_mixed_wraps_keep_one_space():
    assert split_sentences("The client did not\nrefresh the token.") == ["The client did not refresh the token."]
    assert [s.strip() for s in split_sentences("支持 Android\n和 iOS。版本 2.3.1\n修复了它。")] == \
        ["支持 Android 和 iOS。", "版本 2.3.1 修复了它。"]
    # curly quotes are English punctuation too: between two of them the join stays a space
    assert split_sentences("He said “yes”\n“no”.") == ["He said “yes” “no”."]


def test_a_list_item_heading_or_table_row_still_starts_its_own_line():
    assert split_sentences("条款如下：\n- 第一条\n# 附则") == ["条款如下：", "- 第一条", "# 附则"]


def test_the_chunker_keeps_the_line_break_as_the_source_has_it():
    # chunks are cut from the source text as written, never joined: only readers of sentences join lines
    chunks = chunk_text(WRAPPED_CLAUSE, 800, 100)
    assert chunks == [WRAPPED_CLAUSE]


def test_the_offline_answer_quotes_a_wrapped_contract_clause_without_a_stray_space(example_kb):
    source = (EXAMPLE_DATA / "contracts" / "contract-a.md").read_text(encoding="utf-8")
    assert "违约金总额\n不超过" in source  # the example clause is hard-wrapped between two characters
    state = run_agentic_rag("合同A和合同B的违约责任有什么区别？", example_kb, OfflineModel())
    assert "违约金总额不超过该批货款的 10%" in state["answer"]
    assert "总额 不超过" not in state["answer"]
