"""verify_sufficiency: a deterministic check settles clear cases; the model grades the rest."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core import Evidence, Grade, GradedAnswer, ModelOutputError
from ..models import Model
from ..text import (
    NUMBER,
    absent_terms,
    answer_type,
    answer_windows,
    aside_terms,
    asked_entities,
    coverage,
    evidence_texts,
    has_answer_type,
    key_terms,
    tokenize,
)
from ._ask import ask


def unseen_terms(question: str, kb_weights: dict[str, float]) -> list[str]:
    """The question's key terms that the knowledge base holds nowhere (`kb_weights`: its idf of the
    question's tokens), a Chinese word boundary aside (lexical.absent_terms)."""
    return absent_terms(question, key_terms(question), lambda t: bool(kb_weights.get(t)))


def question_weights(question: str, kb_weights: dict[str, float]) -> dict[str, float]:
    """Each key term's weight: its idf in the knowledge base; a term the knowledge base never
    holds weighs more than any it holds (it is the strongest sign of a question it cannot answer),
    unless it is only a Chinese word boundary, which weighs least; a word of a name the question
    gives only as an aside ("unlike Windows Defender") weighs nothing."""
    top = max(kb_weights.values(), default=1.0) + 1.0
    low = min(kb_weights.values(), default=1.0)
    unseen = set(unseen_terms(question, kb_weights))
    aside = aside_terms(question)
    return {t: 0.0 if t in aside else kb_weights.get(t) or (top if t in unseen else low) for t in key_terms(question)}




def quick_grade(question: str, evidence: Sequence[Evidence], weights: dict[str, float] | None = None,
                unseen: Iterable[str] = ()) -> Grade | None:
    """Sufficient when two neighbouring sentences of one passage (text.answer_windows: no heading,
    no line that only restates the question) hold (nearly) every key term and an answer of the asked
    type, and the evidence every name; insufficient, with score 0, when the question names a number
    (a year, a version) that neither the evidence nor the knowledge base holds (`unseen`: the key
    terms it holds nowhere); insufficient when no passage holds a fifth of the terms; otherwise None (unsure)."""
    terms, names, kind = key_terms(question), asked_entities(question), answer_type(question)
    texts = evidence_texts(evidence)
    if not texts:
        return Grade(score=0.0, sufficient=False, missing=terms[:5], reason="no evidence")
    scores = [coverage(terms, text, weights) for text in texts]
    best = max(range(len(texts)), key=scores.__getitem__)
    pool = "\n".join(texts).casefold()
    held = [(coverage(terms, w, weights), at) for at, item in enumerate(evidence, 1)
            for w in answer_windows(question, item["text"], item.get("title", ""))
            if has_answer_type(kind, w, question)]
    fit, at = max(held, default=(0.0, 0))
    if fit >= 0.9 and all(n.casefold() in pool for n in names):
        return Grade(score=round(fit, 3), sufficient=True,
                     reason=f"passage {at} holds the key terms and a {kind} answer together")
    present = set(tokenize(pool))
    numbers = [t for t in unseen if NUMBER.fullmatch(t) and t not in present]
    if numbers:  # a number has no paraphrase: no passage can hold a fact about it
        return Grade(score=0.0, sufficient=False, missing=numbers,
                     reason=f"the knowledge base holds nowhere the number {', '.join(numbers)} that the question names")
    if scores[best] < 0.2:
        return Grade(score=round(scores[best], 3), sufficient=False,
                     missing=[t for t in terms if t not in pool][:5], reason="no passage holds the key terms")
    return None


def verify_sufficiency(question: str, evidence: Sequence[Evidence], model: Model, threshold: float = 0.6,
                       weights: dict[str, float] | None = None, unseen: Iterable[str] = (),
                       defer: bool = False) -> Grade | None:
    """Score in [0, 1], sufficient or not, and what is missing; `weights` rank the key terms (idf).
    The deterministic check (quick_grade) settles clear cases; the model grades the rest, unless
    `defer`: then None, and the grade comes with the answer (generate_answer(..., grade=True))."""
    grade = quick_grade(question, evidence, weights, unseen)
    if grade is not None:
        return grade.model_copy(update={"sufficient": grade.sufficient and grade.score >= threshold})
    if defer:
        return None
    try:
        grade = ask(model, "grade", Grade, {"question": question, "evidence": evidence, "threshold": threshold,
                                            "weights": weights or {}})
    except ModelOutputError as exc:
        return Grade(score=0.0, sufficient=False, reason=f"fallback: {exc}", by="fallback")
    return grade.model_copy(update={"sufficient": grade.score >= threshold, "by": "model"})


def folded_grade(reply: GradedAnswer, threshold: float = 0.6) -> Grade | None:
    """The grade that came in an answer's reply, or None when the model gave none."""
    if reply.evidence_score is None:
        return None
    return Grade(score=reply.evidence_score, sufficient=reply.evidence_score >= threshold, missing=reply.missing,
                 reason=reply.grade_reason or "graded with the answer", by="with the answer")
