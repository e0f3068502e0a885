import pytest

from agentic_rag.kb import reciprocal_rank_fusion, score_fusion


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


def test_score_fusion_normalises_each_list_and_keeps_score_gaps():
    results = {"bm25": [(7, 12.0), (3, 4.0), (5, 2.0)], "vector": [(3, 0.9), (9, 0.85), (7, 0.3)]}
    fused = score_fusion(results, {"bm25": 1.0, "vector": 1.0})
    scores = {item: score for item, score, _ in fused}
    assert scores[7] == pytest.approx(1.0 + 0.0)
    assert scores[3] == pytest.approx(0.2 + 1.0)
    assert scores[9] == pytest.approx((0.85 - 0.3) / 0.6)
    assert scores[5] == pytest.approx(0.0)
    assert [item for item, _, _ in fused] == [3, 7, 9, 5]
    assert fused[0][2] == {"bm25": 2, "vector": 1}
    # a retriever that is sure leads: 9 is almost as close as 3 by vector, 7 far; RRF keeps 7 (ranks 1 and 3) above 9
    weights = {"bm25": 0.5, "vector": 1.0}
    assert [i for i, _, _ in score_fusion(results, weights)][:2] == [3, 9]
    rankings = {name: [item for item, _ in found] for name, found in results.items()}
    assert [i for i, _, _ in reciprocal_rank_fusion(rankings, weights)][:2] == [3, 7]


def test_score_fusion_of_equal_or_missing_scores():
    assert score_fusion({"bm25": [(1, 2.0), (2, 2.0)]}, {}) == [(1, 1.0, {"bm25": 1}), (2, 1.0, {"bm25": 2})]
    assert score_fusion({"bm25": [], "vector": [(4, 0.5)]}, {"vector": 0.5}) == [(4, 0.5, {"vector": 1})]
