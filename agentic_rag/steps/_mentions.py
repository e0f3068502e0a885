"""unheld_names: what a question names that the knowledge base it is asked of holds nowhere. A
passage cannot say anything about a tool, an option or a company that no passage mentions, so a
question asking about one is refused before any search, and one that names it in passing is told."""
from __future__ import annotations

import difflib
import re

from ..kb import KnowledgeBaseBackend
from ..text import key_terms, named_terms, tokenize

MAX_NAMES = 8  # a question naming more than this is a list, not a question about each


def unheld_names(question: str, kb: KnowledgeBaseBackend) -> list[tuple[str, bool]]:
    """The names of the question (text.named_terms: quotations, capitalised names, code-like words, a
    Chinese question's subject) that no chunk of `kb` holds, each with whether the question names it
    only as an aside (an example, a contrast). Counted over what `kb` searches: a restricted view's
    scope, so that a name only another tenant's documents hold is unheld. A name spelt close to words
    of the passages the question finds ("Brittish" where they say "British") is a misspelling of
    what they hold, not a name they never mention."""
    unheld = [(term, aside) for term, aside in named_terms(question)[:MAX_NAMES] if not held(term, kb)]
    if not unheld:
        return []
    found = {w.casefold() for hit in kb.search(question, k=8)
             for w in re.findall(r"[^\W\d_]{4,}", f"{hit.title} {hit.text}")}
    return [(term, aside) for term, aside in unheld if not misspelt(term, found)]


def misspelt(term: str, words: set[str]) -> bool:
    """Whether the term has Latin words (of four letters or more) that are not among `words`, and each
    of those is spelt close to one of them (difflib's ratio of 0.8 or more)."""
    unknown = [w for w in (w.casefold() for w in re.findall(r"[A-Za-z]{4,}", term)) if w not in words]
    return bool(unknown) and all(difflib.get_close_matches(w, words, n=1, cutoff=0.8) for w in unknown)


def held(term: str, kb: KnowledgeBaseBackend) -> bool:
    """Whether `kb` holds the term: each of its Latin words (a single letter aside) somewhere, and a
    name of several in one chunk (its title or its text: a passage titled "Tikhaya Sosna River" need
    not repeat the name); of its Chinese, a word (a bigram) at least: Chinese has no spaces to tell a
    name from the words around it, so only a subject none of whose words are held is unheld
    (特斯拉, not 登录报错 where 登录 is held)."""
    weights, terms = kb.term_weights(term), [t for t in key_terms(term) if len(t) > 1]
    words, chinese = {t for t in terms if t.isascii()}, [t for t in terms if not t.isascii()]
    if not words <= weights.keys() or (chinese and not any(t in weights for t in chinese)):
        return False
    if len(words) < 2:
        return True
    return any(words <= set(tokenize(f"{hit.title}\n{hit.text}")) for hit in kb.search(term, k=10, mode="bm25"))
