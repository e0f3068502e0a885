from agentic_rag import Hit, LexicalReranker, tokenize


def _hit(i, text, score):
    return Hit(id=f"d{i}#0", doc_id=f"d{i}", source="s", text=text, score=score)


def test_terms_close_together_beat_scattered_terms():
    scattered = "The warehouse is large. Many things happen. Shipping takes time. The cut-off varies by season."
    together = "Unrelated intro. The warehouse shipping cut-off is 15:00. Another line."
    hits = [_hit(1, scattered, 0.03), _hit(2, together, 0.03)]
    weights = {token: 1.0 for token in tokenize("warehouse shipping cut-off")}
    ranked = LexicalReranker(fused_weight=0.1).rerank("warehouse shipping cut-off", hits, weights)
    assert [h.doc_id for h in ranked] == ["d2", "d1"]


def test_no_weights_keeps_order():
    hits = [_hit(1, "a", 0.5), _hit(2, "b", 0.4)]
    assert LexicalReranker().rerank("q", hits, {}) == hits
