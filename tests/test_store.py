import errno
import hashlib
import io
import json
import shutil
import threading

import numpy as np
import pytest

from agentic_rag import (
    Config,
    ConfigurationError,
    IndexConfig,
    KnowledgeBase,
    RetrievalError,
    RunConfig,
    SearchConfig,
    StorageError,
    WriteConflict,
)
from agentic_rag.kb import Document, HashingEmbedder
from agentic_rag.kb.folder import _store as store
from helpers import TINY, DenseHashing

QUERIES = ["认证失败", "authentication timeout 2.3.1", "shipping after 15:00", "Team plan"]


def _results(kb):
    return [[(h.id, round(h.score, 6), h.ranks) for h in kb.search(q, k=3)] for q in QUERIES]


def _manifest(kb_dir) -> dict:
    return json.loads((kb_dir / "manifest.json").read_text())


def test_round_trip_gives_identical_results(tiny_kb, tmp_path):
    tiny_kb.delete_documents(["pricing"])
    tiny_kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert _results(loaded) == _results(tiny_kb)
    assert len(loaded) == len(tiny_kb) and loaded.document_count == tiny_kb.document_count
    assert loaded.config.chunk_size == 200
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["embedder"] == {"name": "hashing", "dimension": 2048}
    assert manifest["counts"]["chunks"] == 4 and set(manifest["files"]) >= {"chunks.jsonl", "vectors.npz"}


def test_round_trip_with_hnsw_and_incremental_add_after_load(tmp_path):
    kb = KnowledgeBase(DenseHashing(), config=Config(exact_search_below=20))
    kb.add_documents([Document(f"d{i}", f"document {i} mentions topic{i % 7}") for i in range(60)])
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb", DenseHashing(), config=Config(exact_search_below=20))
    loaded.save(tmp_path / "copy")
    assert "hnsw.bin" in _manifest(tmp_path / "copy")["files"]        # the loaded graph is saved again
    assert [h.id for h in loaded.search("topic3", k=5)] == [h.id for h in kb.search("topic3", k=5)]
    loaded.add_documents([Document("late", "a late document about topic3 and zebras")])
    loaded.delete_documents(["d3"])
    loaded.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb", DenseHashing())
    assert again.search("zebras", k=1)[0].doc_id == "late"
    assert "d3" not in {h.doc_id for h in again.search("topic3", k=60)}


def test_failed_save_leaves_previous_generation_loadable(tiny_kb, tmp_path, monkeypatch):
    tiny_kb.save(tmp_path / "kb")
    before = (tmp_path / "kb" / "manifest.json").read_text()
    tiny_kb.add_documents([Document("extra", "an extra document about zebras")])

    def crash(file, *args, **kwargs):  # the disk fills up while the arrays are written
        file.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", crash)
    with pytest.raises(StorageError, match="disk full"):
        tiny_kb.save(tmp_path / "kb")
    assert (tmp_path / "kb" / "manifest.json").read_text() == before
    assert sorted(p.name for p in (tmp_path / "kb").iterdir()) == [".lock", ".lock-queue", "gen-000001",
                                                                   "manifest.json"]
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert "extra" not in {h.doc_id for h in loaded.search("zebras", k=5)}
    monkeypatch.undo()
    tiny_kb.save(tmp_path / "kb")
    assert KnowledgeBase.load(tmp_path / "kb").search("zebras", k=1)[0].doc_id == "extra"
    assert sorted(p.name for p in (tmp_path / "kb").iterdir() if p.name.startswith("gen-")) == [
        "gen-000001", "gen-000002"]


def test_embedder_or_dimension_mismatch_is_a_clear_error(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    with pytest.raises(ConfigurationError, match=r"built with embedder 'hashing' \(2048-dim\).*--embedder hashing"):
        KnowledgeBase.load(tmp_path / "kb", embedder=HashingEmbedder(256))

    class Other:
        name, dimension = "other", 512

        def embed(self, texts):
            return np.zeros((len(texts), 512), np.float32)

    with pytest.raises(ConfigurationError, match="'other'"):
        KnowledgeBase.load(tmp_path / "kb", embedder=Other())
    with pytest.raises(ConfigurationError, match="chunked with size 200"):
        KnowledgeBase.load(tmp_path / "kb", config=Config(chunk_size=300))


def test_a_load_with_search_settings_alone_keeps_the_saved_chunking(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb", config=SearchConfig(bm25_k1=2.0, fusion="score"))
    assert loaded.config == Config(chunk_size=200, chunk_overlap=20, bm25_k1=2.0, fusion="score")
    built = KnowledgeBase(config=loaded.config)  # BM25's k1 applies to a saved index as to a new one
    built.add_documents(TINY)
    for query in ("authentication timeout 2.3.1", "认证失败"):
        assert loaded.search(query, k=3, mode="bm25") == built.search(query, k=3, mode="bm25")
        assert loaded.search(query, k=3, mode="bm25") != tiny_kb.search(query, k=3, mode="bm25")
    with pytest.raises(ConfigurationError, match="size 200 and overlap 20, not 300 and 100"):
        KnowledgeBase.load(tmp_path / "kb", config=IndexConfig(chunk_size=300))
    assert KnowledgeBase.load(tmp_path / "kb", config=RunConfig(max_rounds=1)).config == \
        Config(chunk_size=200, chunk_overlap=20, max_rounds=1)


@pytest.mark.parametrize("damage", ["flip_vectors", "truncate_chunks", "drop_bm25", "bad_manifest", "old_format"])
def test_corrupted_files_are_clear_errors(tiny_kb, tmp_path, damage):
    generation = tiny_kb.save(tmp_path / "kb")
    manifest = tmp_path / "kb" / "manifest.json"
    if damage == "flip_vectors":
        data = bytearray((generation / "vectors.npz").read_bytes())
        data[-1] ^= 0xFF
        (generation / "vectors.npz").write_bytes(bytes(data))
    elif damage == "truncate_chunks":
        (generation / "chunks.jsonl").write_text("{")
    elif damage == "drop_bm25":
        (generation / "bm25.npz").unlink()
    elif damage == "bad_manifest":
        manifest.write_text("{not json")
    else:
        manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), format_version=99)))
    with pytest.raises(RetrievalError, match="agentic-rag index PATH --kb"):
        KnowledgeBase.load(tmp_path / "kb")


def _rewrite_file(kb_dir, generation, filename, data: bytes):
    """Replace a generation's file and its checksum, as a damaged disk or a careless hand might."""
    (generation / filename).write_bytes(data)
    manifest = json.loads((kb_dir / "manifest.json").read_text())
    manifest["files"][filename] = hashlib.sha256(data).hexdigest()
    (kb_dir / "manifest.json").write_text(json.dumps(manifest))


def _npy_bytes(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3))
    return (tmp_path / "x.npy").read_bytes()


@pytest.mark.parametrize("data", [b"not a zip", b"PK\x03\x04 a broken zip", b"", "npy"])
def test_a_damaged_file_whose_checksum_matches_is_a_clear_error(tiny_kb, tmp_path, data):
    generation = tiny_kb.save(tmp_path / "kb")
    _rewrite_file(tmp_path / "kb", generation, "bm25.npz", _npy_bytes(tmp_path) if data == "npy" else data)
    with pytest.raises(RetrievalError, match=r"gen-000001/bm25.npz cannot be read .*agentic-rag index PATH --kb"):
        KnowledgeBase.load(tmp_path / "kb")


@pytest.mark.parametrize("change, problem", [
    (lambda m: m.pop("embedder"), "'embedder' is missing"),
    (lambda m: m["embedder"].pop("dimension"), "'embedder.dimension' is missing"),
    (lambda m: m.update(chunking=[200, 20]), "'chunking' is missing or not a dict"),
    (lambda m: m["counts"].pop("rows"), "'counts.rows' is missing"),
    (lambda m: m.update(files={}), "'files' of gen-000001 does not list chunks.jsonl, documents.json, bm25.npz"),
    (lambda m: m["files"].pop("vectors.npz"), "'files' of gen-000001 does not list vectors.npz"),
    (lambda m: m.update(delta=True), "a knowledge base is one full segment followed by delta segments"),
    (lambda m: m.update(generation="../elsewhere"), "generation '../elsewhere' is not gen-NNNNNN"),
])
def test_a_manifest_missing_what_a_load_needs_is_refused(tiny_kb, tmp_path, change, problem):
    tiny_kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    change(manifest)
    (tmp_path / "kb" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RetrievalError, match=f"manifest.json is corrupted \\({problem}.*agentic-rag index PATH --kb"):
        KnowledgeBase.load(tmp_path / "kb")


def test_an_hnsw_file_the_manifest_does_not_list_is_not_read(tmp_path):
    kb = KnowledgeBase(DenseHashing(), config=Config(exact_search_below=20))
    kb.add_documents([Document(f"d{i}", f"document {i} mentions topic{i % 7}") for i in range(30)])
    generation = kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    del manifest["files"]["hnsw.bin"]
    (tmp_path / "kb" / "manifest.json").write_text(json.dumps(manifest))
    (generation / "hnsw.bin").write_bytes(b"unverified")
    loaded = KnowledgeBase.load(tmp_path / "kb", DenseHashing(), config=Config(exact_search_below=20))
    assert loaded.search("topic3", k=1)[0].doc_id in {"d3", "d10", "d17", "d24"}
    loaded.save(tmp_path / "copy")  # the graph was built again from the vectors, not read from that file
    assert (tmp_path / "copy" / "gen-000001" / "hnsw.bin").read_bytes() != b"unverified"


@pytest.mark.parametrize("target", ["file", "under_file", "devnull"])
def test_saving_into_a_file_is_a_configuration_error(tiny_kb, tmp_path, target):
    (tmp_path / "somefile").write_text("x")
    path = {"file": tmp_path / "somefile", "under_file": tmp_path / "somefile" / "kb", "devnull": "/dev/null"}[target]
    with pytest.raises(ConfigurationError, match="not a folder; give a new or existing folder"):
        tiny_kb.save(path)
    assert (tmp_path / "somefile").read_text() == "x"


def test_a_save_never_replaces_a_generation_it_did_not_load(tiny_kb, tmp_path):
    kb_dir = tmp_path / "kb"
    tiny_kb.save(kb_dir)
    first, second = KnowledgeBase.load(kb_dir), KnowledgeBase.load(kb_dir)
    first.add_documents([Document("zebra", "a note about zebras")])
    first.save(kb_dir)                                   # gen-000002
    second.delete_documents(["pricing"])
    with pytest.raises(WriteConflict, match=r"changed since this knowledge base was loaded \(gen-000001, now "
                                            r"gen-000002\).*reload it and retry"):
        second.save(kb_dir)
    with pytest.raises(RetrievalError, match="already holds a knowledge base .* not loaded from") as fresh:
        KnowledgeBase().save(kb_dir)                     # a fresh one must not clobber it either
    assert not isinstance(fresh.value, WriteConflict)    # a save into the wrong folder: retrying cannot help
    again = KnowledgeBase.load(kb_dir)
    assert again.search("zebras", k=1)[0].doc_id == "zebra" and again.document_count == 6
    first.add_documents([Document("okapi", "a note about okapis")])
    assert first.save(kb_dir).name == "gen-000003"       # its own last save is what it replaces
    assert first.save(tmp_path / "copy").name == "gen-000001"
    assert first.save(kb_dir).name == "gen-000003"       # nothing changed since: nothing is written


def test_missing_knowledge_base_says_how_to_build_one(tmp_path):
    with pytest.raises(RetrievalError, match="no knowledge base at .*agentic-rag index PATH --kb"):
        KnowledgeBase.load(tmp_path / "nothing")


def test_second_writer_is_refused_while_the_lock_is_held(tiny_kb, tmp_path):
    (tmp_path / "kb").mkdir()
    held, release = threading.Event(), threading.Event()

    def hold():
        with store.writer_lock(tmp_path / "kb"):
            held.set()
            release.wait(5)

    # flock locks belong to open file descriptions, so a second open in this process conflicts too
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        with pytest.raises(WriteConflict, match="another process is writing"):
            tiny_kb.save(tmp_path / "kb")
    finally:
        release.set()
        holder.join()
    tiny_kb.save(tmp_path / "kb")


@pytest.mark.parametrize("filename, edit", [("documents.json", lambda text: '"x"'),
                                            ("chunks.jsonl", lambda text: "".join(text.splitlines(True)[1:]))])
def test_files_that_disagree_with_each_other_are_a_clear_error(tiny_kb, tmp_path, filename, edit):
    generation = tiny_kb.save(tmp_path / "kb")
    text = (generation / filename).read_text(encoding="utf-8")
    _rewrite_file(tmp_path / "kb", generation, filename, edit(text).encode("utf-8"))
    with pytest.raises(RetrievalError, match="cannot be read"):
        KnowledgeBase.load(tmp_path / "kb")


def test_a_manifest_that_names_a_path_out_of_the_folder_is_refused(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    manifest["files"]["../../etc/passwd"] = "0" * 64
    (tmp_path / "kb" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RetrievalError, match="names a path"):
        KnowledgeBase.load(tmp_path / "kb")


def test_a_save_keeps_the_generation_the_manifest_named_not_a_crash_leftover(tiny_kb, tmp_path):
    first = tiny_kb.save(tmp_path / "kb")
    (tmp_path / "kb" / "gen-000005").mkdir()  # a crash left a generation the manifest never named
    tiny_kb.add_documents([Document("extra", "an extra document about zebras")])
    tiny_kb.save(tmp_path / "kb")
    names = sorted(p.name for p in (tmp_path / "kb").iterdir() if p.name.startswith("gen-"))
    assert names == [first.name, "gen-000006"]  # a reader that opened the old manifest can still read it


def test_line_separators_inside_text_survive_a_save(tmp_path):
    kb = KnowledgeBase()
    text = "The harbour master\u2028is Captain Solberg.\x85 Menu\u2029croissant\x1c end"
    kb.add_documents([Document("odd", text, title="Line\u2028separators")])
    kb.save(tmp_path / "kb")
    kb.add_documents([Document("more", "another \u2028 one")])
    kb.save(tmp_path / "kb")                                  # a delta segment too
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.search("harbour Solberg", k=1)[0].text == text and len(loaded) == 2


# -- a full disk or a read-only folder: a StorageError in one line, the folder as it was --------------


def _listing(kb_dir) -> list[str]:
    return sorted(p.name for p in kb_dir.iterdir())


def test_a_full_disk_at_any_write_of_a_save_is_a_storage_error_that_changes_nothing(tiny_kb, small_disk):
    kb_dir = small_disk.path / "kb"
    tiny_kb.save(kb_dir)
    expected, before = _results(tiny_kb), _listing(kb_dir)
    tiny_kb.add_documents([Document("zebra", "zebras cross the road " * 800)])  # a few pages of new files
    failures = 0
    for free_pages in range(64):  # each page more lets the save get one write further, the manifest last
        small_disk.fill(free_pages * 4096)
        try:
            tiny_kb.save(kb_dir)
            break
        except StorageError as exc:
            failures += 1
            assert exc.errno == errno.ENOSPC and "\n" not in str(exc)
            assert str(exc).startswith(f"cannot write knowledge base {kb_dir}: no space left on device (ENOSPC); "
                                       f"free space on its disk or choose another --kb")
            assert _listing(kb_dir) == before  # no .tmp file, no segment the manifest does not name
            assert _results(KnowledgeBase.load(kb_dir)) == expected
        finally:
            small_disk.empty()
    assert failures > 3 and _manifest(kb_dir)["generation"] == "gen-000002"
    assert KnowledgeBase.load(kb_dir).search("zebras", k=1)[0].doc_id == "zebra"


# a library user's save in a process of its own (file_size_limited bounds its file size): prints the
# StorageError as [message, errno], or "saved"
LIMITED_SAVE = """
import json
from agentic_rag import KnowledgeBase, StorageError
from agentic_rag.kb import Document
kb = KnowledgeBase.load(sys.argv[1])
kb.add_documents([Document("zebra", "zebras cross the road " * 800)])
try:
    kb.save(sys.argv[1])
    print("saved")
except StorageError as exc:
    print(json.dumps([str(exc), exc.errno]))
"""


def test_a_file_size_limit_at_any_write_of_a_save_is_a_storage_error_that_changes_nothing(
        tiny_kb, tmp_path, file_size_limited):
    import subprocess

    kb_dir = tmp_path / "kb"
    tiny_kb.save(kb_dir)
    expected, before = _results(tiny_kb), _listing(kb_dir)
    failures = 0
    for limit in (0, 512, 2048, 4096, 8192, 16384, 1 << 20):  # each larger limit lets the save get further
        done = subprocess.run(file_size_limited(limit, LIMITED_SAVE, str(kb_dir)), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        if done.stdout == "saved\n":
            break
        failures += 1
        message, code = json.loads(done.stdout)
        assert code == errno.EFBIG and "\n" not in message
        assert message.startswith(f"cannot write knowledge base {kb_dir}: file too large (EFBIG); a file size "
                                  f"limit stops it (ulimit -f)")
        assert _listing(kb_dir) == before  # no .tmp file, no segment the manifest does not name
        assert _results(KnowledgeBase.load(kb_dir)) == expected
    assert failures > 2 and done.stdout == "saved\n"
    assert KnowledgeBase.load(kb_dir).search("zebras", k=1)[0].doc_id == "zebra"


def test_a_read_only_folder_is_a_storage_error_and_the_old_state_still_loads(tiny_kb, small_disk):
    kb_dir = small_disk.path / "kb"
    tiny_kb.save(kb_dir)
    expected = _results(tiny_kb)
    tiny_kb.add_documents([Document("zebra", "a note about zebras")])
    small_disk.read_only()
    try:
        for target in (kb_dir, small_disk.path / "new-kb"):  # a knowledge base there, or a new one
            with pytest.raises(StorageError, match=r"^cannot write knowledge base .*: read-only file system "
                                                   r"\(EROFS\); its file system is mounted read-only") as caught:
                tiny_kb.save(target)
            assert caught.value.errno == errno.EROFS
        assert _results(KnowledgeBase.load(kb_dir)) == expected
    finally:
        small_disk.read_only(False)
    tiny_kb.save(kb_dir)
    assert KnowledgeBase.load(kb_dir).search("zebras", k=1)[0].doc_id == "zebra"


# -- tampering: a damaged file whose checksum was rewritten too loads the same or fails in one line -------


def _tamper_kb(root, dense: bool):
    """A full segment (with hnswlib's graph when dense) and a delta that adds, replaces and deletes."""
    embedder, config = (DenseHashing() if dense else None), Config(exact_search_below=5, chunk_size=200,
                                                                   chunk_overlap=20)
    kb = KnowledgeBase(embedder, config=config)
    kb.add_documents([Document(f"d{i}", f"Document {i} on topic{i % 5}: Alice Smith met Bob Jones in Paris {i}.")
                      for i in range(12)])
    kb.save(root)
    kb.add_documents([Document("z", "a late note about zebras in Okapi Land"), Document("d3", "okapi notes")])
    kb.delete_documents(["d5"])
    kb.save(root)
    return lambda folder: KnowledgeBase.load(folder, embedder, config=config)


def _answers(kb):
    return ([[(h.id, round(h.score, 5), h.text) for h in kb.search(q, k=4, mode=mode)]
             for q in ("topic3 zebras", "document 7", "okapi notes") for mode in ("hybrid", "bm25", "vector")],
            [h.id for h in kb.graph_search("Alice Smith", k=5)], len(kb), kb.document_count)


def _npz(arrays: dict) -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, np.asanyarray(array))
    return out.getvalue()


def _array_edits(array: np.ndarray):
    """Shapes, dtypes and values an array must not take: each (name, the array changed)."""
    yield "shorter", array[:-1]
    yield "longer", np.concatenate([array, array[-1:]]) if len(array) else np.ones(1, array.dtype)
    yield "2-d", array.reshape(1, -1) if array.ndim == 1 else array.reshape(-1)
    yield "strings", np.array(["x"] * max(1, array.size))
    if array.dtype.kind in "iub":
        yield "out of range", array.astype(np.int64) + 10**6
        yield "negative", -(array.astype(np.int64) + 1)
        yield "fractions", array.astype(np.float64) + 0.5
    else:
        yield "scaled", array * 3
        yield "shifted", array + 0.5
        yield "not finite", np.where(np.arange(array.size).reshape(array.shape) == 0, np.nan, array)


def _tamperings(name: str, data: bytes):
    """Ways to damage one saved file: its bytes, then its structure (JSON, arrays, hnswlib's links)."""
    half = len(data) // 2
    yield "cut in half", data[:half]
    yield "emptied", b""
    yield "a byte flipped", data[:half] + bytes([data[half] ^ 0x55]) + data[half + 1:]
    yield "garbage appended", data + b'\n{"x": 1}\n'
    if name.endswith((".json", ".jsonl")):
        for value in ("[]", "{}", "null", '"x"', "[" * 100_000 + "]" * 100_000):
            yield f"replaced by {value[:6]}", value.encode()
    if name == "chunks.jsonl":
        lines = data.decode().splitlines(True)
        first = json.loads(lines[0])
        for key, value in (("row", 10**9), ("row", -1), ("row", "1"), ("doc_id", "nope"), ("text", 5),
                           ("id", json.loads(lines[-1])["id"])):
            yield f"{key}={value!r}", (json.dumps(dict(first, **{key: value})) + "\n" + "".join(lines[1:])).encode()
        yield "a line twice", (lines[0] + "".join(lines)).encode()
        yield "a line dropped", "".join(lines[:-1]).encode()
        yield "a row nested deep", ('{"a":' * 100_000 + "1" + "}" * 100_000 + "\n" + "".join(lines)).encode()
    elif name.endswith(".json"):
        body = json.loads(data)
        for key in body if isinstance(body, dict) else ():
            yield f"{key} dropped", json.dumps({k: v for k, v in body.items() if k != key}).encode()
            yield f"{key}=[1]", json.dumps(dict(body, **{key: [1]})).encode()
        if isinstance(body, list):
            yield "reversed", json.dumps(body[::-1]).encode()
            yield "a number in it", json.dumps([1, *body[1:]]).encode()
        if name == "graph.json" and body["edges"]:
            a, b, rows = body["edges"][0]
            for edge in ([a, b, [10**6]], [a, b, [-3]], ["no such name", b, rows], [a, b]):
                yield f"edge {edge}", json.dumps(dict(body, edges=[edge, *body["edges"][1:]])).encode()
    elif name.endswith(".npz"):
        with np.load(io.BytesIO(data)) as saved:
            arrays = dict(saved)
        for key, array in arrays.items():
            yield f"{key} dropped", _npz({k: v for k, v in arrays.items() if k != key})
            for change, edited in _array_edits(array):
                yield f"{key} {change}", _npz(dict(arrays, **{key: edited}))
    elif name == "hnsw.bin":
        header = 96  # then each element: its link count (uint16 in 4 bytes), its links, ...
        yield "a link out of range", data[:header + 4] + b"\xf0\xff\xff\x0f" + data[header + 8:]
        yield "more links than allowed", data[:header] + b"\xff\x7f" + data[header + 2:]
        yield "one element more", data[:16] + (int.from_bytes(data[16:24], "little") + 1).to_bytes(8, "little") \
            + data[24:]
        yield "the top level raised", data[:48] + (int.from_bytes(data[48:52], "little") + 1).to_bytes(4, "little") \
            + data[52:]


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense+hnsw"])
def test_every_tampered_file_loads_the_same_or_fails_in_one_line_naming_it(tmp_path, dense):
    base = tmp_path / "base"
    load = _tamper_kb(base, dense)
    expected, manifest = _answers(load(base)), _manifest(base)
    segments = [*manifest["earlier"], manifest]
    outcomes, wrong = {"same": 0, "refused": 0}, []
    for i, segment in enumerate(segments):
        for name in segment["files"]:
            for how, data in _tamperings(name, (base / segment["generation"] / name).read_bytes()):
                work = tmp_path / "work"
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(base, work)
                (work / segment["generation"] / name).write_bytes(data)
                changed = _manifest(work)
                (changed["earlier"][i] if i < len(segments) - 1 else changed)["files"][name] = \
                    hashlib.sha256(data).hexdigest()
                (work / "manifest.json").write_text(json.dumps(changed))
                where = f"{segment['generation']}/{name} {how}"
                try:
                    same = _answers(load(work)) == expected
                    outcomes["same"] += same
                    if not same:
                        wrong.append(f"{where}: loaded with other results")
                except RetrievalError as exc:  # one line naming the damaged segment and file
                    outcomes["refused"] += 1
                    message = str(exc)
                    if "\n" in message or f"{work}/{segment['generation']}/" not in message or name not in message:
                        wrong.append(f"{where}: {message}")
                except Exception as exc:  # noqa: BLE001 (any other error is what this test finds)
                    wrong.append(f"{where}: {type(exc).__name__}: {exc}")
    assert not wrong, "\n".join(wrong)
    assert outcomes["refused"] > 150  # the table did damage things


def _manifest_edits(manifest: dict):
    """Each field a load reads (nested ones too, and each earlier segment's) removed, of another type, absurd."""
    def fields(body, path):
        for key, value in body.items():
            yield path + (key,), value
            if isinstance(value, dict) and key != "files":
                yield from fields(value, path + (key,))
        for i, segment in enumerate(body.get("earlier", [])):
            yield from fields(segment, path + ("earlier", i))

    for path, value in list(fields(manifest, ())):
        absurd = [-1, 10**12, 2**31, True, 1.5] if type(value) is int else []
        for how, new in [("removed", None), *((f"= {v!r}", v) for v in ["x", None, [1], {}, *absurd])]:
            if new == value and type(new) is type(value):
                continue
            changed = json.loads(json.dumps(manifest))
            *parent, key = path
            holder = changed
            for step in parent:
                holder = holder[step]
            if how == "removed":
                del holder[key]
            else:
                holder[key] = new
            yield f"{'.'.join(map(str, path))} {how}", changed


def test_every_tampered_manifest_field_loads_the_same_or_fails_in_one_line(tmp_path):
    base = tmp_path / "base"
    load = _tamper_kb(base, dense=False)
    expected, manifest = _answers(load(base)), _manifest(base)
    wrong, refused = [], 0
    for how, changed in _manifest_edits(manifest):
        work = tmp_path / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        (work / "manifest.json").write_text(json.dumps(changed))
        try:
            if _answers(load(work)) != expected:
                wrong.append(f"{how}: loaded with other results")
        except (RetrievalError, ConfigurationError) as exc:  # one line, naming the folder or its manifest
            refused += 1
            if "\n" in str(exc) or str(work) not in str(exc):
                wrong.append(f"{how}: {exc}")
        except Exception as exc:  # noqa: BLE001 (any other error is what this test finds)
            wrong.append(f"{how}: {type(exc).__name__}: {exc}")
    assert not wrong, "\n".join(wrong)
    assert refused > 100


def test_a_manifest_with_an_absurd_row_count_is_refused_before_memory_is_taken(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    manifest = _manifest(tmp_path / "kb")
    manifest["counts"]["rows"] = 10**12
    (tmp_path / "kb" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RetrievalError, match=r"manifest.json is corrupted \('counts.rows' = 1000000000000 is not a "
                                             r"count from 0 to 2147483647\); rebuild"):
        KnowledgeBase.load(tmp_path / "kb")


def test_rows_deleted_before_a_save_take_no_memory_at_load(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    expected = _results(tiny_kb)
    tiny_kb.add_documents([Document(f"gone{i}", f"a note {i} deleted before the save") for i in range(50)])
    tiny_kb.delete_documents([f"gone{i}" for i in range(50)])
    tiny_kb.save(tmp_path / "kb")  # a delta holding only rows that are gone
    assert _manifest(tmp_path / "kb")["counts"]["rows"] >= len(tiny_kb) + 50
    kb = KnowledgeBase.load(tmp_path / "kb")
    assert len(kb._chunks) == len(tiny_kb) and _results(kb) == expected  # no row the files do not name
    kb.add_documents([Document("late", "a late note about zebras")])
    kb.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb")
    assert again.search("zebras", k=1)[0].doc_id == "late" and len(again) == len(tiny_kb) + 1


def test_a_manifest_nested_past_the_stack_is_a_one_line_error(tiny_kb, tmp_path):
    tiny_kb.save(tmp_path / "kb")
    (tmp_path / "kb" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RetrievalError, match=r"manifest.json is corrupted \(nested too deep\); rebuild"):
        KnowledgeBase.load(tmp_path / "kb")
    assert store.current_generation(tmp_path / "kb") == "an unreadable manifest"


def test_an_error_names_the_damaged_segment_not_the_newest(tiny_kb, tmp_path):
    first = tiny_kb.save(tmp_path / "kb")
    tiny_kb.add_documents([Document("zebra", "a note about zebras")])
    assert tiny_kb.save(tmp_path / "kb").name == "gen-000002"  # a delta beside the full segment
    manifest = _manifest(tmp_path / "kb")
    data = json.dumps([["not", "a graph"]]).encode()
    (first / "graph.json").write_bytes(data)
    manifest["earlier"][0]["files"]["graph.json"] = hashlib.sha256(data).hexdigest()
    (tmp_path / "kb" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RetrievalError, match=r"kb/gen-000001/graph.json cannot be read \(ValueError: the graph is "
                                             r"not labels and edges\); rebuild") as caught:
        KnowledgeBase.load(tmp_path / "kb")
    assert "gen-000002" not in str(caught.value)
