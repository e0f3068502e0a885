"""Lexical tokens for BM25: Latin words, CJK character uni- and bigrams, normalised versions."""
from __future__ import annotations

import re
import unicodedata

TOKENIZER_SETTINGS = {"name": "mixed", "version": 2, "cjk": "unigram+bigram", "stopwords": "en", "stem": "en-light"}

# v2.3.1, V2.3.1, 2.3.1 and 2_3_1 all become the one token "2.3.1"
_VERSION = re.compile(r"(?<![0-9a-z.])v?(\d+(?:[._]\d+)+)(?![0-9a-z])")
# CJK ideographs (unified, extension A, compatibility): the one definition every module uses
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{CJK}]")
_WORDS = re.compile(rf"[{CJK}]+|[^\W_{CJK}]+")

# a short English list; Chinese function characters are left to IDF, which weighs them down
STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does for from had has have he her his how i if in
into is it its may me my no not of on or our she should so than that the their them then there these
they this those to was we were what when where which who whom why will with would you your
""".split())


_SUFFIXES = (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def stem(word: str) -> str:
    """A light English stemmer: plural, -ing and -ed endings and a final e go, so "located" and
    "locate", "countries" and "country" match. Words of four letters or fewer, and -ss/-us/-is, stay whole."""
    if len(word) <= 4 or not word.isascii() or not word.isalpha() or word.endswith(("ss", "us", "is")):
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and not word.endswith(("ses", "xes", "zes", "ches", "shes")):
                continue
            word = word[:-len(suffix)] + replacement
            if suffix in ("ing", "ed") and word[-1] == word[-2] and word[-1] not in "aeioulsz":
                word = word[:-1]  # running -> runn -> run
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word  # locate and located -> locat


def has_cjk(text: str) -> bool:
    """Whether the text holds a CJK ideograph (it is, or quotes, Chinese)."""
    return CJK_CHAR.search(text) is not None


def normalize(text: str) -> str:
    """NFKC (full-width to half-width) and lower case: the form every token is taken from."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str) -> list[str]:
    """Split text into BM25 tokens; the same function serves documents and queries."""
    text = normalize(text)
    tokens = [m.group(1).replace("_", ".") for m in _VERSION.finditer(text)]
    text = _VERSION.sub(" ", text)
    for run in _WORDS.findall(text):
        if CJK_CHAR.match(run):
            tokens.extend(run)
            tokens.extend(run[i:i + 2] for i in range(len(run) - 1))
        elif run not in STOPWORDS:
            tokens.append(stem(run))
    return tokens
