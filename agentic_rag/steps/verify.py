"""verify_sufficiency: a deterministic check settles clear cases; the model grades the rest."""
from __future__ import annotations

from ..analysis import answer_type, coverage, entities, evidence_texts, has_answer_type, key_terms
from ..errors import ModelOutputError
from ..models.protocol import Model
from ..schemas import Grade
from ._ask import ask


def question_weights(question: str, kb_weights: dict[str, float]) -> dict[str, float]:
    """Each key term's weight: its idf in the knowledge base; a term the knowledge base never
    holds weighs more than any it holds (it is the strongest sign of a question it cannot answer)."""
    top = max(kb_weights.values(), default=1.0) + 1.0
    low = min(kb_weights.values(), default=1.0)

    def unseen(term: str) -> float:  # a CJK bigram across two known words ("录报" of 登录报错) is an artefact
        artefact = len(term) == 2 and "\u3400" <= term[0] <= "\u9fff" and all(kb_weights.get(c) for c in term)
        return low if artefact else top

    return {t: kb_weights.get(t) or unseen(t) for t in key_terms(question)}


def quick_grade(question: str, evidence: list[dict], weights: dict[str, float] | None = None) -> Grade | None:
    """Sufficient when one passage holds (nearly) every key term, every name and an answer of the
    asked type; insufficient when none holds even a fifth of the terms; otherwise None (unsure)."""
    terms, names, kind = key_terms(question), entities(question), answer_type(question)
    texts = evidence_texts(evidence)
    if not texts:
        return Grade(score=0.0, sufficient=False, missing=terms[:5], reason="no evidence")
    scores = [coverage(terms, text, weights) for text in texts]
    best = max(range(len(texts)), key=scores.__getitem__)
    pool = "\n".join(texts).casefold()
    if scores[best] >= 0.9 and all(n.casefold() in pool for n in names) and has_answer_type(kind, texts[best]):
        return Grade(score=round(scores[best], 3), sufficient=True,
                     reason=f"passage {best + 1} holds the key terms and a {kind} answer")
    if scores[best] < 0.2:
        return Grade(score=round(scores[best], 3), sufficient=False,
                     missing=[t for t in terms if t not in pool][:5], reason="no passage holds the key terms")
    return None


def verify_sufficiency(question: str, evidence: list[dict], model: Model, threshold: float = 0.6,
                       weights: dict[str, float] | None = None) -> Grade:
    """Score in [0, 1], sufficient or not, and what is missing; `weights` rank the key terms (idf)."""
    grade = quick_grade(question, evidence, weights)
    if grade is not None:
        return grade.model_copy(update={"sufficient": grade.sufficient and grade.score >= threshold})
    try:
        grade = ask(model, "grade", Grade, {"question": question, "evidence": evidence, "threshold": threshold,
                                            "weights": weights or {}})
    except ModelOutputError as exc:
        return Grade(score=0.0, sufficient=False, reason=f"fallback: {exc}", by="fallback")
    return grade.model_copy(update={"sufficient": grade.score >= threshold, "by": "model"})
