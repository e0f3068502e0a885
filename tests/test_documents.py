import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from agentic_rag import ConfigurationError, Document, load_documents
from agentic_rag.cli import main
from agentic_rag.kb.ingestion._files import _checked, kernel_file_system, read_inside
from agentic_rag.kb.ingestion._loaders import Unreadable

SECRET = "root:x:0:0:the-secret-line"


def test_loads_txt_md_jsonl_recursively_with_metadata(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("---\ntype: manual\ndate: 2026-01-02\n---\n# Title B\n\nBody.",
                                           encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"id": "x1", "text": "first", "title": "T", "metadata": {"k": "v"}}) + "\n"
        + json.dumps({"text": "second"}) + "\n", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("a,b", encoding="utf-8")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "d.md").write_text("secret", encoding="utf-8")
    result = load_documents([tmp_path])
    by_id = {d.id: d for d in result.documents}
    assert set(by_id) == {"a.txt", "sub/b.md", "x1", "c.jsonl:2"}
    assert by_id["sub/b.md"].title == "Title B"
    assert by_id["sub/b.md"].metadata == {"type": "manual", "date": "2026-01-02"}
    assert by_id["sub/b.md"].text.startswith("# Title B")
    assert by_id["a.txt"].title == "a"
    assert by_id["x1"].metadata == {"k": "v"} and by_id["x1"].title == "T"
    assert by_id["x1"].source.endswith("c.jsonl:1")
    assert result.skipped == []


def test_bad_files_are_skipped_and_counted(tmp_path, caplog):
    (tmp_path / "good.txt").write_text("good", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.md").write_text("   ", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"text": "ok"}\nnot json\n{"title": "no text"}\n', encoding="utf-8")
    result = load_documents(tmp_path)
    assert [d.id for d in result.documents] == ["good.txt", "rows.jsonl:1"]
    reasons = dict(result.skipped)
    assert "not UTF-8" in reasons[str(tmp_path / "latin1.txt")]
    assert reasons[str(tmp_path / "empty.md")] == "empty file"
    assert str(tmp_path / "rows.jsonl") + ":2" in reasons and str(tmp_path / "rows.jsonl") + ":3" in reasons
    assert "skipped" in caplog.text


def test_single_file_and_unsupported_file(tmp_path):
    (tmp_path / "one.md").write_text("# One\ntext", encoding="utf-8")
    (tmp_path / "data.csv").write_text("a,b", encoding="utf-8")
    result = load_documents([tmp_path / "one.md", tmp_path / "data.csv"])
    assert [d.id for d in result.documents] == ["one.md"]
    assert "unsupported" in result.skipped[0][1]


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigurationError, match="path not found"):
        load_documents(tmp_path / "nope")


def test_content_hash_tracks_text_title_and_metadata():
    base = Document("d", "text", "title", "s", {"a": 1})
    assert base.content_hash() == Document("d", "text", "title", "other-source", {"a": 1}).content_hash()
    assert base.content_hash() != Document("d", "text!", "title", "s", {"a": 1}).content_hash()
    assert base.content_hash() != Document("d", "text", "title", "s", {"a": 2}).content_hash()


def test_each_skip_is_reported_once_and_jsonl_lines_are_counted_apart(tmp_path, caplog):
    (tmp_path / "empty.md").write_text(" ", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"text": "ok"}\nnot json\n[1]\n', encoding="utf-8")
    told = []
    result = load_documents(tmp_path, on_skip=lambda where, reason: told.append(where))
    assert told == [where for where, _ in result.skipped] and len(told) == 3
    assert result.skipped_lines == 2 and "skipped" not in caplog.text   # told to the caller, not logged as well
    assert load_documents(tmp_path).skipped_lines == 2 and caplog.text.count("skipped") == 3


def test_line_ends_are_made_newlines_as_text_mode_reading_did(tmp_path):
    (tmp_path / "crlf.txt").write_bytes(b"one\r\ntwo\rthree\n")
    assert load_documents(tmp_path).documents[0].text == "one\ntwo\nthree"


def _folder_with_links_out(tmp_path: Path) -> Path:
    """A folder to index holding links out of it, beside a secret that is not in it."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "passwd.txt").write_text(SECRET, encoding="utf-8")
    (outside / "sub" / "more.md").write_text(SECRET, encoding="utf-8")
    d = tmp_path / "d"
    (d / "inner").mkdir(parents=True)
    (d / "real.txt").write_text("a real document", encoding="utf-8")
    (d / "alias.txt").symlink_to("real.txt")                         # a link that stays inside: read once
    (d / "leak.txt").symlink_to(outside / "passwd.txt")              # absolute, out
    (d / "inner" / "up.txt").symlink_to("../../outside/passwd.txt")  # relative, out by ..
    (d / "environ.txt").symlink_to("/proc/self/environ")             # the indexer's own environment
    (d / "linked").symlink_to(outside / "sub")                       # a folder out: never walked into
    return d


def test_links_out_of_the_folder_are_skipped_said_once_and_never_read(tmp_path):
    d = _folder_with_links_out(tmp_path)
    told = []
    result = load_documents(d, on_skip=lambda where, reason: told.append((where, reason)))
    assert sorted(doc.id for doc in result.documents) == ["real.txt"]  # the link to it is the same file
    assert all(SECRET not in doc.text and "PATH=" not in doc.text for doc in result.documents)
    skipped = dict(told)
    assert len(told) == len(skipped) == 4                            # each said once
    assert skipped[str(d / "alias.txt")] == f"the same file as {d / 'real.txt'}"
    for name, target in (("leak.txt", tmp_path / "outside" / "passwd.txt"),
                         ("inner/up.txt", tmp_path / "outside" / "passwd.txt"), ("environ.txt", None)):
        reason = skipped[str(d / name)]
        assert reason.startswith("outside the folder being indexed"), reason
        assert target is None or str(target.resolve()) in reason


def test_a_link_out_named_directly_is_skipped_and_a_link_inside_is_read(tmp_path):
    d = _folder_with_links_out(tmp_path)
    told = []
    result = load_documents([d / "leak.txt", d / "alias.txt", tmp_path / "outside" / "passwd.txt"],
                            on_skip=lambda where, reason: told.append((where, reason)))
    assert [doc.id for doc in result.documents] == ["alias.txt", "passwd.txt"]   # the file itself, named, is read
    assert [where for where, _ in told] == [str(d / "leak.txt")]
    assert told[0][1].startswith("outside the folder being indexed")


def test_the_cli_indexes_none_of_a_link_out_and_says_so(tmp_path, capsys):
    d = _folder_with_links_out(tmp_path)
    assert main(["index", "--embedder", "hashing", str(d), "--kb", str(tmp_path / "kb")]) == 0
    err = capsys.readouterr().err
    assert err.count("outside the folder being indexed") == 3
    assert main(["search", "the-secret-line", "--kb", str(tmp_path / "kb")]) in (0, 1)
    assert SECRET not in capsys.readouterr().out


def test_the_opened_descriptor_is_checked_not_only_the_path(tmp_path):
    # what a folder swapped for a link between the path check and the open would leave us holding
    d = _folder_with_links_out(tmp_path)
    fd = os.open(tmp_path / "outside" / "passwd.txt", os.O_PATH)
    try:
        with pytest.raises(Unreadable, match="outside the folder being indexed"):
            _checked(fd, str(d.resolve()), 1_000_000, opened_path=True)
    finally:
        os.close(fd)


def test_fifos_and_devices_are_skipped_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")                    # opening it to read would wait for a writer forever
    (tmp_path / "zero.txt").symlink_to("/dev/zero")     # outside, and a device
    (tmp_path / "ok.md").write_text("# Fine\nfine", encoding="utf-8")
    done = {}
    worker = threading.Thread(target=lambda: done.update(result=load_documents(tmp_path, on_skip=lambda *_: None)),
                              daemon=True)
    worker.start()
    worker.join(60)  # a hang is a failure here, not a stuck suite
    assert "result" in done, "load_documents blocked on a FIFO"
    reasons = dict(done["result"].skipped)
    assert reasons[str(tmp_path / "pipe.txt")] == "not a regular file (a FIFO): only regular files are read"
    assert reasons[str(tmp_path / "zero.txt")].startswith("outside the folder being indexed")
    assert [doc.id for doc in done["result"].documents] == ["ok.md"]


def test_a_sidecar_linked_out_of_the_folder_is_refused_with_its_image(tmp_path):
    (tmp_path / "outside.md").write_text(SECRET, encoding="utf-8")
    d = tmp_path / "d"
    d.mkdir()
    (d / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (d / "photo.png.md").symlink_to(tmp_path / "outside.md")
    (d / "ok.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (d / "ok.png.md").write_text("The dock map.", encoding="utf-8")
    result = load_documents(d, on_skip=lambda *_: None)
    assert [(doc.id, doc.text) for doc in result.documents] == [("ok.png", "The dock map.")]
    assert result.skipped == [(str(d / "photo.png"), "its description photo.png.md: outside the folder being "
                               f"indexed (it leads to {(tmp_path / 'outside.md').resolve()}): only files inside it "
                               f"are read; copy the file in to index it")]


def test_files_on_kernel_file_systems_are_never_read(tmp_path):
    # a real path inside the folder passes the link check: the file system is what refuses these
    with pytest.raises(Unreadable, match="on the proc file system"):
        read_inside("/proc/self/environ", "/")
    (tmp_path / "plain.txt").write_text("plain", encoding="utf-8")
    fd = os.open(tmp_path / "plain.txt", os.O_RDONLY)
    try:
        assert kernel_file_system(fd) is None
    finally:
        os.close(fd)
    assert read_inside(tmp_path / "plain.txt", str(tmp_path.resolve())) == b"plain"
    sys_file = next((p for p in ("/sys/kernel/mm/transparent_hugepage/enabled", "/sys/devices/system/cpu/online",
                                 "/sys/power/state") if os.path.isfile(p)), None)
    if sys_file is None:  # last, so that a masked /sys (some containers) skips only this part
        pytest.skip("no readable sysfs file here (/sys is masked)")
    with pytest.raises(Unreadable, match="on the sysfs file system"):
        read_inside(sys_file, "/")


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount needs root")
def test_a_bind_mount_of_proc_inside_the_folder_is_refused(tmp_path):
    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    target = tmp_path / "environ.txt"
    target.write_text("", encoding="utf-8")
    if subprocess.run(["mount", "--bind", f"/proc/{os.getpid()}/environ", str(target)], capture_output=True).returncode:
        pytest.skip("mount --bind is not allowed here")
    try:
        result = load_documents(tmp_path, on_skip=lambda *_: None)
    finally:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(target)], check=True)
    assert [doc.id for doc in result.documents] == ["ok.txt"]
    assert "on the proc file system" in dict(result.skipped)[str(target)]


def test_a_jsonl_line_nested_too_deep_is_one_skipped_line_not_a_traceback(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    deep = "[" * 100_000 + "]" * 100_000  # json.loads recurses once a level: a RecursionError
    (tmp_path / "docs" / "rows.jsonl").write_text(f'{deep}\n{{"id": "dock", "text": "The dock opens at six."}}\n')
    told = {}
    loaded = load_documents(tmp_path / "docs", on_skip=told.__setitem__)
    assert [d.id for d in loaded.documents] == ["dock"] and loaded.skipped_lines == 1
    assert told[f"{tmp_path / 'docs' / 'rows.jsonl'}:1"].startswith("bad line (RecursionError: ")
    assert main(["index", "--embedder", "hashing", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb")]) == 0
    out, err = capsys.readouterr()
    assert "indexed 1 document " in out and "skipped 0 files and 1 jsonl line;" in out
    assert err.count("bad line (RecursionError: ") == 1 and len(err.strip().splitlines()) <= 5  # with the embedder's
    assert "Traceback" not in err
