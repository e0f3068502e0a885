from agentic_rag import tokenize
from agentic_rag.text._tokenize import normalize


def test_version_forms_all_become_one_token():
    for form in ("v2.3.1", "V2.3.1", "2.3.1", "2_3_1", "版本v2.3.1里", "build nimbus_2_3_1", "Ｖ２．３．１"):
        assert "2.3.1" in tokenize(form), form


def test_version_does_not_swallow_sentence_end_or_other_numbers():
    assert tokenize("fixed in 2.3.1.") == ["2.3.1", "fix"]
    assert "2.3.10" in tokenize("v2.3.10") and "2.3.1" not in tokenize("v2.3.10")


def test_chinese_unigrams_and_bigrams():
    assert tokenize("认证失败") == ["认", "证", "失", "败", "认证", "证失", "失败"]


def test_latin_words_lower_case_without_stopwords_lightly_stemmed():
    assert tokenize("The Login ERROR is fixed") == ["login", "error", "fix"]
    assert tokenize("located locate countries country") == ["locat", "locat", "country", "country"]
    assert tokenize("running status class Paris") == ["run", "status", "class", "paris"]


def test_full_width_becomes_half_width():
    assert normalize("ＡＢＣ１２３，") == "abc123,"
    assert tokenize("ＳＥＳＳＩＯＮ过期") == ["session", "过", "期", "过期"]


def test_mixed_script_boundary_splits():
    assert tokenize("session过期") == ["session", "过", "期", "过期"]
