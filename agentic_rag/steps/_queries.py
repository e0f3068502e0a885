"""condense_query, rewrite_query and decompose_query: the question a follow-up stands for, and new
searches that never repeat one already tried."""
from __future__ import annotations

from collections.abc import Sequence

from ..core import Condensed, Decomposition, Evidence, ModelOutputError, Rewrite, SubQuery
from ..kb import KnowledgeBaseBackend
from ..models import Model
from ..text import coverage, key_terms, same_text
from ._ask import ask
from ._search import hit_evidence
from ._verify import question_weights


def condense_query(question: str, history: list[str], model: Model,
                   kb: KnowledgeBaseBackend | None = None, k: int = 5) -> Condensed:
    """The question written to stand alone, given the conversation before it (`history`: its "user: ..."
    and "assistant: ..." lines) and the titles of the documents `kb` finds for the earlier question
    (what the conversation is about, as the model's "topics"). A model's reply that breaks the
    schema, or an empty one, leaves the question as asked. When the model sees other readings of a
    reference, `kb` decides: the reading whose best `k` passages hold most of its key terms (their
    idf-weighted coverage), the model's first on a tie."""
    if not history:
        return Condensed(standalone=question, reason="no history")
    earlier = next((line[len("user: "):] for line in reversed(history) if line.startswith("user: ")), "")
    found = kb.search(earlier, k=k) if kb and earlier else []
    topics = list(dict.fromkeys(h.title for h in found if h.title))
    try:
        reply = ask(model, "condense", Condensed, {"question": question, "history": history, "topics": topics})
    except ModelOutputError as exc:
        return Condensed(standalone=question, reason=f"fallback, the question as asked: {exc}")
    readings = list(dict.fromkeys(r.strip() for r in [reply.standalone, *reply.readings[:2]] if r.strip()))
    if not readings:
        return Condensed(standalone=question, reason="fallback, the question as asked: the reply was empty")
    if kb is None or len(readings) == 1:
        return Condensed(standalone=readings[0], readings=readings[1:], reason=reply.reason)
    fit = [_fit(r, question, kb, k) for r in readings]
    best = max(range(len(readings)), key=lambda i: (fit[i], -i))  # a tie: the model's first
    return Condensed(standalone=readings[best], readings=[r for r in readings if r != readings[best]],
                     reason=f"{reply.reason}; the knowledge base fits "
                            + ", ".join(f"{r!r} {f:.2f}" for r, f in zip(readings, fit, strict=True)))


def _fit(reading: str, asked: str, kb: KnowledgeBaseBackend, k: int) -> float:
    """How well the knowledge base answers a reading: of its best `k` passages that name what the
    reading put in (its key terms the question as asked lacks), the best idf-weighted coverage of
    the asked question's own terms. Whether a passage holds the referent and what is asked of it
    together, not how many words the referent brings."""
    own = key_terms(asked)
    referent = [t for t in key_terms(reading) if t not in own]
    weights = question_weights(reading, kb.term_weights(reading))
    hits = [hit_evidence(h)["text"] for h in kb.search(reading, k=k)]
    return max((coverage(own, text, weights) for text in hits if coverage(referent, text) >= 0.8), default=0.0)


def rewrite_query(question: str, missing: list[str], tried: list[str], evidence: Sequence[Evidence],
                  model: Model) -> Rewrite | None:
    """One reformulated query aimed at what is missing; None when nothing new comes out."""
    inputs = {"question": question, "missing": missing, "tried": tried, "evidence": evidence[:5]}
    try:
        rewrite = ask(model, "rewrite", Rewrite, inputs)
    except ModelOutputError:
        return None
    query = rewrite.query.strip()
    if not query or any(same_text(query, t) for t in tried):
        return None
    return rewrite.model_copy(update={"query": query})


def decompose_query(question: str, tried: list[str], evidence: Sequence[Evidence], model: Model,
                    max_subqueries: int = 5) -> Decomposition:
    """At most `max_subqueries` new sub-queries, each with valid `depends_on` (earlier indexes only)."""
    inputs = {"question": question, "tried": tried, "evidence": evidence[:5]}
    try:
        plan = ask(model, "decompose", Decomposition, inputs)
    except ModelOutputError as exc:
        return Decomposition(subqueries=[], reason=f"fallback: {exc}")
    kept: list[SubQuery] = []
    position: dict[int, int] = {}  # index in the model's list -> index in the kept list
    for i, sub in enumerate(plan.subqueries):
        query = sub.query.strip()
        if query and not any(same_text(query, t) for t in tried + [k.query for k in kept]):
            position[i] = len(kept)
            earlier = {position[d] for d in sub.depends_on if d in position and d < i}  # never itself: no cycle
            kept.append(SubQuery(query=query, depends_on=sorted(earlier)))
        if len(kept) == max_subqueries:
            break
    return Decomposition(subqueries=kept, reason=plan.reason)
