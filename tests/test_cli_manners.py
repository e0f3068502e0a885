"""What a new user of the command line meets: --version, -k, a typo named with the option meant,
a --kb that names a file, a delete of an id that is not there, Ctrl-C on a line of its own,
--filters, and the run's settings taken from the flags rather than from the knowledge base."""
import ast
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

import agentic_rag
from agentic_rag import KnowledgeBase, RunConfig
from helpers import EXAMPLE_DATA, ROOT, refused, run

QUESTION = "登录报错的问题在 2.3.1 版本里修复了吗？"


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and done.stdout == f"agentic-rag {agentic_rag.__version__}\n", done


def test_search_takes_k_as_a_short_flag(capsys, example_kb_dir):
    code, out, _ = run(capsys, "search", QUESTION, "--kb", example_kb_dir, "-k", "2", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    assert run(capsys, "search", QUESTION, "--kb", example_kb_dir, "--k", "2", "--json")[1] == out


def test_a_mistyped_command_or_option_names_the_one_meant(capsys):
    err = refused(capsys, "serch", "x", "--kb", "d")
    assert err.startswith("agentic-rag: error: 'serch' is not a command; did you mean 'search'?"), err
    err = refused(capsys, "ask", "q", "--kb", "d", "--bugdet", "100")
    assert "ask has no option --bugdet; did you mean --budget?" in err, err
    err = refused(capsys, "index", "docs", "--kb", "d", "--chunk-sise=300")   # the =VALUE form too
    assert "did you mean --chunk-size?" in err, err
    err = refused(capsys, "--kb", "d", "search", "x")
    assert "--kb comes after the command" in err, err
    err = refused(capsys, "search", "x", "--kb", "d", "--mode", "hybird")  # a flag's value too
    assert "invalid choice: 'hybird'; did you mean 'hybrid'? (choose from hybrid, bm25, vector)" in err, err


def test_ask_mode_says_what_it_means_not_ambiguous_option(capsys):
    err = refused(capsys, "ask", "q", "--kb", "d", "--mode", "bm25")
    assert "ambiguous" not in err and "ask has no option --mode" in err, err
    assert "search --mode: retrievers to use" in err and "did you mean" not in err, err  # not --model: that runs


def test_an_abbreviated_option_is_refused_not_guessed(capsys):
    err = refused(capsys, "ask", "q", "--kb", "d", "--max-r", "2")
    assert "ask has no option --max-r; did you mean --max-rounds?" in err, err
    refused(capsys, "search", "q", "--kb", "d", "--mod", "bm25")  # argparse once read it as --mode


def _suggested(err: str) -> list[list[str]]:
    """The commands an error suggests, as argv lists (after `agentic-rag`)."""
    return [shlex.split(command) for command in re.findall(r"agentic-rag (index .+)$", err.strip())]


def test_kb_naming_a_file_of_a_knowledge_base_suggests_its_folder(capsys, example_kb_dir):
    manifest = os.path.join(example_kb_dir, "manifest.json")
    code, out, err = run(capsys, "search", "违约金", "--kb", manifest)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    fix = re.search(r"give the folder: --kb (\S+)$", err.strip()).group(1)
    assert run(capsys, "search", "违约金", "--kb", fix)[0] == 0  # the fix works


def test_kb_naming_a_document_suggests_indexing_it_and_the_command_works(capsys, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe boiler is serviced every March.", encoding="utf-8")
    (tmp_path / "note-kb").mkdir()  # taken: the fix names a folder nothing holds
    code, _, err = run(capsys, "search", "boiler", "--kb", str(note))
    assert code == 1 and err.count("\n") == 1 and "is a file, not a knowledge base folder" in err, err
    [command] = _suggested(err)
    assert command == ["index", str(note), "--kb", str(tmp_path / "note-kb-2")], err
    assert run(capsys, *command)[0] == 0
    code, out, _ = run(capsys, "search", "boiler", "--kb", command[-1], "--json")
    assert code == 0 and json.loads(out)[0]["doc_id"] == "note.md"


def test_index_into_a_file_suggests_a_new_folder_that_works(capsys, tmp_path):
    (tmp_path / "kbfile").write_text("x")
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(EXAMPLE_DATA / "contracts"), "--kb", str(tmp_path / "kbfile"))
    assert code == 1 and "not a folder; give a new or existing folder" in err, err
    fix = re.search(r"e\.g\. --kb (\S+)$", err.strip()).group(1)
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", fix)[0] == 0
    assert (tmp_path / "kbfile").read_text() == "x"


def _folder(kb_dir) -> dict:
    return {p: os.path.getmtime(os.path.join(kb_dir, p)) for p in sorted(os.listdir(kb_dir))} | \
        {"manifest": open(os.path.join(kb_dir, "manifest.json")).read()}


def test_delete_of_an_unknown_id_names_it_exits_1_and_saves_nothing(capsys, tmp_path):
    kb_dir = str(tmp_path / "kb")
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", kb_dir)[0] == 0
    before = _folder(kb_dir)
    code, out, err = run(capsys, "delete", "contract-z.md", "--kb", kb_dir)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "not in the knowledge base, so not deleted: 'contract-z.md'" in err, err
    assert _folder(kb_dir) == before  # no new generation, no save


def test_delete_of_known_and_unknown_ids_deletes_the_known_and_names_the_rest(capsys, tmp_path):
    kb_dir = str(tmp_path / "kb")
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", kb_dir)[0] == 0
    code, out, err = run(capsys, "delete", "contract-a.md", "nope.md", "contract-a.md", "--kb", kb_dir)
    assert code == 1 and out == "deleted 1 document\n" and "'nope.md'" in err and "contract-a" not in err, err
    code, out, _ = run(capsys, "search", "违约", "--kb", kb_dir, "--json")
    assert {h["doc_id"] for h in json.loads(out)} == {"contract-b.md"}


def _many_notes(folder, count=1500):
    folder.mkdir()
    (folder / "notes.jsonl").write_text("".join(json.dumps({"id": f"n{i}", "text": f"note number {i}"}) + "\n"
                                                for i in range(count)), encoding="utf-8")


def test_ctrl_c_during_the_progress_line_starts_its_message_on_a_new_line(capsys, tmp_path, monkeypatch):
    _many_notes(tmp_path / "notes")  # more chunks than one batch: the progress line is drawn
    from agentic_rag.kb.embedders._embedders import HashingEmbedder

    calls, embed = [], HashingEmbedder.embed

    def interrupted_on_the_second_batch(self, texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return embed(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed", interrupted_on_the_second_batch)
    code, _, err = run(capsys, "index", "--embedder", "hashing", str(tmp_path / "notes"), "--kb", str(tmp_path / "kb"))
    assert code == 130
    # not a terminal: a whole line a saved batch, no "\r" redraws; the message on a line of its own
    assert re.search(r"embedded and saved 512/1500 chunks, [^\n]* left\nagentic-rag: interrupted; ", err), repr(err)
    assert "\r" not in err, repr(err)


def test_ctrl_c_after_whole_lines_adds_no_blank_line(capsys, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("agentic_rag.cli._main.load_documents", interrupted)
    code, _, err = run(capsys, "index", "--embedder", "hashing",
                               str(EXAMPLE_DATA / "contracts"), "--kb", str(tmp_path / "kb"))
    assert code == 130 and err.endswith(" ...\nagentic-rag: interrupted; what was saved stays (the documents are "
                                        "searchable once saved): run the same command again to embed the rest\n")


def test_ctrl_c_during_a_streamed_draft_ends_its_line_first(capsys, example_kb_dir, monkeypatch):
    def draft_then_interrupt(question, kb, model, tools, config, on_token=None):
        on_token("The draft so")
        raise KeyboardInterrupt

    monkeypatch.setattr("agentic_rag.cli._main.run_agentic_rag", draft_then_interrupt)
    code, out, err = run(capsys, "ask", QUESTION, "--kb", example_kb_dir, "--stream")
    assert code == 130 and out == "The draft so\n" and err.startswith("agentic-rag: interrupted"), (out, err)


SLOW_EMBEDDER = """import sys, time
from agentic_rag.kb.embedders._embedders import HashingEmbedder
embed = HashingEmbedder.embed
HashingEmbedder.embed = lambda self, texts: (time.sleep(0.5), embed(self, texts))[1]  # time to press Ctrl-C
from agentic_rag.cli import main
sys.exit(main(sys.argv[1:]))"""


def test_a_real_sigint_during_index_ends_the_progress_line(tmp_path):
    _many_notes(tmp_path / "notes", 6000)
    process = subprocess.Popen([sys.executable, "-c", SLOW_EMBEDDER, "index", "--embedder", "hashing",
                                                                     str(tmp_path / "notes"), "--kb",
                                str(tmp_path / "kb")], stderr=subprocess.PIPE, cwd=ROOT)
    seen, deadline = b"", time.monotonic() + 60
    while b"chunks/s" not in seen and time.monotonic() < deadline:
        seen += os.read(process.stderr.fileno(), 4096)
    process.send_signal(signal.SIGINT)
    seen += process.stderr.read()
    assert process.wait(60) == 130
    assert re.search(rb"left\nagentic-rag: interrupted; what was saved stays [^\n]*\n$", seen), seen
    assert b"\r" not in seen, seen  # a pipe gets whole lines
    assert KnowledgeBase.load(tmp_path / "kb").pending_vectors > 0  # saved searchable, its vectors not all in


def test_search_filters_keep_to_matching_documents(capsys, example_kb_dir):
    code, out, _ = run(capsys, "search", QUESTION, "--kb", example_kb_dir, "--json")
    assert any(not h["doc_id"].startswith("NT-") for h in json.loads(out))  # unfiltered: not only tickets
    code, out, _ = run(capsys, "search", QUESTION, "--kb", example_kb_dir, "--json", "--filters", '{"type": "ticket"}')
    hits = json.loads(out)
    assert code == 0 and hits and all(h["doc_id"].startswith("NT-") for h in hits), hits
    every = {"type": "ticket", "date": {"gte": "2026-03-20"}, "doc_id": ["NT-1080", "NT-1042"]}
    code, out, _ = run(capsys, "search", QUESTION, "--kb", example_kb_dir, "--json", "--filters", json.dumps(every))
    assert code == 0 and [h["doc_id"] for h in json.loads(out)] == ["NT-1080"], out


def test_ask_filters_restrict_every_search_of_the_run(capsys, example_kb_dir):
    code, out, _ = run(capsys, "ask", QUESTION, "--kb", example_kb_dir, "--json")
    assert any(c["doc_id"].startswith("release-notes/") for c in json.loads(out)["citations"])
    code, out, err = run(capsys, "ask", QUESTION, "--kb", example_kb_dir, "--json", "--filters", '{"type": "ticket"}')
    result = json.loads(out)
    assert code == 0 and result["citations"], err
    assert all(c["doc_id"].startswith("NT-") for c in result["citations"]), result["citations"]
    searched = [d for e in result["trace"] if e["step"] == "search" for d in e["summary"].split(":", 1)[1].split(",")]
    assert searched and all(d.startswith("NT-") for d in searched), searched


@pytest.mark.parametrize("given, named", [
    ("{type: ticket}", "is not JSON"),
    ('["ticket"]', "give a JSON object, not a list"),
    ('{"date": {"after": "2026-01-01"}}', "unknown range operators ['after']; use gt, gte, lt, lte"),
    ('{"type": {"gte": [1]}}', "it must be one text, number or true/false"),
])
def test_bad_filters_are_one_line_naming_the_problem(capsys, given, named):
    for command in (["search", "q"], ["ask", "q"]):
        err = refused(capsys, *command, "--kb", "d", "--filters", given)
        assert err.startswith(f"agentic-rag {command[0]}: error: argument --filters: ") and named in err, err


def test_ask_runs_with_its_own_settings_not_the_knowledge_bases(capsys, tmp_path, monkeypatch):
    kb_dir = str(tmp_path / "kb")
    assert run(capsys, "index", "--embedder", "hashing",
                       str(EXAMPLE_DATA / "contracts"), "--kb", kb_dir, "--chunk-size", "300")[0] == 0
    from agentic_rag.cli import _main as cli

    given, real = [], cli.run_agentic_rag

    def recording(question, kb, model, tools, config, on_token=None):  # the real loop, its settings noted
        given.append(config)
        return real(question, kb, model, tools, config, on_token=on_token)

    monkeypatch.setattr(cli, "run_agentic_rag", recording)
    assert run(capsys, "ask", "合同A的违约金是多少？", "--kb", kb_dir, "--max-rounds", "2")[0] == 0
    assert run(capsys, "ask", "合同A的违约金是多少？", "--kb", kb_dir)[0] == 0
    # the run layer is the flags over the defaults; the index layer is the knowledge base's (a saved state
    # describes the knowledge base it ran on)
    assert [c.run for c in given] == [RunConfig(max_rounds=2), RunConfig()]
    assert [c.index.chunk_size for c in given] == [300, 300]


def _reads_the_environment(source: str) -> bool:
    """Whether code (not a docstring) reads os.environ or calls os.getenv."""
    return any(isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
               and isinstance(node.value, ast.Name) and node.value.id == "os"
               or isinstance(node, ast.ImportFrom) and node.module == "os"
               for node in ast.walk(ast.parse(source)))


def test_only_the_settings_module_reads_the_environment():
    package = ROOT / "agentic_rag"
    readers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if _reads_the_environment(p.read_text(encoding="utf-8")))
    assert readers == ["cli/_settings.py"], readers


def test_serve_refuses_a_metrics_folder_that_is_not_one(capsys, example_kb_dir, tmp_path, monkeypatch):
    pytest.importorskip("waitress")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "missing"))
    code, _, err = run(capsys, "serve", "--kb", example_kb_dir, "--port", "0")
    assert code == 1 and f"PROMETHEUS_MULTIPROC_DIR={tmp_path / 'missing'} is not a folder" in err, err


def test_the_modules_docstring_names_every_command():
    from agentic_rag.cli import _main as cli

    commands = re.search(r"\{([\w,-]+)\}", cli.build_parser().format_usage()).group(1).split(",")
    assert all(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", cli.__doc__) for name in commands), cli.__doc__
