"""The offline model's planning rules: condense (a follow-up made to stand alone), route, rewrite
(pseudo-relevance feedback), decompose."""
from __future__ import annotations

import re
from collections import Counter

from ..core import Condensed, Decomposition, Rewrite, RouteDecision, SubQuery
from ..text import (
    COMPARISON,
    bridge_entities,
    entities,
    has_cjk,
    is_comparison,
    is_nested,
    key_terms,
    names,
    relative_clause,
    same_text,
    tokenize,
)


def route(inputs: dict) -> RouteDecision:
    """multi_hop for comparisons and nested (bridge) questions, vector otherwise."""
    question = inputs["question"]
    if is_comparison(question):
        return RouteDecision(route="multi_hop", reason="comparison or enumeration: one search per item", by="model")
    if is_nested(question):
        return RouteDecision(route="multi_hop", reason="nested question: a bridge fact is needed first", by="model")
    return RouteDecision(route="vector", reason="a single fact to look up", by="model")


def _strip(question: str, remove: list[str]) -> str:
    for item in sorted(remove, key=len, reverse=True):
        question = question.replace(item, " ")
    question = COMPARISON.sub(" ", question)
    return " ".join(re.sub(r"[?？!！。,，、;；:：]|\band\b|和|与|及|有什么|什么|的", " ", question).split())


def decompose(inputs: dict) -> Decomposition:
    """Comparisons: one query per item. With evidence: follow bridge names. Else split at a relative
    clause. (The decompose step drops queries already tried.)"""
    question, evidence = inputs["question"], inputs.get("evidence", [])
    names = entities(question)
    if is_comparison(question) and len(names) >= 2:
        rest = _strip(question, names)
        queries = [SubQuery(query=f"{name} {rest}".strip()) for name in names]
    elif evidence:
        rest = " ".join(key_terms(question))
        queries = [SubQuery(query=f"{name} {rest}") for name in bridge_entities(question, evidence)]
    elif (clause := relative_clause(question)) is not None:
        outer = question[:clause.start()]
        inner = f"{outer.split()[-1]} {question[clause.end():]}"  # "association which published X"
        queries = [SubQuery(query=_strip(inner, [])), SubQuery(query=_strip(outer, []), depends_on=[0])]
    else:
        queries = []
    return Decomposition(subqueries=queries[:5], reason=f"{len(queries[:5])} sub-queries")


def rewrite(inputs: dict) -> Rewrite:
    """Pseudo-relevance feedback: add what is missing and terms shared by the best passages."""
    question, missing = inputs["question"], inputs.get("missing", [])
    tried, evidence = inputs.get("tried", []), inputs.get("evidence", [])
    asked = set(tokenize(question))
    counts = Counter(t for item in evidence[:3] for t in dict.fromkeys(key_terms(item["text"]))
                     if t not in asked and len(t) > 1 and not t.isdigit())
    feedback = [t for t, c in counts.most_common(12) if c >= 2]
    extra = [m for m in missing if not set(tokenize(m)) <= asked][:3]
    for size in range(2, len(feedback) + 3):
        query = " ".join([question] + extra + feedback[:size])
        if not any(same_text(query, t) for t in tried):
            return Rewrite(query=query, reason=f"added {', '.join(extra + feedback[:size]) or 'nothing'}")
    return Rewrite(query=question, reason="no new terms found")


# a pronoun that points out of a follow-up
_PRONOUN = re.compile(r"\b(?:it|its|they|them|their|he|him|his|she|her)\b", re.I)
_CJK_PRONOUN = re.compile(r"[它他她]们?|其")
# a follow-up that only says what changes ("And for Windows?", "那 2.4 里呢？")
_ELLIPSIS = re.compile(r"^\s*(?:and|also|what about|how about)\b|^\s*(?:那么?|还有|另外)|呢\s*[？?]?\s*$", re.I)
# where a Chinese question's topic ends: its first particle, verb of being or interrogative
_CJK_TOPIC = re.compile(r"^\s*([^，,。？?！!]{2,}?)\s*"
                        r"(?=的|是|位于|在|有|为|属于|出生|来自|曾|于|被|哪|什么|谁|多少|如何|怎么|几)")
# an English question's first article and the word after it ("the warehouse" of "the warehouse's cut-off")
_THE_PHRASE = re.compile(r"\b(?:the|a|an) [a-z][\w-]*", re.I)
_DATE_WORD = re.compile(r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|(?:mon|tues|wednes|thurs|fri|satur|"
                        r"sun)day", re.I)
_VALUE = re.compile(r"\d+(?:\.\d+)+|\d+")


def condense(inputs: dict) -> Condensed:
    """The follow-up with its reference put in, by rule: a pronoun ("it", "他") becomes the subject of
    the previous question, with the thing the previous answer named as the other reading (the
    knowledge base decides, condense_query); an ellipsis ("And for Windows?", "那 2.4 里呢？") becomes
    the previous question with the new value in place of the one of its kind there (a version for a
    version, a name for a name), or added to it. A question with neither stands as asked."""
    question, lines = inputs["question"], inputs.get("history", [])
    asked = [line[6:] for line in lines if line.startswith("user: ")]
    if not asked:
        return Condensed(standalone=question, reason="no earlier question")
    previous = asked[-1]
    answered = next((line[11:] for line in reversed(lines) if line.startswith("assistant: ")), "")
    topics = inputs.get("topics", [])
    pronoun = _pronoun(question)
    if pronoun:
        subject = _subject(previous, topics)
        for earlier in reversed(asked[:-1]):  # a follow-up of a follow-up: what the chain is about
            if subject or not _pronoun(previous):
                break
            subject, previous = _subject(earlier, topics), earlier
        named = _answer_entities(answered, previous, topics)
        readings = list(dict.fromkeys(_replace(question, pronoun, r) for r in (subject, *named) if r))
        if readings:
            return Condensed(standalone=readings[0], readings=readings[1:],
                             reason=f"{pronoun.group(0)!r}: the previous question's subject"
                                    + (", or the previous answer's" if len(readings) > 1 else ""))
    if _ELLIPSIS.search(question):
        return Condensed(standalone=_elided(question, previous), reason="an ellipsis: the previous question "
                                                                         "with what changed")
    return Condensed(standalone=question, reason="stands alone")


def _pronoun(question: str) -> re.Match | None:
    """The question's first pronoun: after an earlier turn, it refers to what that turn was about."""
    return (_CJK_PRONOUN.search(question) if has_cjk(question) else None) or _PRONOUN.search(question)


def _titled(text: str, topics: list[str], besides: str = "") -> str:
    """The longest document title (`topics`) the text holds and `besides` does not."""
    held = [t for t in topics if t.casefold() in text.casefold() and t.casefold() not in besides.casefold()]
    return max(held, key=len, default="")


def _subject(question: str, topics: list[str]) -> str:
    """What a question is about: the longest title of a document found for it that it names, else
    its first name (English) or its topic (Chinese: the words before its first particle or
    interrogative)."""
    if titled := _titled(question, topics):
        return titled
    if has_cjk(question):
        topic = _CJK_TOPIC.search(question)
        return topic.group(1) if topic else ""
    names = entities(question)
    if names:
        return names[0]
    phrase = _THE_PHRASE.search(question)
    if not phrase:
        return ""
    return phrase.group(0)


def _answer_entities(answer: str, question: str, topics: list[str]) -> list[str]:
    """What an answer named that its question did not, at most two: a short answer whole, else the
    longest document title it names and the names it gives in order (kb names: not a sentence's
    first word, not a month or a weekday: a pronoun does not stand for a date)."""
    answer = answer.strip().rstrip("。.")
    short = len(answer) <= 12 if has_cjk(answer) else len(answer.split()) <= 4
    if not answer or short and not re.search(r"[。.!?？！，,]", answer):
        return [answer] if answer else []
    found = [_titled(answer, topics, besides=question)] + [
        n for n in names(answer) if n.casefold() not in question.casefold() and not _DATE_WORD.fullmatch(n)]
    return list(dict.fromkeys(n for n in found if n))[:2]


def _replace(question: str, pronoun: re.Match, referent: str) -> str:
    """The question with that pronoun and the ones after it replaced; a possessive by "X's" (Chinese: "X的")."""
    def value(word: str) -> str:
        if has_cjk(word):
            return referent + "的" if word == "其" else referent
        return f"{referent}'s" if word.lower() in ("its", "their", "his") else referent

    pattern = _CJK_PRONOUN if has_cjk(pronoun.group(0)) else _PRONOUN
    return question[:pronoun.start()] + pattern.sub(lambda m: value(m.group(0)), question[pronoun.start():])


def _elided(question: str, previous: str) -> str:
    """The previous question with the follow-up's value put in the place of the one of its kind
    (a number or version, else a name), or, with none of its kind there, beside it."""
    new_values, old_values = _VALUE.findall(question), _VALUE.findall(previous)
    if new_values and old_values:
        return previous.replace(old_values[-1], new_values[0], 1)
    new_names = [n for n in entities(question) if n.casefold() not in previous.casefold()]
    old_names = entities(previous)
    if new_names and old_names:
        return previous.replace(old_names[-1], new_names[0], 1)
    rest = _ELLIPSIS.sub(" ", question).strip(" ？?")
    return f"{previous.rstrip(' ？?。')} {rest}".strip() + ("？" if has_cjk(previous) else "?")
