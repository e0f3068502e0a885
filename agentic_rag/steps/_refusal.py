"""refusal_reason and refusal_text: whether a run that stopped short abstains, and what its refusal
says; hedge_note and unmentioned_note: what an answer adds when its evidence was never sufficient, or
when the question names something the documents never mention."""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..core import RunConfig
from ..text import has_cjk

# a refusal of a Chinese question says why in Chinese, by the stop reason (the English detail stays in
# the state's abstain_reason)
_WHY_ZH = {"token_budget": "令牌预算已用完", "deadline": "已超过时限", "error": "运行出错",
           "unmentioned": "文档中从未提及{names}", "low_confidence": "连续两轮证据得分过低",
           "converged": "再检索也找不到新的内容，证据仍不足", "max_rounds": "已到最大检索轮数，证据仍不足",
           "exhausted": "已没有可再检索的内容，证据仍不足"}
_SOURCE = re.compile(r"^(?:graph|pagerank|web): ")  # how a query of another source is listed


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


def refusal_text(question: str, why: str, searched: list[str], score: float, stop_reason: str = "",
                 names: Sequence[str] = (), closest: Sequence[str] = ()) -> str:
    """The refusal, in the question's language (Chinese or English): why, the first four queries
    searched, the best evidence score and what the closest passages are about (their titles). A
    Chinese refusal says why by `stop_reason` (with the `names` the documents never mention)."""
    if has_cjk(question):
        reason = _WHY_ZH.get(stop_reason, "证据不足").format(names="、".join(names))
        tried = "；".join(dict.fromkeys(_SOURCE.sub("", q) for q in searched[:4])) or "无"
        about = f"最接近的段落讲的是：{'；'.join(closest[:2])}。" if closest else ""
        return f"知识库中没有找到可靠的答案。原因：{reason}。已检索：{tried}；最佳证据得分 {score:.2f}。{about}"
    about = f" The closest passages are about: {'; '.join(closest[:2])}." if closest else ""
    return (f"The knowledge base does not hold a reliable answer to this. Why: {why}. Searched for: "
            f"{'; '.join(searched[:4]) or 'nothing'}; best evidence score {score:.2f}.{about}")


def hedge_note(question: str, grade: dict, threshold: float) -> str:
    """The line under an answer drawn from evidence that was never graded sufficient: what it quotes
    are the closest passages found, which may not answer the question, and their grade."""
    if has_cjk(question):
        return (f"（以上引自最接近的段落，可能并未回答这个问题：证据得分 {grade['score']:.2f}，"
                f"充分需要 {threshold:.2f}。）")
    return (f"(Quoted from the closest passages found, which may not answer this: evidence score "
            f"{grade['score']:.2f}, sufficient at {threshold:.2f}.)")


def unmentioned_note(question: str, names: Sequence[str]) -> str:
    """The line under an answer to a question that names, in passing, things no document mentions."""
    if has_cjk(question):
        return f"（文档中从未提及{'、'.join(names)}。）"
    return f"(The documents never mention {', '.join(names)}.)"
