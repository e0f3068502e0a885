import errno
import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from agentic_rag import KnowledgeBase
from agentic_rag.cli import build_parser, main
from helpers import EXAMPLE_DATA, refused, run


def test_index_then_search_json(capsys, tmp_path):
    kb = str(tmp_path / "kb")
    code, out, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", kb)
    assert code == 0 and "indexed" in out and "skipped 0 files" in out and "reading" in err
    code, out, _ = run(capsys, "search", "登录报错的问题在 2.3.1 版本里修复了吗？", "--kb", kb, "--k", "5", "--json")
    hits = json.loads(out)
    assert code == 0 and len(hits) == 5
    assert set(hits[0]) >= {"id", "doc_id", "source", "title", "text", "score", "ranks"}
    assert "release-notes/nimbus-2.3.1.md" in [h["doc_id"] for h in hits]
    code, out, _ = run(capsys, "search", "合同 违约金", "--kb", kb, "--mode", "bm25")
    assert code == 0 and "contract" in out and "bm25 #1" in out


def test_reindex_is_incremental_and_delete_works(capsys, tmp_path):
    data, kb = tmp_path / "data", str(tmp_path / "kb")
    shutil.copytree(EXAMPLE_DATA / "contracts", data)
    run(capsys, "index", "--embedder", "hashing", str(data), "--kb", kb)
    (data / "contract-b.md").write_text("# Contract B\n\nRewritten: penalty 2% per week.", encoding="utf-8")
    code, out, _ = run(capsys, "index", "--embedder", "hashing", str(data), "--kb", kb)
    assert code == 0 and "(0 new, 1 replaced, 1 unchanged)" in out
    code, out, err = run(capsys, "delete", "contract-a.md", "missing.md", "--kb", kb)
    assert code == 1 and out == "deleted 1 document\n" and "'missing.md'" in err  # the known one is deleted
    code, out, _ = run(capsys, "search", "penalty", "--kb", kb, "--json")
    assert [h["doc_id"] for h in json.loads(out)] == ["contract-b.md"]


def test_errors_are_one_clear_line(capsys, tmp_path):
    code, _, err = run(capsys, "search", "x", "--kb", str(tmp_path / "none"))
    assert code == 1 and err.count("\n") == 1 and "no knowledge base" in err
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(tmp_path / "missing"), "--kb", str(tmp_path / "kb"))
    assert code == 1 and "path not found" in err.splitlines()[-1]
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(tmp_path / "empty"), "--kb", str(tmp_path / "kb"))
    assert code == 1 and "no documents found" in err
    assert not (tmp_path / "kb" / "manifest.json").exists()
    with pytest.raises(SystemExit) as stop:
        main(["search", "x", "--kb", "d", "--k", "zero"])
    assert stop.value.code == 2 and "'zero' is not a whole number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["search", "x", "--kb", "d", "--mode", "dense"])


def help_of(capsys, command: str) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare on one line


@pytest.mark.parametrize("command, shown", [
    ("search", ["hits to return (default 5)", "retrievers to use (default hybrid)"]),
    ("bench", ["linear, agentic or both (default both)", "default hashing; openai embeds"]),
    ("bench-rgb", ["share of negative passages (default 0.4)", "passages per question (default 5)"]),
])
def test_help_shows_every_default(capsys, command, shown):
    text = help_of(capsys, command)
    assert all(phrase in text for phrase in shown), text


def test_embedding_model_is_offered_only_where_an_embedder_is_chosen(capsys):
    for command in ("index", "bench", "doctor"):
        assert "--embedding-model" in help_of(capsys, command)
    for command in ("search", "ask", "delete", "bench-rgb"):  # the kb's manifest names its embedder
        assert "--embedding-model" not in help_of(capsys, command), command


@pytest.mark.parametrize("other, fix", [("--stream", "use one of them"), ("--trace", "drop --trace")])
def test_ask_json_with_stream_or_trace_is_refused_in_one_line(capsys, other, fix):
    with pytest.raises(SystemExit) as stop:
        main(["ask", "q", "--kb", "d", "--json", other])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"agentic-rag ask: error: --json with {other}: ") and fix in err, err


@pytest.mark.parametrize("target", ["file", "under_file", "devnull"])
def test_index_into_a_file_fails_at_once_in_one_line(capsys, tmp_path, monkeypatch, target):
    (tmp_path / "somefile").write_text("x")
    kb = {"file": tmp_path / "somefile", "under_file": tmp_path / "somefile" / "kb", "devnull": "/dev/null"}[target]

    def never(*args, **kwargs):
        raise AssertionError("documents were read before the --kb target was checked")

    monkeypatch.setattr("agentic_rag.cli._main.load_documents", never)
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", str(kb))
    assert code == 1 and err.count("\n") == 1 and "not a folder; give a new or existing folder" in err
    code, _, err = run(capsys, "delete", "contract-a.md", "--kb", str(kb))
    assert code == 1 and err.count("\n") == 1 and ("not a folder" in err or "not a knowledge base folder" in err)
    assert (tmp_path / "somefile").read_text() == "x"


def _damage(kb_dir, how):
    manifest = json.loads((kb_dir / "manifest.json").read_text())
    if how == "no_embedder":
        del manifest["embedder"]
    elif how == "files_empty":
        manifest["files"] = {}
    elif how == "nested_too_deep":  # read by the command line (for its embedder) before the load checks it
        (kb_dir / "manifest.json").write_text('{"embedder": ' + "[" * 100_000 + "]" * 100_000 + "}")
        return
    else:  # bm25.npz is not a zip, but the manifest's checksum was rewritten to match it
        data = b"PK\x03\x04 not really a zip"
        (kb_dir / manifest["generation"] / "bm25.npz").write_bytes(data)
        manifest["files"]["bm25.npz"] = hashlib.sha256(data).hexdigest()
    (kb_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("how", ["no_embedder", "files_empty", "bm25_not_a_zip", "nested_too_deep"])
def test_a_damaged_kb_is_one_line_for_search_ask_and_delete(capsys, tmp_path, how):
    kb = tmp_path / "kb"
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", str(kb))[0] == 0
    assert run(capsys, "compact", "--kb", str(kb))[0] == 0  # one full segment: the one damaged below
    _damage(kb, how)
    before = (kb / "manifest.json").read_text()
    for argv in (["search", "违约金"], ["ask", "合同A的违约金是多少？"], ["delete", "contract-a.md"],
                 ["index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies")]):
        code, out, err = run(capsys, *argv, "--kb", str(kb))
        assert code == 1 and out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith("agentic-rag: error: ") and "rebuild it into a new folder" in err, (argv, err)
    assert (kb / "manifest.json").read_text() == before


def test_settings_that_conflict_with_an_existing_kb_are_refused(capsys, tmp_path):
    kb = str(tmp_path / "kb")
    run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", kb)
    before = (tmp_path / "kb" / "manifest.json").read_text()
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA / "policies"), "--kb", kb, "--embedder", "e5")
    assert code == 1 and "built with embedder 'hashing'" in err
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(EXAMPLE_DATA / "policies"), "--kb", kb, "--chunk-size", "300")
    assert code == 1 and "drop --chunk-size" in err
    assert (tmp_path / "kb" / "manifest.json").read_text() == before


def test_an_interrupted_index_keeps_what_it_saved_and_nothing_else(capsys, tmp_path, monkeypatch):
    kb = str(tmp_path / "kb")
    run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", kb)
    before = (tmp_path / "kb" / "manifest.json").read_text()

    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:  # while reading: nothing saved yet
        patched.setattr("agentic_rag.cli._main.load_documents", explode)
        code, _, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", kb)
    assert code == 130 and err.endswith("agentic-rag: interrupted; what was saved stays (the documents are "
                                        "searchable once saved): run the same command again to embed the rest\n")
    assert (tmp_path / "kb" / "manifest.json").read_text() == before
    with monkeypatch.context() as patched:  # while embedding: the documents were saved searchable, without vectors
        patched.setattr("agentic_rag.kb.folder._knowledge_base.embed_batches", explode)
        code, _, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", kb)
    assert code == 130 and "searchable now" in err
    saved = KnowledgeBase.load(kb)
    assert saved.document_count == 4 and 0 < saved.pending_vectors < len(saved)
    code, out, err = run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", kb)
    assert code == 0 and "0 new, 0 replaced, 2 unchanged" in out and KnowledgeBase.load(kb).pending_vectors == 0


def test_console_script_runs(tmp_path):
    script = shutil.which("agentic-rag") or str((sys.executable.rsplit("/", 1)[0]) + "/agentic-rag")
    done = subprocess.run([script, "index", "--embedder", "hashing",
                                   str(EXAMPLE_DATA / "warehouse"), "--kb", str(tmp_path / "kb")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([script, "search", "截单时间", "--kb", str(tmp_path / "kb"), "--json", "--k", "1"],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)[0]["doc_id"] == "shipping-rules.md"


def test_index_names_each_skip_once_and_counts_jsonl_lines_apart(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.md").write_text("# Good\n\nkept", encoding="utf-8")
    (data / "empty.md").write_text(" ", encoding="utf-8")
    (data / "rows.jsonl").write_text('{"text": "ok"}\nnot json\n[1]\n', encoding="utf-8")
    script = shutil.which("agentic-rag") or str((sys.executable.rsplit("/", 1)[0]) + "/agentic-rag")
    done = subprocess.run([script, "index", "--embedder", "hashing",
                                   str(data), "--kb", str(tmp_path / "kb")],  # a process of its own:
                          capture_output=True, text=True, timeout=120)              # logging as a user sees it
    assert done.returncode == 0, done.stderr
    for where in (data / "empty.md", f"{data / 'rows.jsonl'}:2", f"{data / 'rows.jsonl'}:3"):
        assert done.stderr.count(f"{where}:") == 1, done.stderr
    assert "indexed 2 documents" in done.stdout and "skipped 1 file and 2 jsonl lines;" in done.stdout


def test_filtered_ask_after_three_small_adds(capsys, tmp_path):
    kb = str(tmp_path / "kb")
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", kb)[0] == 0
    for i in range(3):  # three saves, each after the retrievers grew their arrays past the rows in use
        folder = tmp_path / f"add{i}"
        folder.mkdir()
        (folder / "note.jsonl").write_text(json.dumps({"id": f"note-{i}", "text": f"一条备注 {i}"}) + "\n",
                                           encoding="utf-8")
        assert run(capsys, "index", "--embedder", "hashing", str(folder), "--kb", kb)[0] == 0
    code, out, err = run(capsys, "ask", "合同A和合同B的违约责任有什么区别？", "--kb", kb, "--json")
    assert code == 0, err
    assert {c["doc_id"] for c in json.loads(out)["citations"]} >= {"contracts/contract-a.md", "contracts/contract-b.md"}


def test_ask_json_has_every_documented_field(capsys, example_kb_dir):
    capsys.readouterr()
    code, out, _ = run(capsys, "ask", "登录报错的问题在 2.3.1 版本里修复了吗？", "--kb", example_kb_dir, "--json")
    result = json.loads(out)
    assert code == 0
    assert set(result) >= {"question", "answer", "abstained", "citations", "stop_reason", "rounds", "trace",
                           "usage", "timings_ms"}
    assert set(result["usage"]) >= {"model_calls", "prompt_tokens", "completion_tokens", "cost_usd"}
    assert set(result["citations"][0]) >= {"id", "source", "text"}
    assert result["stop_reason"] == "sufficient" and result["model"] == "offline"


def test_ask_json_needs_no_serve_extra(example_kb_dir):
    """`ask --json` prints the service's reply shape, without the server (waitress, the serve extra)."""
    blocked = "import sys; sys.modules['waitress'] = None; from agentic_rag.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", blocked, "ask", "登录报错的问题在 2.3.1 版本里修复了吗？",
                           "--kb", str(example_kb_dir), "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "sufficient"


def test_ask_text_output_and_abstention_exit_zero(capsys, example_kb_dir):
    code, out, _ = run(capsys, "ask", "Does Nimbus have an Android app?", "--kb", example_kb_dir, "--trace")
    assert code == 0 and out.startswith("The knowledge base does not hold")
    assert "Trace: route:vector -> mentions:-1 -> abstain" in out and "Stop: unmentioned" in out
    assert "offline extractive" in out and "never mention Android" in out
    assert "  round 1 route:vector:" in out                     # --trace lists every event


def test_ask_with_tools_rounds_and_budget(capsys, example_kb_dir):
    db = str(EXAMPLE_DATA / "db" / "shop.sqlite")
    code, out, _ = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", example_kb_dir, "--db", db, "--json")
    assert code == 0 and json.loads(out)["citations"][0]["kind"] == "database"
    code, out, _ = run(capsys, "ask", "Does Nimbus have an Android app?", "--kb", example_kb_dir, "--json",
                       "--max-rounds", "1")
    assert json.loads(out)["rounds"] == 1
    code, out, _ = run(capsys, "ask", "合同A和合同B的违约责任有什么区别？", "--kb", example_kb_dir, "--json",
                       "--budget", "600")
    assert json.loads(out)["stop_reason"] == "token_budget"


def test_ask_errors_are_one_line(capsys, example_kb_dir, monkeypatch):
    code, _, err = run(capsys, "ask", " ", "--kb", example_kb_dir)
    assert code == 1 and err == "agentic-rag: error: the question is empty; ask something\n"
    monkeypatch.setenv("AGENTIC_RAG_MODEL", "gpt-4o-mini")             # named: the client is used, never offline
    monkeypatch.setenv("AGENTIC_RAG_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    code, out, err = run(capsys, "ask", "What is the Team plan price per member?", "--kb", example_kb_dir)
    assert code == 1 and err.count("\n") == 1 and "gpt-4o-mini could not reach http://127.0.0.1:9/v1" in err
    code, _, err = run(capsys, "ask", "hi", "--kb", example_kb_dir, "--model", "offline")
    assert code == 0
    err = refused(capsys, "ask", "hi", "--kb", example_kb_dir, "--model-for", "grade")
    assert "argument --model-for: 'grade': write TASK=MODEL" in err, err


@pytest.mark.parametrize("content", [b"", b"orders,stock\nA1001,3\n"])
def test_ask_refuses_an_empty_or_non_database_db_before_anything_else(capsys, example_kb_dir, tmp_path, content):
    db = tmp_path / "shop.db"
    db.write_bytes(content)
    code, out, err = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", example_kb_dir, "--db", str(db))
    assert code == 1 and out == "" and err.count("\n") == 1 and f"--db: database {db}" in err, err
    code, _, err = run(capsys, "ask", "DK-200 还有库存吗？", "--kb", str(tmp_path / "no-kb"), "--db", str(db))
    assert code == 1 and f"--db: database {db}" in err, err     # checked at start, before the knowledge base


def test_ask_shipping_question_with_a_fixed_clock(capsys, example_kb_dir):
    code, out, _ = run(capsys, "ask", "如果我今天下单，按仓库的发货规则最早什么时候能发出？", "--kb", example_kb_dir,
                       "--now", "2026-09-30T16:00")
    assert code == 0 and "2026-10-08" in out and "(tool) tool earliest_ship_date" in out
    err = refused(capsys, "ask", "hi", "--kb", example_kb_dir, "--now", "next tuesday")
    assert "argument --now: 'next tuesday': write YYYY-MM-DDTHH:MM" in err, err


# What the docs say about the command line, checked against it.
ROOT = EXAMPLE_DATA.parents[1]


def test_ask_at_max_rounds_answers_from_the_floor_the_loop_page_names(capsys, example_kb_dir, monkeypatch):
    from agentic_rag import Config, ScriptedModel

    row = next(line for line in (ROOT / "docs" / "concepts" / "loop.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `max_rounds` |"))
    floor = getattr(Config(), row.split("grade ≥ `")[1].split("`")[0])
    for grade, abstains in ((floor, False), (round(floor - 0.01, 2), True)):
        model = ScriptedModel(default={
            "route": {"route": "vector"}, "grade": {"score": grade, "sufficient": False, "missing": ["the hour"]},
            "generate": {"answer": "截单时间：工作日 15:00（北京时间）之前确认付款的订单，当天发货。 [1]"},
            "judge": {"score": 1.0, "complete": True}})
        monkeypatch.setattr("agentic_rag.cli._main.make_model", lambda settings, model=model: model)
        code, out, err = run(capsys, "ask", "仓库的截单时间是几点？", "--kb", example_kb_dir,
                             "--max-rounds", "1", "--json")
        result = json.loads(out)
        assert code == 0 and result["stop_reason"] == "max_rounds", err
        assert result["abstained"] is abstains, (grade, result["answer"])


def test_index_and_search_with_e5(capsys, tmp_path):
    kb = str(tmp_path / "kb")
    code, out, _ = run(capsys, "index", str(EXAMPLE_DATA / "warehouse"), "--kb", kb, "--embedder", "e5")
    assert code == 0 and "indexed" in out
    code, out, _ = run(capsys, "search", "which days are goods not dispatched during the spring festival",
                       "--kb", kb, "--mode", "vector", "--json")
    assert code == 0 and json.loads(out)[0]["doc_id"] == "holidays-2026.md"
    assert build_parser().parse_args(["bench", "--data", "d", "--embedder", "e5"]).embedder == "e5"


# -- a full disk, a read-only folder, a file size limit: one line, exit 1, the knowledge base as it was ---


CLI = "from agentic_rag.cli import main; sys.exit(main(sys.argv[1:]))"


def _cli(*argv, limited=None) -> subprocess.CompletedProcess:
    """The command in a process of its own (a traceback would show on its stderr), run by
    `limited` (file_size_limited with its limit bound) if given."""
    command = limited(CLI, *argv) if limited else [sys.executable, "-m", "agentic_rag.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _one_line_error(done, *expected: str) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]  # after the progress lines
    assert last.startswith("agentic-rag: error: cannot write knowledge base ") and all(e in last for e in expected)
    assert "Traceback" not in done.stdout and "During handling" not in done.stderr


def _state(kb_dir) -> tuple:
    return sorted(p.name for p in kb_dir.iterdir()), (kb_dir / "manifest.json").read_text()


def test_index_compact_and_delete_on_a_full_disk_are_one_line_each(small_disk):
    kb_dir = small_disk.path / "kb"
    assert _cli("index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", str(kb_dir)).returncode == 0
    assert _cli("index", "--embedder", "hashing",
                str(EXAMPLE_DATA / "contracts"), "--kb", str(kb_dir)).returncode == 0  # a delta
    before = _state(kb_dir)
    small_disk.fill(0)
    try:
        for argv in (["index", "--embedder", "hashing",
                      str(EXAMPLE_DATA / "warehouse")], ["compact"], ["delete", "contract-a.md"]):
            done = _cli(*argv, "--kb", str(kb_dir))
            _one_line_error(done, f"{kb_dir}: no space left on device (ENOSPC); free space on its disk or "
                                  f"choose another --kb")
            assert _state(kb_dir) == before
    finally:
        small_disk.empty()
    assert _cli("search", "违约金", "--kb", str(kb_dir)).returncode == 0
    assert _cli("compact", "--kb", str(kb_dir)).returncode == 0


def test_index_into_a_read_only_folder_is_one_line(small_disk):
    kb_dir = small_disk.path / "kb"
    assert _cli("index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", str(kb_dir)).returncode == 0
    before = _state(kb_dir)
    small_disk.read_only()
    try:
        for argv in (["index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", str(kb_dir)],
                     ["index", "--embedder", "hashing",
                      str(EXAMPLE_DATA / "contracts"), "--kb", str(small_disk.path / "new")],
                     ["delete", "x.md", "--kb", str(kb_dir)], ["compact", "--kb", str(kb_dir)]):
            _one_line_error(_cli(*argv), "read-only file system (EROFS); its file system is mounted read-only")
        assert _state(kb_dir) == before and _cli("search", "refund", "--kb", str(kb_dir)).returncode == 0
    finally:
        small_disk.read_only(False)


def test_a_file_size_limit_is_one_line_and_leaves_no_partial_segment(tmp_path, file_size_limited):
    kb_dir = tmp_path / "kb"
    assert _cli("index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", str(kb_dir)).returncode == 0
    before = _state(kb_dir)
    done = _cli("index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", str(kb_dir),
                limited=lambda *a: file_size_limited(4096, *a))  # new files pass 4 KB
    _one_line_error(done, "file too large (EFBIG); a file size limit stops it (ulimit -f)")
    assert _state(kb_dir) == before
    assert _cli("index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", str(kb_dir)).returncode == 0


@pytest.mark.parametrize("flag", ["--idle-timeout", "--header-timeout", "--body-timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "0"])
def test_serve_timeouts_must_be_finite_seconds(capsys, tmp_path, flag, value):
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--kb", str(tmp_path / "kb"), f"{flag}={value}"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{flag}: {value} must be a finite number of seconds above 0" in err


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:  # bound and closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("make_error, expected", [
    (lambda p: open(p / "missing" / "x.txt"), "no such file or directory (ENOENT) ({}/missing/x.txt); check the path"),
    (lambda p: __import__("socket").create_connection(("127.0.0.1", _closed_port())),
     "connection refused (ECONNREFUSED); start the server it names or fix the address, then retry"),
    (lambda p: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error", str(p / "f"))),
     "input/output error (EIO) ({}/f)\n"),
])
def test_an_os_error_says_the_fix_its_errno_names_or_only_what_failed(capsys, tmp_path, monkeypatch,
                                                                       make_error, expected):
    def fail(args):
        make_error(tmp_path)

    monkeypatch.setattr("agentic_rag.cli._main.cmd_compact", fail)  # a command meeting a real OS failure
    assert main(["compact", "--kb", str(tmp_path / "kb")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agentic-rag: error: ") and err.count("\n") == 1
    assert expected.format(tmp_path) in err
    assert "free space or fix the folder's permissions" not in err
