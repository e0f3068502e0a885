import json
import threading

import pytest

from agentic_rag import Config, ConfigurationError, HashingEmbedder, KnowledgeBase, RetrievalError
from agentic_rag.kb import Document, load_documents, tokenize
from agentic_rag.kb.embedders._embedders import SEMANTIC_FUSION
from helpers import EXAMPLE_DATA, PARAPHRASES, DenseHashing


def test_concurrent_searches_while_documents_are_added(tmp_path):
    kb = KnowledgeBase(DenseHashing(), config=Config(exact_search_below=40))  # crosses into hnswlib while readers run
    kb.add_documents([Document(f"seed{i}", f"seed document {i} about apples") for i in range(10)])
    errors, seen, done = [], set(), threading.Event()

    def search():
        try:
            for _ in range(100_000):
                for hit in kb.search("new apples", k=5):
                    seen.add(hit.doc_id)
                    if hit.doc_id.startswith("new"):  # a torn read would pair an id with another text
                        batch, i = hit.doc_id[3:].split("-")
                        assert hit.text == f"new document {batch} {i} about apples"
                if done.is_set():
                    return
        except Exception as exc:  # any exception here is the failure this test looks for
            errors.append(exc)

    def add():
        try:
            for batch in range(10):
                kb.add_documents([Document(f"new{batch}-{i}", f"new document {batch} {i} about apples")
                                  for i in range(10)])
        except Exception as exc:
            errors.append(exc)
        finally:
            done.set()

    threads = [threading.Thread(target=search) for _ in range(4)] + [threading.Thread(target=add)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(kb) == 110
    kb.save(tmp_path / "kb")  # the manifest lists an hnsw file only when hnswlib holds the vectors
    assert "hnsw.bin" in json.loads((tmp_path / "kb" / "manifest.json").read_text())["files"]
    assert any(doc.startswith("new") for doc in seen)
    assert len(kb.search("new document 9 3 apples", k=110)) == 110


class SpyEmbedder(HashingEmbedder):
    """Hashing, recording which method embedded which texts."""

    def __init__(self):
        super().__init__(64)
        self.documents, self.queries = [], []

    def embed(self, texts):
        self.documents.extend(texts)
        return super().embed(texts)

    def embed_query(self, texts):
        self.queries.extend(texts)
        return HashingEmbedder.embed(self, texts)


@pytest.mark.parametrize(("query", "doc_id"), PARAPHRASES)
def test_e5_finds_a_paraphrase_with_no_word_in_common(example_kb_e5, query, doc_id):
    [doc] = [d for d in load_documents(EXAMPLE_DATA).documents if d.id == doc_id]
    assert not set(tokenize(query)) & set(tokenize(f"{doc.title} {doc.text}"))
    assert example_kb_e5.search(query, k=1, mode="vector")[0].doc_id == doc_id


def test_concurrent_e5_searches_match_serial_ones(example_kb_e5):
    queries = [q for q, _ in PARAPHRASES] + ["登录报错的问题在 2.3.1 版本里修复了吗？", "Team plan price per member"]
    serial = {(q, mode): [h.id for h in example_kb_e5.search(q, k=5, mode=mode)]
              for q in queries for mode in ("vector", "hybrid")}
    results, errors = {}, []

    def worker(offset):
        try:
            for i in range(len(serial)):
                q, mode = list(serial)[(i + offset) % len(serial)]
                results.setdefault((q, mode), []).append([h.id for h in example_kb_e5.search(q, k=5, mode=mode)])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(runs == [serial[key]] * 6 for key, runs in results.items()) and len(results) == len(serial)


def test_an_e5_knowledge_base_saves_its_dimension_and_reopens(example_kb_e5, tmp_path):
    example_kb_e5.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedder"] == {"name": "e5", "dimension": 384}
    reopened = KnowledgeBase.load(tmp_path / "kb")
    assert (reopened.embedder.name, reopened.embedder.dimension) == ("e5", 384)
    query = PARAPHRASES[0][0]
    expected = [h.id for h in example_kb_e5.search(query, mode="vector")]
    assert [h.id for h in reopened.search(query, mode="vector")] == expected


def test_hybrid_fusion_follows_the_embedder_unless_the_config_names_one(tiny_docs):
    kb = KnowledgeBase(HashingEmbedder(64))
    assert kb.fusion == ("score", 0.02)  # the hashing embedder's measured defaults
    kb.add_documents(tiny_docs)
    kb.config = Config(fusion="score", vector_weight=2.0)
    assert kb.fusion == ("score", 2.0)
    hit = kb.search("authentication timeout", k=1)[0]
    assert hit.ranks == {"bm25": 1, "vector": 1} and hit.score == pytest.approx(3.0)  # both normalised to 1

    class Unnamed:  # an embedder that names no fusion, e.g. a hosted one, gets the semantic default
        name, dimension = "unnamed", 64

        def embed(self, texts):
            return HashingEmbedder(64).embed(texts)

    assert KnowledgeBase(Unnamed()).fusion == SEMANTIC_FUSION == ("score", 1.5)
    with pytest.raises(ConfigurationError, match="Config.fusion = 'max'; choose 'rrf' or 'score'"):
        Config(fusion="max")


def test_readding_a_changed_document_embeds_only_its_new_chunks():
    spy = SpyEmbedder()
    kb = KnowledgeBase(spy, Config(chunk_size=100, chunk_overlap=0))
    paragraphs = [f"Paragraph {n} of the handbook says rule {n} applies on day {n}." for n in range(6)]
    kb.add_documents([Document(id="handbook", text="\n\n".join(paragraphs))])
    first = len(spy.documents)
    assert first == len(kb) >= 4
    paragraphs[-1] = "The last paragraph now says something new about holidays."
    kb.add_documents([Document(id="handbook", text="\n\n".join(paragraphs))])
    assert 1 <= len(spy.documents) - first < first  # only chunks whose text changed were embedded
    fresh = KnowledgeBase(HashingEmbedder(64), Config(chunk_size=100, chunk_overlap=0))
    fresh.add_documents([Document(id="handbook", text="\n\n".join(paragraphs))])
    query = "holidays paragraph"
    assert [(h.id, round(h.score, 6)) for h in kb.search(query, mode="vector")] == \
        [(h.id, round(h.score, 6)) for h in fresh.search(query, mode="vector")]


def test_vectors_are_reused_from_a_saved_knowledge_base_of_the_same_embedder(tiny_docs, tmp_path):
    saved = KnowledgeBase(HashingEmbedder(64))
    saved.add_documents(tiny_docs)
    saved.save(tmp_path / "old")
    other = KnowledgeBase(HashingEmbedder(128))
    other.add_documents(tiny_docs[:2])
    other.save(tmp_path / "other")
    spy = SpyEmbedder()
    kb = KnowledgeBase(spy)
    kb.add_documents(tiny_docs + [Document(id="new", text="A page no saved base holds.")],
                     reuse_from=[tmp_path / "other", tmp_path / "old"])
    assert spy.documents == ["A page no saved base holds."]  # 128-dim vectors were not taken
    assert [h.id for h in kb.search("pricing", mode="vector")] == [h.id for h in saved.search("pricing", mode="vector")]
    spy = SpyEmbedder()
    KnowledgeBase(spy).add_documents(tiny_docs, reuse_from=tmp_path / "old")  # one folder alone
    assert spy.documents == []
    # a folder that is no knowledge base, and a base tokenized otherwise: hashing re-embeds
    manifest = tmp_path / "old" / "manifest.json"
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), tokenizer={"version": 0})))
    for reuse_from in (tmp_path / "old", str(tmp_path / "nothing-here"), [tmp_path / "other"]):
        spy = SpyEmbedder()
        KnowledgeBase(spy).add_documents(tiny_docs, reuse_from=reuse_from)
        assert len(spy.documents) == len(tiny_docs)


def test_reused_vectors_are_reported_and_follow_deletes(tiny_docs, capsys):
    spy = SpyEmbedder()
    kb = KnowledgeBase(spy)
    kb.add_documents(tiny_docs[:2], progress=True)
    assert "reused" not in capsys.readouterr().err
    kb.add_documents([Document(id="copy", text=tiny_docs[0].text, title=tiny_docs[0].title)], progress=True)
    assert "reused the vectors of 1 of 1 chunks" in capsys.readouterr().err and len(spy.documents) == 2
    kb.delete_documents([tiny_docs[0].id, "copy"])
    kb.add_documents(tiny_docs[:1])  # no live chunk holds its text any more: embedded again
    assert len(spy.documents) == 3


def test_a_folder_tokenized_otherwise_is_refused_with_the_fix(tmp_path):
    import re

    kb = KnowledgeBase()
    kb.add_documents([Document("d", "some text about parcels")])
    kb.save(tmp_path / "kb")
    manifest = tmp_path / "kb" / "manifest.json"
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), tokenizer={"version": 0})))
    with pytest.raises(RetrievalError, match=rf"^{re.escape(str(tmp_path / 'kb'))} was tokenized with "
                                             r"\{'version': 0\}; rebuild it with this version: agentic-rag index "
                                             r"PATH --kb NEW_DIR$"):
        KnowledgeBase.load(tmp_path / "kb")
