import pytest

from agentic_rag.kb import reciprocal_rank_fusion


def test_rrf_scores_and_ranks():
    fused = reciprocal_rank_fusion({"bm25": [7, 3], "vector": [3, 9]}, {"bm25": 1.0, "vector": 1.0}, k=60)
    assert [item for item, _, _ in fused] == [3, 7, 9]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0][2] == {"bm25": 2, "vector": 1}
    assert fused[1][2] == {"bm25": 1}


def test_weights_change_the_order():
    rankings = {"bm25": [1, 2], "vector": [2, 1]}
    assert reciprocal_rank_fusion(rankings, {"bm25": 2.0, "vector": 1.0})[0][0] == 1
    assert reciprocal_rank_fusion(rankings, {"bm25": 1.0, "vector": 2.0})[0][0] == 2
    tie = reciprocal_rank_fusion(rankings, {"bm25": 1.0, "vector": 1.0})
    assert [item for item, _, _ in tie] == [1, 2]  # equal scores: lower id first, so runs repeat
