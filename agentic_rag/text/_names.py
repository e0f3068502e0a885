"""Names in text: titles, quotations, codes, versions, capitalised names and Chinese
organisation names; what the knowledge graph links and what questions are asked about."""
from __future__ import annotations

import re
from collections.abc import Iterator

from ._tokenize import CJK, STOPWORDS

NAME = re.compile(
    r"《[^》]+》|“[^”]+”|\"[^\"]+\"|「[^」]+」"                                  # titles and quotations
    r"|(?<![A-Za-z0-9])[A-Z]{1,5}-?\d{2,}(?![A-Za-z0-9])"                          # codes: DK-200, A1001, C919
    rf"|[{CJK}]{{2,12}}(?:有限公司|公司|集团|大学|银行|事业部|委员会|协会)"          # Chinese organisations
    rf"|[{CJK}]{{2,6}} ?[A-Z](?![A-Za-z])"                                        # 合同A, 版本 B
    r"|\bv?\d+(?:[._]\d+)+\b"                                                    # versions, decimals
    rf"|\b[A-Z](?:[^\W{CJK}]|['’.-])*(?:\s+(?:(?:of|for|the|de|von|van)\s+){{0,2}}"  # Capitalised Names;
    rf"[A-Z](?:[^\W{CJK}]|['’.-])*)*")                                          # a Chinese character ends one
_OPENERS = ("", ".", "!", "?", ":", ";", "。", "\n", "-", "*")  # what comes before a sentence's first word


def mentions(text: str, leading: frozenset[str] = STOPWORDS,
             possessive: bool = False) -> Iterator[tuple[re.Match, list[str]]]:
    """Each NAME match with its words: outer punctuation and quotes trimmed, then the leading words
    in `leading` dropped ("The Rhine" -> Rhine). With `possessive`, a final 's goes before the
    quotes are trimmed (Taylor's -> Taylor). names() and _lexical.entities() are built on it."""
    for match in NAME.finditer(text):
        if possessive:
            words = re.sub(r"['’]s$", "", match.group(0).strip(" .,")).strip("'’").split(" ")
        else:
            words = match.group(0).strip(" .,'’").split(" ")
        while words and words[0].lower() in leading:
            words.pop(0)
        yield match, words


def names(text: str) -> list[str]:
    """The names a passage mentions, in order, each once. A leading "The" or "In" is dropped, and
    so is a lone capitalised word opening a sentence ("Released", "Version"): usually not a name.
    A possessive stays (the graph's nodes are keyed so); a lone decimal is not a name."""
    found = []
    for match, words in mentions(text):
        value = " ".join(words)
        opens_sentence = text[:match.start()].rstrip()[-1:] in _OPENERS
        if len(words) == 1 and value.isalpha() and value[:1].isupper() and opens_sentence:
            continue
        if len(value) > 1 and value.count(".") != 1 and not value.replace(".", "").isdigit() or value.count(".") >= 2:
            found.append(value)
    return list(dict.fromkeys(found))
