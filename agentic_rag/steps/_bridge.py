"""bridge_names and bridge_search: a multi-hop question's next hop, found in the evidence with no model call."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core import Evidence, SubQuery
from ..kb import KnowledgeBaseBackend
from ..text import bridge_entities
from ._search import SearchOutcome, vector_search

# two names, three hits each: measured on the multi-hop dev sets (hotpotqa, musique)
BRIDGE_NAMES, BRIDGE_K = 2, 3


def bridge_names(question: str, evidence: Sequence[Evidence], tried: Iterable[str] = (),
                 limit: int = BRIDGE_NAMES) -> list[str]:
    """The names the best passages hold and the question does not (a title, a name in the text),
    at most `limit`, leaving out any already searched (`tried`)."""
    searched = set(tried)
    return [name for name in bridge_entities(question, evidence, limit) if name not in searched]


def bridge_search(names: list[str], outcome: SearchOutcome, kb: KnowledgeBaseBackend, question: str,
                  filters: dict | None = None, workers: int = 4, k: int = BRIDGE_K) -> SearchOutcome:
    """Search each name on its own, so that the passage about that entity joins the pool; returns
    `outcome` (the round's search) with the bridge's new passages and queries after its own."""
    bridged = vector_search([SubQuery(query=n) for n in names], kb, question, outcome.pool, k, filters, workers)
    return SearchOutcome(pool=bridged.pool, new_ids=outcome.new_ids + bridged.new_ids,
                         round_ids=outcome.round_ids + [i for i in bridged.round_ids if i not in outcome.round_ids],
                         queries_run=outcome.queries_run + bridged.queries_run)
