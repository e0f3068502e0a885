"""`agentic-rag chat` and `ask --history`, each in a process of its own as a user runs them: questions
piped in one a line (or typed at a terminal), follow-ups read with the turns before them, the
prompt's commands, a conversation saved and resumed, and history files that cannot be used."""
import json
import os
import signal
import subprocess
import sys

import pytest

from helpers import ROOT
from openai_server import FakeOpenAI

FIRST_ZH = "登录报错的问题在 2.3.1 版本里修复了吗？"
FOLLOW_ZH = "那 2.4 里呢？"
STANDALONE_ZH = "登录报错的问题在 2.4 版本里修复了吗？"
FIRST_EN = "How much does the Business plan cost?"
FOLLOW_EN = "How much storage does it include?"  # "it" is the plan the question before was about


def _cli(*argv, stdin: str = "", **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentic_rag.cli", *argv], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, timeout=300, **kwargs)


def _transcript(out: str) -> list[tuple[str, str]]:
    """A piped chat's output as (the line it echoed as "> line", what was printed after it)."""
    return [tuple(block.partition("\n")[::2]) for block in ("\n" + out).split("\n> ")[1:]]


def _turns(out: str) -> dict[str, str]:
    """The transcript by the line asked (each asked once)."""
    turns = dict(_transcript(out))
    assert len(turns) == len(_transcript(out)), out
    return turns


def _clean(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "error" not in done.stderr, done.stderr


def test_chat_reads_follow_ups_in_both_languages_and_reset_forgets(example_kb_dir):
    lines = [FIRST_ZH, "", FOLLOW_ZH, "/sources", FIRST_EN, FOLLOW_EN, "/sources", "/reset", FOLLOW_EN, "/help",
             "/exit", "never asked"]
    done = _cli("chat", "--kb", example_kb_dir, "--trace", stdin="\n".join(lines) + "\n")
    _clean(done)
    transcript = _transcript(done.stdout)
    assert [asked for asked, _ in transcript] == [line for line in lines[:-2] if line] + ["/exit"]  # no empty turn
    # from a pipe: each line echoed once, no prompt drawn before it, no banner
    assert "> >" not in done.stdout and "chatting with" not in done.stderr
    first, follow, sources, first_en, follow_en, sources_en, reset, after_reset, help_, _ = [s for _, s in transcript]
    assert "(read as:" not in first and "Trace: route" in first and "release-notes/nimbus-2.3.1.md" in first
    # the follow-up is condensed (shown before the answer, and first in its trace), then answered with sources
    assert follow.startswith(f"(read as: {STANDALONE_ZH})\n") and "Trace: condense -> route" in follow, follow
    assert "Sources:" in follow and "nimbus-2.3.1.md" in follow and "Stop: " in follow
    # /sources: the passages the last answer cited, numbered as it cites them, id, where, the text's start
    listed = sources.splitlines()
    assert listed[0].startswith("  [1] release-notes/nimbus-2.3.1.md#0 (/")  # where: its source
    assert listed[0].endswith("/examples/data/release-notes/nimbus-2.3.1.md)")
    assert listed[1].startswith("      # Nimbus Notes v2.3.1 release notes Released") and listed[1].endswith("...")
    assert len(listed[1].strip()) == 200 + len("...")
    # in English: "it" is the plan the question before asked about
    assert "(read as:" not in first_en and "manual/05-pricing.md" in first_en
    assert follow_en.startswith("(read as: How much storage does Business include?)\n"), follow_en
    assert "1 TB per workspace" in follow_en and "manual/05-pricing.md" in follow_en
    assert "manual/05-pricing.md#0" in sources_en and "nimbus-2.3.1" not in sources_en
    # after /reset the same words have nothing to lean on: asked as written, with no condense phase
    assert "new conversation" in reset
    assert "(read as:" not in after_reset
    assert "\nTrace: route" in after_reset and "condense" not in after_reset, after_reset
    assert "/sources" in help_ and "/reset" in help_
    assert "never asked" not in done.stdout  # /exit ended it


def test_a_follow_up_the_kb_does_not_cover_is_read_as_meant_and_refused(example_kb_dir):
    done = _cli("chat", "--kb", example_kb_dir, stdin=f"{FIRST_ZH}\n那 3.0 里呢？\n")
    _clean(done)
    uncovered = _turns(done.stdout)["那 3.0 里呢？"]
    assert uncovered.startswith("(read as: 登录报错的问题在 3.0 版本里修复了吗？)\n"), uncovered
    assert "知识库中没有找到可靠的答案" in uncovered and "3.0" in uncovered and "Sources:" not in uncovered


def test_an_ellipsis_after_an_ellipsis_is_read_with_the_question_both_lean_on(example_kb_dir):
    done = _cli("chat", "--kb", example_kb_dir, stdin=f"{FIRST_ZH}\n{FOLLOW_ZH}\n那 3.0 里呢？\n")
    _clean(done)
    assert _turns(done.stdout)["那 3.0 里呢？"].startswith("(read as: 登录报错的问题在 3.0 版本里修复了吗？)\n")


def test_chat_streams_each_draft_after_the_question_it_was_read_as(example_kb_dir):
    done = _cli("chat", "--kb", example_kb_dir, "--stream", stdin=f"{FIRST_EN}\n{FOLLOW_EN}\n")
    _clean(done)
    follow = _turns(done.stdout)[FOLLOW_EN]
    assert follow.startswith("(read as: How much storage does Business include?)\n"), follow
    draft, _, sources = follow.partition("\nSources:\n")  # the draft as it came (then what changed it), the sources
    assert "1 TB per workspace" in draft and "manual/05-pricing.md" in sources, follow


def test_sources_before_any_answer_and_an_unknown_command(example_kb_dir):
    done = _cli("chat", "--kb", example_kb_dir, stdin="/sources\n/sauces\n")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert _turns(done.stdout) == {"/sources": "(no answer yet in this conversation)\n", "/sauces": "\n"}
    assert done.stderr.endswith("agentic-rag: error: /sauces is not a chat command; /help lists them\n")


def test_save_then_resume_with_history(example_kb_dir, tmp_path):
    saved = tmp_path / "conversation.json"
    done = _cli("chat", "--kb", example_kb_dir, "--save", str(saved), stdin=FIRST_ZH + "\n")
    _clean(done)
    conversation = json.loads(saved.read_text(encoding="utf-8"))
    assert conversation["format"] == 1 and [m["role"] for m in conversation["turns"]] == ["user", "assistant"]
    assert conversation["turns"][0]["content"] == FIRST_ZH
    assert "release-notes/nimbus-2.3.1.md#0" in [e["id"] for e in conversation["turns"][1]["evidence"]]
    # resumed (and saved to the same file): the follow-up is read with the saved turn
    done = _cli("chat", "--kb", example_kb_dir, "--history", str(saved), "--save", str(saved),
                stdin=FOLLOW_ZH + "\n/sources\n")
    assert done.returncode == 0 and "resumed 1 turn from" in done.stderr, done.stderr
    turns = _turns(done.stdout)
    assert turns[FOLLOW_ZH].startswith(f"(read as: {STANDALONE_ZH})\n") and "nimbus-2.3.1.md" in turns[FOLLOW_ZH]
    assert "[1] release-notes/nimbus-2.3.1.md#0" in turns["/sources"]
    resumed = json.loads(saved.read_text(encoding="utf-8"))
    assert [m["content"] for m in resumed["turns"] if m["role"] == "user"] == [FIRST_ZH, STANDALONE_ZH]  # as meant
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conversation.json"]  # no temporary file left
    # /reset is saved too: the file then holds a conversation with no turns
    _clean(_cli("chat", "--kb", example_kb_dir, "--history", str(saved), "--save", str(saved), stdin="/reset\n"))
    assert json.loads(saved.read_text(encoding="utf-8"))["turns"] == []


def test_ask_with_history_reads_the_follow_up_with_it(example_kb_dir, tmp_path):
    first = _cli("ask", FIRST_EN, "--kb", example_kb_dir, "--json")
    assert first.returncode == 0, first.stderr
    (tmp_path / "state.json").write_text(first.stdout, encoding="utf-8")  # one ask --json object
    (tmp_path / "messages.json").write_text(json.dumps([  # as a chat client sends them
        {"role": "user", "content": FIRST_ZH}, {"role": "assistant", "content": "修复了。"}]), encoding="utf-8")
    for history, question, standalone in (("messages.json", FOLLOW_ZH, STANDALONE_ZH),
                                          ("state.json", FOLLOW_EN, "How much storage does Business include?")):
        done = _cli("ask", question, "--kb", example_kb_dir, "--history", str(tmp_path / history), "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["question"] == question and result["standalone"] == standalone, result["standalone"]
        assert result["trace"][0]["summary"] == "condense" and not result["abstained"]
    assert "1 TB per workspace" in result["answer"]
    # and without it the same words stand as asked
    alone = json.loads(_cli("ask", FOLLOW_EN, "--kb", example_kb_dir, "--json").stdout)
    assert alone["standalone"] == FOLLOW_EN and alone["trace"][0]["summary"].startswith("route")


BAD_HISTORIES = [  # what the file holds, what the one line says
    ("not json at all", "is not JSON (Expecting value at line 1)"),
    ("[1, 2]", "history item 1 is a int, not a message"),
    ('[{"role": "tool", "content": "42"}]', "history item 1 has role 'tool'"),
    ('{"format": 7, "turns": []}', "holds a JSON object that chat --save did not write"),
    ('"just text"', "holds a JSON str, not a list"),
    ('[{"role": "user", "content": 5}]', "history item 1's content is a int, not text"),
]


@pytest.mark.parametrize("command, held, said", [("ask", *bad) for bad in BAD_HISTORIES]  # chat reads it alike:
                         + [("chat", *bad) for bad in BAD_HISTORIES[:3]], ids=lambda value: value[:40])
def test_a_history_file_that_cannot_be_used_is_one_line_and_exit_2(example_kb_dir, tmp_path, command, held, said):
    path = tmp_path / "history.json"
    path.write_text(held, encoding="utf-8")
    argv = [command, FOLLOW_ZH] if command == "ask" else [command]
    done = _cli(*argv, "--kb", example_kb_dir, "--history", str(path), stdin=FOLLOW_ZH + "\n")
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"agentic-rag {command}: error: argument --history: {path}"), done.stderr
    assert said in done.stderr and "messages" in done.stderr, done.stderr  # what is wrong, and what to give


def test_a_missing_history_file_is_one_line_and_exit_2(example_kb_dir, tmp_path):
    done = _cli("ask", FOLLOW_ZH, "--kb", example_kb_dir, "--history", str(tmp_path / "none.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot read {tmp_path / 'none.json'}: no such file or directory (ENOENT)" in done.stderr


def test_a_failed_turn_is_one_line_and_the_chat_goes_on(example_kb_dir, monkeypatch):
    for name in ("AGENTIC_RAG_MODEL", "AGENTIC_RAG_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeOpenAI() as server:  # a model server that refuses every call
        server.chat.extend({"status": 400, "body": {"error": {"message": "the model is broken"}}} for _ in range(20))
        done = _cli("chat", "--kb", example_kb_dir, "--model", "small-model", "--base-url", server.url,
                    stdin=f"{FIRST_EN}\n/help\n{FOLLOW_EN}\n")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert list(_turns(done.stdout)) == [FIRST_EN, "/help", FOLLOW_EN]
    failures = done.stderr.splitlines()
    assert len(failures) == 2 and all(line.startswith("agentic-rag: error: the turn failed: ModelError: ")
                                      and "the model is broken" in line for line in failures), done.stderr


def test_a_save_that_fails_says_so_and_the_chat_goes_on(example_kb_dir, tmp_path):
    done = _cli("chat", "--kb", example_kb_dir, "--save", str(tmp_path / "no-such-folder" / "c.json"),
                stdin=f"{FIRST_EN}\n{FOLLOW_EN}\n")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert _turns(done.stdout)[FOLLOW_EN].startswith("(read as: How much storage does Business include?)")
    lines = done.stderr.splitlines()[-2:]
    assert all(f"cannot save the conversation to {tmp_path}/no-such-folder/c.json: no such file" in line
               for line in lines), done.stderr


def test_ctrl_c_at_the_prompt_of_a_pipe_ends_cleanly(example_kb_dir):
    process = subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "chat", "--kb", example_kb_dir],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    process.stdin.write(f"{FIRST_EN}\n".encode())
    process.stdin.flush()
    seen = b""
    while b"Sources:" not in seen or not seen.endswith(b"\n\n"):  # the answer, its sources, the blank line
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, seen
        seen += chunk
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 0
    err = process.stderr.read().decode()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    process.stdin.close()
    process.stdout.close()
    process.stderr.close()


INTERRUPT_FIRST_TURN = """import sys
from agentic_rag import Conversation, cli
ask = Conversation.ask
calls = []

def interrupted_once(self, question, **options):
    calls.append(question)
    if len(calls) == 1:
        raise KeyboardInterrupt  # Ctrl-C while the first turn runs
    return ask(self, question, **options)

Conversation.ask = interrupted_once
sys.exit(cli.main(sys.argv[1:]))"""


def test_ctrl_c_during_a_turn_drops_it_on_a_terminal_and_stops_a_pipe(example_kb_dir):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()  # stdin a terminal, stdout and stderr read here
    os.write(leader, f"{FIRST_ZH}\n{FOLLOW_ZH}\n\x04".encode())  # typed ahead; Ctrl-D at a line's start ends it
    done = subprocess.run([sys.executable, "-c", INTERRUPT_FIRST_TURN, "chat", "--kb", example_kb_dir],
                          stdin=follower, capture_output=True, text=True, cwd=ROOT, timeout=120)
    os.close(follower)
    os.close(leader)
    assert done.returncode == 0, done.stderr
    assert "interrupted: the turn is dropped" in done.stderr and "Traceback" not in done.stderr
    # the dropped turn is not in the conversation: the follow-up has nothing to lean on
    assert "(read as:" not in done.stdout and "chatting with" in done.stderr
    piped = subprocess.run([sys.executable, "-c", INTERRUPT_FIRST_TURN, "chat", "--kb", example_kb_dir],
                           input=f"{FIRST_ZH}\n{FOLLOW_ZH}\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 130 and piped.stderr.endswith("agentic-rag: interrupted\n"), piped.stderr
