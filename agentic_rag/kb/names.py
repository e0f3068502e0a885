"""Names in text: titles, quotations, codes, versions, capitalised names and Chinese
organisation names; what the knowledge graph links and what questions are asked about."""
from __future__ import annotations

import re

from .tokenize import STOPWORDS

NAME = re.compile(
    r"《[^》]+》|“[^”]+”|\"[^\"]+\"|「[^」]+」"                                  # titles and quotations
    r"|(?<![A-Za-z0-9])[A-Z]{1,5}-?\d{2,}(?![A-Za-z0-9])"                          # codes: DK-200, A1001, C919
    r"|[\u4e00-\u9fff]{2,12}(?:有限公司|公司|集团|大学|银行|事业部|委员会|协会)"      # Chinese organisations
    r"|[\u4e00-\u9fff]{2,6} ?[A-Z](?![A-Za-z])"                                    # 合同A, 版本 B
    r"|\bv?\d+(?:[._]\d+)+\b"                                                    # versions, decimals
    r"|\b[A-Z](?:[^\W\u3400-\u9fff]|['’.-])*(?:\s+(?:(?:of|for|the|de|von|van)\s+){0,2}"  # Capitalised Names;
    r"[A-Z](?:[^\W\u3400-\u9fff]|['’.-])*)*")                                   # a Chinese character ends one


def names(text: str) -> list[str]:
    """The names a passage mentions, in order, each once. A leading "The" or "In" is dropped, and
    so is a lone capitalised word opening a sentence ("Released", "Version"): usually not a name."""
    found = []
    for match in NAME.finditer(text):
        words = match.group(0).strip(" .,'’").split(" ")
        while words and words[0].lower() in STOPWORDS:
            words.pop(0)
        value = " ".join(words)
        opens_sentence = text[:match.start()].rstrip()[-1:] in ("", ".", "!", "?", ":", ";", "。", "\n", "-", "*")
        if len(words) == 1 and value.isalpha() and value[:1].isupper() and opens_sentence:
            continue
        if len(value) > 1 and value.count(".") != 1 and not value.replace(".", "").isdigit() or value.count(".") >= 2:
            found.append(value)
    return list(dict.fromkeys(found))
