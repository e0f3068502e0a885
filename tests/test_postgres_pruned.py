"""PostgreSQL's pruned top k (kb/postgres/_pruned) against the exhaustive sums it replaces, on a real
PostgreSQL: BM25 and the hashing embedder's sparse vectors, with and without filters, for several
k, through adds and deletes that move the document frequencies and the average length past the
one the bounds were made for. Small blocks make the pruning read several rounds, and a small
deepest block makes some queries fall back to the exhaustive sum; both must give the exhaustive
ranking. Seeded: the same documents, writes and queries every run."""
import numpy as np

from agentic_rag import IndexConfig
from agentic_rag.eval.scale import queries, texts
from agentic_rag.kb import Document, KnowledgeBase, PostgresKnowledgeBase
from agentic_rag.kb.postgres import _pruned as _postgres_pruned
from agentic_rag.kb.postgres import _search as _postgres_search

CONFIG = IndexConfig(chunk_size=4000, chunk_overlap=0)


def _documents(count: int, seed: int, repeat: int = 1) -> list[Document]:
    return [Document(f"d{seed}-{i}", " ".join([text] * repeat), metadata={"group": "ab"[i % 3 == 0]})
            for i, text in enumerate(texts(count, seed=seed))]


def _ranking(kb, query: str, k: int, mode: str, filters: dict | None) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 5)) for h in kb.search(query, k=k, mode=mode, filters=filters, rerank=False)]


def test_the_pruned_top_k_ranks_as_the_exhaustive_sum_through_writes(pg_url, monkeypatch):
    monkeypatch.setattr(_postgres_pruned, "FIRST_BLOCK", 8)
    monkeypatch.setattr(_postgres_pruned, "DEEPEST", 512)
    monkeypatch.setattr(_postgres_search, "SPARSE_DEEPEST", 128)
    answered = {"pruned": 0, "fell back": 0}
    real = _postgres_pruned.pruned_top

    def counted(*args, **kwargs):
        found = real(*args, **kwargs)
        answered["fell back" if found is None else "pruned"] += 1
        return found

    pg = PostgresKnowledgeBase(pg_url, config=CONFIG)
    embedded = KnowledgeBase(config=CONFIG)
    rng = np.random.default_rng(3)
    held: list[str] = []
    for step in range(3):
        added = _documents(250, seed=step, repeat=1 + step)  # longer texts: the average length grows
        for kb in (pg, embedded):
            kb.add_documents(added)
        held += [d.id for d in added]
        gone = [str(i) for i in rng.choice(held, size=40, replace=False)]
        for kb in (pg, embedded):
            kb.delete_documents(gone)
        held = [i for i in held if i not in gone]
        for query in queries("zipf", 6, seed=step) + queries("mid", 2, seed=step):
            for mode, k, filters in (("bm25", 1, None), ("bm25", 10, None), ("bm25", 50, {"group": "a"}),
                                     ("vector", 10, None), ("vector", 20, {"group": "a"})):
                monkeypatch.setattr(_postgres_search, "pruned_top", counted)
                pruned = _ranking(pg, query, k, mode, filters)
                monkeypatch.setattr(_postgres_search, "pruned_top", lambda *a, **kw: None)
                assert pruned == _ranking(pg, query, k, mode, filters), (step, query, mode, k, filters)
                if mode == "bm25":  # the embedded index ranks by the same formula
                    assert [i for i, _ in pruned] == [i for i, _ in _ranking(embedded, query, k, mode, filters)]
    assert answered["pruned"] > 50 and answered["fell back"] > 0, answered  # both paths taken, often


def test_a_query_of_no_known_token_ranks_as_the_embedded_knowledge_base(pg_url):
    from helpers import TINY

    pg, embedded = PostgresKnowledgeBase(pg_url), KnowledgeBase()
    for kb in (pg, embedded):
        kb.add_documents(TINY)
    for query in ("!!!", "zzzzqqq"):  # no token at all (a zero vector); tokens no chunk holds
        for mode in ("bm25", "vector", "hybrid"):
            ours, theirs = (kb.search(query, k=3, mode=mode) for kb in (pg, embedded))
            assert [h.id for h in ours] == [h.id for h in theirs]
