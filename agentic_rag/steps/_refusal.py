"""refusal_reason and refusal_text: whether a run that stopped short abstains, and what its refusal says."""
from __future__ import annotations

from ..core import RunConfig
from ..text import has_cjk


def refusal_reason(stop_reason: str, grade: dict | None, has_evidence: bool, config: RunConfig) -> str | None:
    """Why a run whose retrieval stopped (`stop_reason`) without a sufficient grade abstains, or None
    to answer from what it has: it abstains on low confidence, a spent budget, exhaustion when
    `answer_when_exhausted` is off, no evidence, or a grade below `answer_floor`."""
    score = grade["score"] if grade else 0.0
    if stop_reason == "token_budget":
        return "the token budget ran out before another round"
    gives_up = stop_reason == "exhausted" and not config.answer_when_exhausted
    if stop_reason == "low_confidence" or gives_up or score < config.answer_floor or not has_evidence:
        said = f": {grade['reason']}" if grade and grade.get("reason") else ""
        return (f"evidence stayed insufficient (last score {score:.2f}, needs {config.min_context_score:.2f})"
                f"{said}; retrieval stopped: {stop_reason}")
    return None


def refusal_text(question: str, why: str, searched: list[str], score: float) -> str:
    """The refusal, in the question's language (Chinese or English): why, the first four queries
    searched, and the best evidence score."""
    tried = "; ".join(searched[:4]) or "nothing"
    if has_cjk(question):
        return f"知识库中没有找到可靠的答案。原因：{why}。已检索：{tried}；最佳证据得分 {score:.2f}。"
    return (f"The knowledge base does not hold a reliable answer to this. Why: {why}. Searched for: "
            f"{tried}; best evidence score {score:.2f}.")
