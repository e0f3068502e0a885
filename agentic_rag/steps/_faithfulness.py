"""check_faithfulness (lexical support first, the model only for unsure sentences) and repair_answer."""
from __future__ import annotations

from collections.abc import Sequence

from ..core import Answer, Evidence, Faithfulness, ModelOutputError
from ..models import Model
from ..text import cited_support, evidence_texts, missing_hops, missing_parts, sentences
from ._ask import ask

SUPPORTED, UNSUPPORTED = 0.8, 0.3  # lexical support at or above / below which no model is asked


def check_faithfulness(question: str, answer: str, evidence: Sequence[Evidence], model: Model,
                       parts: Sequence[str] = ()) -> Faithfulness:
    """Score = share of supported sentences; unsupported ones listed; complete = every part addressed
    and, for a nested question, every hop cited (missing_hops)."""
    found = sentences(answer)
    if not found:
        return Faithfulness(score=0.0, complete=False, missing=list(parts), reason="empty answer")
    texts = evidence_texts(evidence)
    scores = {s: cited_support(s, texts) for s in found}
    missing = missing_parts(answer, evidence, list(parts), question)
    if all(v >= SUPPORTED or v < UNSUPPORTED for v in scores.values()):
        unsupported = [s for s, v in scores.items() if v < UNSUPPORTED]
        return Faithfulness(score=round(1 - len(unsupported) / len(found), 3), unsupported=unsupported,
                            complete=not missing, missing=missing, reason="lexical support decided every sentence")
    try:
        verdict = ask(model, "judge", Faithfulness, {"question": question, "answer": answer, "evidence": evidence,
                                                     "parts": list(parts)})
    except ModelOutputError as exc:
        unsupported = [s for s, v in scores.items() if v < SUPPORTED]
        return Faithfulness(score=round(1 - len(unsupported) / len(found), 3), unsupported=unsupported,
                            complete=not missing, missing=missing, reason=f"fallback: {exc}", by="fallback")
    if hops := [h for h in missing_hops(question, answer, evidence) if h not in verdict.missing]:
        # a hop left uncited: incomplete, whatever the judge says
        return verdict.model_copy(update={"by": "model", "complete": False, "missing": verdict.missing + hops})
    return verdict.model_copy(update={"by": "model"})


def repair_answer(question: str, answer: str, unsupported: list[str], evidence: Sequence[Evidence],
                  model: Model) -> Answer:
    """Remove unsupported claims; a repair that comes back longer is replaced by plain deletion."""
    deletion = " ".join(s for s in sentences(answer) if s not in set(unsupported))
    try:
        repaired = ask(model, "repair", Answer, {"question": question, "answer": answer, "unsupported": unsupported,
                                                 "evidence": evidence})
    except ModelOutputError as exc:
        return Answer(answer=deletion, reason=f"fallback: {exc}")
    if len(repaired.answer) > len(answer):  # a longer repair is a red flag: shrink, never pad
        return Answer(answer=deletion, reason="the model's repair was longer; unsupported sentences deleted instead")
    return repaired
