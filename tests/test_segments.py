"""Saves that write what changed: a full segment, then delta segments; deletes and replacements
across segments; compaction (by `compact=True`, by `agentic-rag compact`, and automatic); a crash
at each step of a delta save and of a merge leaves the previous state loadable; format 2 loads."""
import hashlib
import json
import os

import numpy as np
import pytest

from agentic_rag import KnowledgeBase, StorageError
from agentic_rag.cli import main
from agentic_rag.kb import Document
from agentic_rag.kb.folder import MAX_DELTAS
from agentic_rag.kb.folder import _store as store
from helpers import TINY, run

QUERIES = ["认证失败", "authentication timeout 2.3.1", "shipping after 15:00", "Team plan", "zebras", "apples"]


def _results(kb):
    return [[(h.id, round(h.score, 5), h.ranks) for h in kb.search(q, k=4)] for q in QUERIES]


def _manifest(kb_dir) -> dict:
    return json.loads((kb_dir / "manifest.json").read_text())


def _size(folder) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def _changed(kb):
    """Changes that touch rows of the full segment and of an earlier delta."""
    kb.add_documents([Document("zebra", "Zebras cross the river at dawn."),
                      Document("apple", "Apples ship from the north warehouse.")])
    return kb


@pytest.fixture
def saved(tiny_kb, tmp_path):
    kb_dir = tmp_path / "kb"
    tiny_kb.save(kb_dir)
    return tiny_kb, kb_dir


def test_a_delta_holds_only_what_changed_and_loads_to_the_same_knowledge_base(saved):
    kb, kb_dir = saved
    full = _size(kb_dir / "gen-000001")
    delta = _changed(kb).save(kb_dir)
    manifest = _manifest(kb_dir)
    assert manifest["delta"] and [s["generation"] for s in manifest["earlier"]] == ["gen-000001"]
    assert set(manifest["files"]) == set(store.DELTA_FILES) and _size(delta) < full / 2
    assert [json.loads(line)["doc_id"] for line in (delta / "chunks.jsonl").read_text().splitlines()] == [
        "zebra", "apple"]
    loaded = KnowledgeBase.load(kb_dir)
    assert _results(loaded) == _results(kb) and loaded.document_count == kb.document_count


def test_deletes_and_replacements_reach_rows_of_every_segment(saved):
    kb, kb_dir = saved
    _changed(kb).save(kb_dir)                                          # gen 2: zebra, apple
    kb.delete_documents(["pricing", "zebra"])                          # one from the full segment, one from gen 2
    kb.add_documents([Document("apple", "Apples now ship from the south warehouse."),  # replaces gen 2's
                      Document(TINY[0].id, "认证失败 means authentication failed: replaced text.")])  # the full's
    kb.save(kb_dir)                                                    # gen 3
    loaded = KnowledgeBase.load(kb_dir)
    assert _results(loaded) == _results(kb)
    assert {"pricing", "zebra"}.isdisjoint(h.doc_id for q in QUERIES for h in loaded.search(q, k=10))
    assert "south" in loaded.search("apples warehouse", k=1)[0].text
    assert loaded.document_count == kb.document_count and len(loaded) == len(kb)
    loaded.add_documents([Document("late", "a late note about zebras")])   # a loaded base saves deltas too
    loaded.save(kb_dir)
    assert len(_manifest(kb_dir)["earlier"]) == 3 and KnowledgeBase.load(kb_dir).search("zebras", k=1)[0].doc_id \
        == "late"


def test_compaction_folds_the_segments_into_one_and_drops_what_was_deleted(saved, capsys):
    kb, kb_dir = saved
    _changed(kb).save(kb_dir)
    kb.delete_documents(["zebra"])
    kb.save(kb_dir)
    expected = _results(kb)
    assert main(["compact", "--kb", str(kb_dir)]) == 0
    assert "compacted 3 segments into one" in capsys.readouterr().out
    manifest = _manifest(kb_dir)
    assert not manifest.get("earlier") and not manifest.get("delta")
    assert "Zebras cross" not in (kb_dir / manifest["generation"] / "chunks.jsonl").read_text()
    assert _results(KnowledgeBase.load(kb_dir)) == expected
    kept = sorted(p.name for p in kb_dir.iterdir() if p.name.startswith("gen-"))
    assert kept == ["gen-000001", "gen-000002", "gen-000003", "gen-000004"]  # the last manifest's readers go on
    KnowledgeBase.load(kb_dir).save(kb_dir, compact=True)
    assert sorted(p.name for p in kb_dir.iterdir() if p.name.startswith("gen-")) == ["gen-000004", "gen-000005"]


def test_a_save_after_max_deltas_writes_one_full_segment(saved):
    kb, kb_dir = saved
    for i in range(MAX_DELTAS):
        kb.add_documents([Document(f"note{i}", f"note {i} about zebras")])
        kb.save(kb_dir)
    assert len(_manifest(kb_dir)["earlier"]) == MAX_DELTAS  # the full segment and MAX_DELTAS - 1 deltas
    kb.add_documents([Document("one-more", "one more note")])
    kb.save(kb_dir)
    assert not _manifest(kb_dir).get("earlier") and _results(KnowledgeBase.load(kb_dir)) == _results(kb)


@pytest.mark.parametrize("step", range(12))
@pytest.mark.parametrize("kind", ["delta", "merge"])
def test_a_crash_at_any_step_of_a_save_leaves_the_previous_state(saved, monkeypatch, step, kind):
    kb, kb_dir = saved
    _changed(kb).save(kb_dir)
    expected = _results(KnowledgeBase.load(kb_dir))
    kb.delete_documents(["apple"])
    kb.add_documents([Document("late", "a late note about zebras")])
    calls = {"n": 0}

    def failing(real):
        def wrapper(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == step + 1:
                raise OSError(f"crash at step {step}")
            return real(*args, **kwargs)
        return wrapper

    # the steps of a save: each file written and synced, the folder renamed, the manifest written and replaced
    monkeypatch.setattr(store, "_fsync", failing(store._fsync))
    monkeypatch.setattr(os, "rename", failing(os.rename))
    monkeypatch.setattr(os, "replace", failing(os.replace))
    before = {p.name for p in kb_dir.iterdir()}
    try:
        kb.save(kb_dir, compact=kind == "merge")
    except StorageError:
        pass
    monkeypatch.undo()
    assert _results(KnowledgeBase.load(kb_dir)) in (expected, _results(kb))  # before, or done whole
    left = {p.name for p in kb_dir.iterdir()} - before  # a failed save leaves no temporary file or segment
    assert left <= {_manifest(kb_dir)["generation"]} and not any(name.endswith(".tmp") for name in left)
    kb.save(kb_dir)  # and the next save goes on from there
    assert _results(KnowledgeBase.load(kb_dir)) == _results(kb)


def test_a_format_2_knowledge_base_loads_and_grows_by_deltas(tiny_kb, tmp_path):
    kb_dir = tmp_path / "kb"
    generation = tiny_kb.save(kb_dir)
    expected = _results(tiny_kb)
    with np.load(generation / "vectors.npz") as arrays:   # rewrite it as format 2 wrote it: every row, float32
        dense = np.zeros((_manifest(kb_dir)["counts"]["rows"], 2048), np.float32)
        dense[arrays["rows"]] = tiny_kb._vectors.vectors_of(arrays["rows"].tolist())
    (generation / "vectors.npz").unlink()
    np.save(generation / "vectors.npy", dense)
    arrays, _ = tiny_kb._bm25.to_arrays()                 # and BM25 as formats 2 and 3 did: rows, float32 counts
    arrays = dict(arrays, post_rows=tiny_kb._bm25._merged()[1], post_tf=arrays["post_tf"].astype(np.float32))
    del arrays["post_gaps"]
    with (generation / "bm25.npz").open("wb") as f:
        np.savez(f, **arrays)
    manifest = _manifest(kb_dir)
    del manifest["files"]["vectors.npz"]
    manifest.update(format_version=2, files=dict(manifest["files"], **{
        name: hashlib.sha256((generation / name).read_bytes()).hexdigest() for name in ("vectors.npy", "bm25.npz")}))
    (kb_dir / "manifest.json").write_text(json.dumps(manifest))
    loaded = KnowledgeBase.load(kb_dir)
    assert _results(loaded) == expected
    _changed(loaded).save(kb_dir)
    assert _manifest(kb_dir)["format_version"] == 4 and _results(KnowledgeBase.load(kb_dir)) == _results(loaded)


def test_a_folder_emptied_or_built_again_is_never_written_over_as_if_unchanged(saved, tmp_path):
    import shutil

    kb, kb_dir = saved
    shutil.rmtree(kb_dir)                                   # emptied: the next save writes everything anew
    _changed(kb).save(kb_dir)
    assert not _manifest(kb_dir).get("delta") and _results(KnowledgeBase.load(kb_dir)) == _results(kb)
    stale = KnowledgeBase.load(kb_dir)
    shutil.rmtree(kb_dir)
    other = KnowledgeBase()
    other.add_documents([Document("other", "another knowledge base altogether")])
    other.save(kb_dir)                                      # gen-000001 again, with other files
    stale.add_documents([Document("late", "a late note")])
    with pytest.raises(Exception, match="another knowledge base built there since"):
        stale.save(kb_dir)
    assert KnowledgeBase.load(kb_dir).document_count == 1 and not stale.holds_saved(kb_dir)


def test_searches_during_a_compacting_save_never_see_a_half_built_graph(tmp_path):
    import threading

    from agentic_rag import Config
    from helpers import DenseHashing

    kb = KnowledgeBase(DenseHashing(), config=Config(exact_search_below=50))
    kb.add_documents([Document(f"d{i}", f"document {i} about topic{i} and word{i * 7 % 13}") for i in range(400)])
    kb.delete_documents([f"d{i}" for i in range(0, 400, 3)])      # a third deleted: the save rebuilds the graph
    wrong, done = [], threading.Event()

    def search():
        while not done.is_set():
            hit = kb.search("topic5", k=1, mode="vector")[0]
            wrong.append(hit.doc_id != "d5")

    reader = threading.Thread(target=search)
    reader.start()
    kb.save(tmp_path / "kb", compact=True)
    done.set()
    reader.join()
    assert wrong and not any(wrong) and kb._vectors.hnsw.get_current_count() == kb._vectors.size


def _saved_kb(folder, text="Alice met Bob."):
    kb = KnowledgeBase()
    kb.add_documents([Document(id="a", text=text)])
    kb.save(folder)
    return kb


@pytest.mark.parametrize("name", ["gen-000001", "gen-000099", ".gen-000002.tmp", ".gen-partial.tmp",
                                  "gen-000001/inner"])
def test_no_knowledge_base_is_made_or_saved_inside_a_segment_folder(tmp_path, name):
    from agentic_rag import ConfigurationError, RetrievalError, open_kb

    parent = tmp_path / "kb"
    _saved_kb(parent)  # writes gen-000001; the other names are not listed: its next save deletes them
    inside = parent / name
    with pytest.raises(ConfigurationError, match=f"inside the knowledge base in {parent}"):
        open_kb(inside, create=True)
    nested = KnowledgeBase()
    nested.add_documents([Document(id="x", text="Nested doc.")])
    with pytest.raises(ConfigurationError, match=f"give a folder outside it or the knowledge base's folder: {parent}$"):
        nested.save(inside)
    assert not (inside / "manifest.json").exists()
    with pytest.raises(RetrievalError, match=f"not one of its own; open {parent}$") as caught:
        open_kb(inside)
    assert "build one" not in str(caught.value)  # building there is what loses it


@pytest.mark.parametrize("target", ["gen-000001", "gen-000002"])  # a segment, and one the next save makes
def test_a_link_into_a_segment_folder_is_no_way_into_it(capsys, tmp_path, target):
    from agentic_rag import ConfigurationError, open_kb

    api = tmp_path / "api"
    _saved_kb(api)
    (tmp_path / "lnk").symlink_to(api / target)
    inside = tmp_path / "lnk" / "sub"
    with pytest.raises(ConfigurationError, match=f"{inside} is inside the knowledge base in {api}, "):
        open_kb(inside, create=True)
    with pytest.raises(ConfigurationError, match=f"the knowledge base's folder: {api}$"):
        _saved_kb(inside, "Nested doc.")
    (tmp_path / "doc.txt").write_text("Nested doc.", encoding="utf-8")
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(tmp_path / "doc.txt"), "--kb", str(inside))
    assert code == 1 and err.strip().endswith(f"the knowledge base's folder: --kb {api}"), err
    assert not (api / target / "sub").exists()
    kb = KnowledgeBase.load(api)
    kb.add_documents([Document(id="b", text="Carol met Dan.")])
    kb.save(api)  # what its saves delete holds nothing of anyone else's
    assert {h.doc_id for h in KnowledgeBase.load(api).search("met", k=5)} == {"a", "b"}


def test_a_link_to_a_knowledge_base_opens_and_saves_it(tmp_path):
    from agentic_rag import open_kb

    _saved_kb(tmp_path / "kb")
    (tmp_path / "alias").symlink_to(tmp_path / "kb")
    kb = open_kb(tmp_path / "alias", create=True)
    kb.add_documents([Document(id="b", text="Carol met Dan.")])
    assert kb.save(tmp_path / "alias").name == "gen-000002" and len(KnowledgeBase.load(tmp_path / "kb")) == 2


def test_a_manifest_another_program_wrote_makes_no_segment_folder(capsys, tmp_path):
    from agentic_rag import open_kb

    web = tmp_path / "web"
    web.mkdir()
    (web / "manifest.json").write_text('{"name": "my pwa", "format_version": "1"}', encoding="utf-8")
    kb = open_kb(web / "gen-000001", create=True)
    kb.add_documents([Document(id="a", text="Alice met Bob.")])
    kb.save(web / "gen-000001")
    assert len(KnowledgeBase.load(web / "gen-000001")) == 1
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nCarol met Dan.", encoding="utf-8")
    code, out, err = run(capsys, "index", "--embedder", "hashing",
                                 str(tmp_path / "docs"), "--kb", str(web / "gen-000002"))
    assert code == 0 and "indexed 1 document " in out, err


def test_a_knowledge_base_whose_own_folder_is_named_like_a_segment_works(capsys, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nCarol met Dan.", encoding="utf-8")
    kb_dir = tmp_path / "gen-000001"  # no manifest beside it: no knowledge base holds it
    kb = _saved_kb(kb_dir)
    kb.add_documents([Document(id="b", text="Erin met Frank.")])
    assert kb.save(kb_dir).name == "gen-000002"
    assert len(KnowledgeBase.load(kb_dir)) == 2
    assert run(capsys, "index", "--embedder", "hashing", str(tmp_path / "docs"), "--kb", str(kb_dir))[0] == 0
    code, out, err = run(capsys, "search", "Carol", "--kb", str(kb_dir), "--json")
    assert code == 0 and json.loads(out)[0]["doc_id"] == "notes.md", err
    assert run(capsys, "compact", "--kb", str(kb_dir))[0] == 0


def test_a_knowledge_base_kept_inside_the_documents_it_indexes_is_not_read_as_them(capsys, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nCarol met Dan.", encoding="utf-8")
    (docs / "log.jsonl").write_text('{"id": "t1", "text": "Erin met Frank."}\n', encoding="utf-8")
    for _ in range(2):  # the second time, the knowledge base's own chunks.jsonl is there to be read
        code, out, err = run(capsys, "index", "--embedder", "hashing", str(docs), "--kb", str(docs / "kb"))
        assert code == 0, err
    assert "indexed 2 documents (0 new, 0 replaced, 2 unchanged)" in out, out


def test_saving_into_the_same_folder_again_passes_the_guard(tmp_path):
    from agentic_rag import open_kb

    kb = open_kb(tmp_path / "kb", create=True)
    kb.add_documents([Document(id="a", text="Alice met Bob.")])
    assert kb.save(tmp_path / "kb").name == "gen-000001"
    assert kb.save(tmp_path / "kb").name == "gen-000001"  # nothing changed: nothing written
    kb.add_documents([Document(id="b", text="Carol met Dan.")])
    assert kb.save(tmp_path / "kb").name == "gen-000002"
    again = open_kb(tmp_path / "kb", create=True)  # create=True loads what is there
    again.add_documents([Document(id="c", text="Erin met Frank.")])
    assert again.save(tmp_path / "kb").name == "gen-000003" and len(KnowledgeBase.load(tmp_path / "kb")) == 3


@pytest.mark.parametrize("text, names", [
    ('{"format_version": 4, "generation": "gen-000003", "earlier": [{"generation": "gen-000001"}]}',
     {"gen-000001", "gen-000003"}),
    ('{"format_version": 9, "generation": "gen-000002", "earlier": "none"}', {"gen-000002"}),  # a newer save's
    ('{"name": "my pwa", "generation": "gen-000001"}', set()),                # no format version: not ours
    ('{"format_version": true, "generation": "gen-000001"}', set()),
    ('{"format_version": 4, "generation": "../x"}', set()),
    ('[4, "gen-000001"]', set()),
    ("not json", set())])
def test_only_a_manifest_an_agentic_rag_save_wrote_lists_segments(tmp_path, text, names):
    from agentic_rag.kb._layout import segment_names

    (tmp_path / "manifest.json").write_text(text, encoding="utf-8")
    assert segment_names(tmp_path) == names
