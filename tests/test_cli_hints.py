"""What the command line says when a user gets something wrong, and that following it works: a --kb
inside the folder indexed, ports and hosts, searches that find nothing, typos, chunk ids given to
delete, values out of range, Ctrl-C, and progress written to a file."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from agentic_rag import ConfigurationError, open_kb
from agentic_rag.cli import build_parser
from helpers import EXAMPLE_DATA, ROOT, refused, run


def _suggested(err: str) -> list[str]:
    """The `agentic-rag index ...` command an error suggests, as argv (after `agentic-rag`)."""
    return shlex.split(re.search(r"agentic-rag (index .+)$", err.strip()).group(1))


def _doc_ids(capsys, kb: str) -> set[str]:
    code, out, _ = run(capsys, "search", "contract penalty 违约金", "--kb", kb, "--json", "-k", "50")
    assert code == 0
    return {hit["doc_id"] for hit in json.loads(out)}


def test_index_leaves_out_a_knowledge_base_kept_in_the_folder_indexed(capsys, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(EXAMPLE_DATA / "contracts", data)
    assert run(capsys, "index", "--embedder", "hashing", str(data), "--kb", str(data))[0] == 0
    (data / "contract-c.md").write_text("# Contract C\n\nPenalty: 3% per week.", encoding="utf-8")
    code, out, _ = run(capsys, "index", "--embedder", "hashing",
                               str(data), "--kb", str(data))  # gen-000001 is there now
    assert code == 0 and "indexed 3 documents (1 new, 0 replaced, 2 unchanged)" in out, out
    code, out, _ = run(capsys, "index", "--embedder", "hashing",
                               str(tmp_path), "--kb", str(data))  # from the folder above, too
    assert code == 0 and "indexed 3 documents (3 new," in out, out  # the same three, under data/
    assert _doc_ids(capsys, str(data)) == {"contract-a.md", "contract-b.md", "contract-c.md",
                                           "data/contract-a.md", "data/contract-b.md", "data/contract-c.md"}


def test_a_folder_named_like_a_segment_that_no_manifest_lists_is_indexed(capsys, tmp_path):
    data = tmp_path / "data"
    (data / "gen-000001").mkdir(parents=True)
    (data / "manifest.json").write_text('{"name": "a web app manifest"}', encoding="utf-8")
    (data / "gen-000001" / "notes.md").write_text("# Notes\n\nThe contract penalty is 2%.", encoding="utf-8")
    code, out, _ = run(capsys, "index", "--embedder", "hashing", str(data), "--kb", str(tmp_path / "kb"))
    assert code == 0 and "indexed 1 document " in out, out


def test_kb_naming_a_folder_of_documents_suggests_another_folder_that_works(capsys, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(EXAMPLE_DATA / "contracts", data)
    code, out, err = run(capsys, "ask", "违约金", "--kb", str(data))
    assert code == 1 and out == "" and err.count("\n") == 1 and "is a folder of documents" in err, err
    command = _suggested(err)
    assert command == ["index", str(data), "--kb", str(tmp_path / "data-kb")], err  # not --kb data itself
    assert run(capsys, *command)[0] == 0
    assert _doc_ids(capsys, command[-1]) == {"contract-a.md", "contract-b.md"}
    assert not (data / "manifest.json").exists()


def test_kb_naming_a_segment_folder_names_the_knowledge_base(capsys, example_kb_dir):
    segment = sorted(p for p in os.listdir(example_kb_dir) if p.startswith("gen-"))[0]
    code, _, err = run(capsys, "search", "违约金", "--kb", os.path.join(example_kb_dir, segment))
    assert code == 1 and err.count("\n") == 1, err
    fix = re.search(r"or the knowledge base's folder: --kb (\S+)$", err.strip()).group(1)
    assert fix == example_kb_dir and run(capsys, "search", "违约金", "--kb", fix)[0] == 0


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_serve_refuses_a_port_out_of_range_at_parse_time(capsys, port):
    err = refused(capsys, "serve", "--kb", "d", "--port", port)
    assert f"argument --port: {port} is not a port; give 0 to 65535" in err, err


@pytest.mark.parametrize("host", ["999.1.1.1", "example.invalid"])
def test_serve_names_a_host_it_cannot_listen_on(capsys, example_kb_dir, host):
    pytest.importorskip("waitress")
    code, out, err = run(capsys, "serve", "--kb", example_kb_dir, "--host", host, "--port", "0")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"agentic-rag: error: --host {host}: not an address") and "127.0.0.1" in err, err


def test_serve_without_its_extra_names_the_extra_not_its_own_flags(example_kb_dir):
    code = ("import sys; sys.modules['waitress'] = None  # as where the serve extra is not installed\n"
            "from agentic_rag.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "serve", "--kb", example_kb_dir, "--header-timeout", "5",
                           "--reading-share", "0.4"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1 and "needs the serve extra: pip install 'agentic-rag[serve]'" in done.stderr, done


def test_the_guard_flags_defaults_are_the_servers():
    pytest.importorskip("waitress")
    from dataclasses import asdict

    from agentic_rag.cli._flags import SERVER_DEFAULTS
    from agentic_rag.service._server import ServerLimits

    assert vars(SERVER_DEFAULTS) == asdict(ServerLimits())


def test_a_search_that_finds_nothing_says_so_on_stderr(capsys, example_kb_dir):
    code, out, err = run(capsys, "search", "违约金", "--kb", example_kb_dir, "--json", "--filters", '{"typ": "x"}')
    assert code == 0 and out == "[]\n" and err == 'no hits: no chunk matches --filters {"typ": "x"}\n', err
    code, out, err = run(capsys, "search", "zzqqxx", "--kb", example_kb_dir, "--mode", "bm25")
    assert code == 0 and out == "" and err == "no hits: no chunk matches the query\n", err


def test_an_option_of_another_command_gets_no_look_alike(capsys):
    err = refused(capsys, "ask", "q", "--kb", "d", "--mode", "vector")
    assert "search --mode: retrievers to use" in err and "did you mean" not in err, err
    err = refused(capsys, "ask", "q", "--kb", "d", "--k", "3")
    assert "ask has no option --k (search --k: hits to return)" in err and "did you mean" not in err, err


def test_help_and_version_are_never_the_option_meant(capsys):
    err = refused(capsys, "search", "q", "--kb", "d", "--halp", "1")
    assert "--help" not in err.split("(see")[0], err
    for typo in ("--hepl", "--verison"):  # help or version was meant: no other option is offered instead
        err = refused(capsys, "ask", "q", "--kb", "d", typo)
        assert f"ask has no option {typo} (see" in err and "did you mean" not in err, err


def test_a_weak_second_look_alike_is_not_named(capsys):
    err = refused(capsys, "ask", "q", "--kb", "d", "--jsno")
    assert "did you mean --json?" in err, err


def test_a_near_tie_names_both_the_one_as_long_first(capsys):
    err = refused(capsys, "search", "--kd", "x")
    assert "search has no option --kd; did you mean --kb or --k?" in err, err


def test_a_short_option_is_checked_too(capsys):
    err = refused(capsys, "ask", "q", "--kb", "x", "-k", "3")
    assert "ask has no option -k (search -k: hits to return)" in err, err
    err = refused(capsys, "-k", "3", "search", "q")
    assert "-k comes after the command" in err, err


def test_a_mistyped_command_reads_as_a_sentence(capsys):
    err = refused(capsys, "serch", "x")
    assert "did you mean 'search'? The commands: index, fill, search," in err and "?;" not in err, err


def test_delete_of_a_chunk_id_names_its_document(capsys, tmp_path):
    kb = str(tmp_path / "kb")
    assert run(capsys, "index", "--embedder", "hashing", str(EXAMPLE_DATA / "contracts"), "--kb", kb)[0] == 0
    chunk_id = json.loads(run(capsys, "search", "违约金", "--kb", kb, "--json")[1])[0]["id"]
    code, out, err = run(capsys, "delete", chunk_id, "--kb", kb)
    doc_id = chunk_id.rpartition("#")[0]
    assert code == 1 and out == "" and f"did you mean {doc_id}?" in err, err
    code, out, err = run(capsys, "delete", doc_id, chunk_id, "--kb", kb)  # the document goes: not suggested again
    assert code == 1 and out == "deleted 1 document\n" and "did you mean" not in err, err


def test_one_document_is_counted_in_the_singular(capsys, tmp_path):
    code, out, err = run(capsys, "index", "--embedder", "hashing",
                                 str(EXAMPLE_DATA / "contracts" / "contract-a.md"), "--kb",
                         str(tmp_path / "kb"))
    assert code == 0 and out.startswith("indexed 1 document (1 new, 0 replaced, 0 unchanged) into 1 new chunk; "
                                        "knowledge base now holds 1 document, 1 chunk;"), out
    assert "chunking 1 document ..." in err and "searchable now" in err and "1 chunk to embed with hashing" in err, err
    code, out, _ = run(capsys, "compact", "--kb", str(tmp_path / "kb"))  # searchable first, then its vectors
    assert code == 0 and out.startswith("compacted 2 segments into one: 1 document, 1 chunk;"), out
    code, out, _ = run(capsys, "compact", "--kb", str(tmp_path / "kb"))
    assert code == 0 and out.startswith("compacted 1 segment into one: 1 document, 1 chunk;"), out


@pytest.mark.parametrize("argv, named", [
    (["ask", "q", "--kb", "d", "--now", "tomorrow"], "argument --now: 'tomorrow': write YYYY-MM-DDTHH:MM"),
    (["ask", "q", "--kb", "d", "--model-for", "grade"], "argument --model-for: 'grade': write TASK=MODEL"),
    (["index", "x", "--kb", "d", "--chunk-overlap", "-1"], "argument --chunk-overlap: -1 must be at least 0"),
    (["index", "x", "--kb", "d", "--chunk-size", "1"], "argument --chunk-size: 1 must be at least 50"),
    (["serve", "--kb", "d", "--reading-share", "5"], "argument --reading-share: 5 must be above 0 and below 1"),
    (["serve", "--kb", "d", "--cache-size", "-1"], "argument --cache-size: -1 must be at least 0"),
    (["serve", "--kb", "d", "--cache-ttl", "nan"], "argument --cache-ttl: nan must be a finite number of seconds"),
    (["serve", "--kb", "d", "--cache-ttl", "-1"], "argument --cache-ttl: -1 must be a finite number of seconds"),
    (["serve", "--kb", "d", "--max-connections", "3"], "argument --max-connections: 3 must be at least 4"),
    (["bench-rgb", "--file", "x", "--noise-rate", "2"], "argument --noise-rate: 2 must be from 0 to 1"),
])
def test_a_bad_value_the_parser_can_check_exits_2(capsys, argv, named):
    assert named in refused(capsys, *argv)


@pytest.mark.parametrize("flags, said", [
    (["--chunk-size", "100", "--chunk-overlap", "200"], "--chunk-overlap 200 must be smaller than --chunk-size 100"),
    (["--chunk-size", "60"], "--chunk-overlap 100 (its default) must be smaller than --chunk-size 60"),
    (["--chunk-overlap", "900"], "--chunk-overlap 900 must be smaller than --chunk-size 800 (its default)"),
])
def test_chunking_flags_that_disagree_are_named_as_flags(capsys, tmp_path, flags, said):
    code, _, err = run(capsys, "index", str(EXAMPLE_DATA), "--kb", str(tmp_path / "kb"), *flags)
    assert code == 1 and err == f"agentic-rag: error: {said}; lower the overlap or raise the size\n", err
    assert not (tmp_path / "kb" / "manifest.json").exists()


def test_serve_flags_that_cannot_work_together_are_one_line_naming_them(capsys, example_kb_dir, tmp_path):
    code, _, err = run(capsys, "serve", "--kb", example_kb_dir, "--max-connections", "10")
    assert code == 1 and err == ("agentic-rag: error: --max-per-address 20 must be at most --max-connections 10; "
                                 "lower --max-per-address or raise --max-connections\n"), err
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, "serve", "--kb", example_kb_dir, "--state-dir", str(tmp_path / "file"), "--port", "0")
    assert code == 1 and err.startswith(f"agentic-rag: error: --state-dir {tmp_path / 'file'}: cannot keep "
                                        f"conversations there: ") and err.count("\n") == 1, err


def test_help_names_values_as_elsewhere():
    commands = build_parser()._subparsers._group_actions[0].choices
    serve, rgb = commands["serve"].format_help(), commands["bench-rgb"].format_help()
    assert "--max-runs N" in serve and "--cache-size N" in serve and "--threads N" in serve, serve
    assert "--noise-rate RATE" in rgb and "--passages N" in rgb, rgb
    assert not re.search(r"MAX_RUNS|CACHE_SIZE|NOISE_RATE|PASSAGES|THREADS", serve + rgb)


def test_ctrl_c_on_a_read_only_command_says_only_interrupted(capsys, example_kb_dir, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("agentic_rag.cli._main.run_agentic_rag", interrupted)
    code, _, err = run(capsys, "ask", "q", "--kb", example_kb_dir)
    assert code == 130 and err == "agentic-rag: interrupted\n", err


def test_ctrl_c_stops_serve_gracefully_with_one_line(example_kb_dir):
    pytest.importorskip("waitress")
    process = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "serve", "--kb", example_kb_dir, "--port",
                                "0"], stderr=subprocess.PIPE, cwd=ROOT,
                               env=dict(os.environ, AGENTIC_RAG_READ_KEYS="reader-key-0123456789abcdef",
                                        AGENTIC_RAG_WRITE_KEYS=""))
    seen, deadline = b"", time.monotonic() + 60
    while b"Ctrl-C stops" not in seen and time.monotonic() < deadline:
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, seen  # it ended before serving
        seen += chunk
    process.send_signal(signal.SIGINT)
    seen += process.stderr.read()
    assert process.wait(60) == 0 and seen.endswith(b"\nstopped: finished the requests under way\n"), seen
    assert b"with 8 threads, 1 read key and 0 write keys;" in seen, seen  # counted as the other outputs


READER_GONE = """import os, sys
from agentic_rag.cli import _main as cli
read, write = os.pipe()
os.dup2(write, 1)

def draft_then_interrupt(question, kb, model, tools, config, on_token=None):
    on_token("The draft so")
    os.close(read)  # the reader (| head -c 10) has gone
    raise KeyboardInterrupt

cli.run_agentic_rag = draft_then_interrupt
sys.exit(cli.main(sys.argv[1:]))"""


def test_ctrl_c_after_the_reader_of_a_stream_has_gone_is_one_line(example_kb_dir):
    done = subprocess.run([sys.executable, "-c", READER_GONE, "ask", "q", "--kb", example_kb_dir, "--stream"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 130 and done.stderr == "agentic-rag: interrupted\n", done


def test_progress_written_to_a_file_is_whole_lines(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.jsonl").write_text(
        "".join(json.dumps({"id": f"n{i}", "text": f"note number {i}"}) + "\n" for i in range(1500)), encoding="utf-8")
    with open(tmp_path / "log", "w") as log:
        done = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "index", "--embedder", "hashing",
                                                                        str(tmp_path / "notes"), "--kb",
                               str(tmp_path / "kb")], stderr=log, stdout=subprocess.DEVNULL, cwd=ROOT, timeout=120)
    err = (tmp_path / "log").read_bytes().decode()  # read_text would turn each "\r" into "\n"
    assert done.returncode == 0 and "\r" not in err, repr(err)
    # a line a saved batch of 512 chunks
    assert re.search(r"\nembedded and saved 512/1500 chunks, [^\n]* left\nembedded and saved 1024/1500 chunks, "
                     r"[^\n]* left\nembedded and saved 1500/1500 chunks, [^\n]* left\n$", err), repr(err)


ONE_TERMINAL = """import sys
from agentic_rag.cli import _main as cli

def draft_then_interrupt(question, kb, model, tools, config, on_token=None):
    on_token("The draft so")
    sys.stderr.write("\\rworking")  # a progress line left open on the same terminal
    raise KeyboardInterrupt

cli.run_agentic_rag = draft_then_interrupt
sys.exit(cli.main(sys.argv[1:]))"""


def test_one_terminal_for_both_streams_gets_one_newline(example_kb_dir):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", ONE_TERMINAL, "ask", "q", "--kb", example_kb_dir, "--stream"],
                               stdout=follower, stderr=follower, cwd=ROOT)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child has gone: the terminal is closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert process.wait(60) == 130
    assert seen.replace(b"\r\n", b"\n") == b"The draft so\rworking\nagentic-rag: interrupted\n", seen


def test_only_the_progress_stream_is_written_as_whole_lines_when_not_a_terminal():
    import io

    from agentic_rag.cli._display import LineTracker

    out = io.StringIO()
    LineTracker(out).write("\rdraft piece")  # an answer streamed to a pipe keeps its bytes
    assert out.getvalue() == "\rdraft piece"
    err = io.StringIO()
    progress = LineTracker(err, progress=True)
    progress.write("\rembedding 32/64 chunks")  # the first one is written at once, even just after boot
    progress.write("\rembedding 64/64 chunks")
    progress.write("\n")
    assert err.getvalue() == "embedding 32/64 chunks\nembedding 64/64 chunks\n"


@pytest.mark.parametrize("listed", [True, False])
def test_kb_inside_a_segment_folder_is_refused_listed_or_not(capsys, tmp_path, listed):
    doc = tmp_path / "doc.txt"
    doc.write_text("Alice met Bob.", encoding="utf-8")
    assert run(capsys, "index", "--embedder", "hashing", str(doc), "--kb", str(tmp_path / "kb"))[0] == 0
    segment = tmp_path / "kb" / ("gen-000001" if listed else "gen-000099")  # unlisted: the next index deletes it
    code, out, err = run(capsys, "index", "--embedder", "hashing", str(doc), "--kb", str(segment))
    assert code == 1 and err.count("\n") == 1, err
    assert err.strip().endswith(f"give a folder outside it or the knowledge base's folder: --kb {tmp_path / 'kb'}"), err
    assert not (segment / "manifest.json").exists()
    with pytest.raises(ConfigurationError) as refused_too:  # the command line says what the library says
        open_kb(segment, create=True)
    said, _, fix = str(refused_too.value).rpartition(": ")
    assert err.strip().endswith(f"--kb {said}: --kb {fix}") and " is a segment folder" not in err, err
