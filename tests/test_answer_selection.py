"""Answer selection and the grade: candidates are sentences, rows, list items and code lines; headings,
contents lines and restatements of the question frame them; a question asks for a kind of thing and
the answer must hold one; a dense embedder ranks the candidates beside the lexical score."""
from agentic_rag import OfflineModel, run_agentic_rag
from agentic_rag.eval._bench import first_cited
from agentic_rag.eval._datasets import Question
from agentic_rag.eval._report import summarize
from agentic_rag.kb import HashingEmbedder
from agentic_rag.models import _extractive as extractive
from agentic_rag.steps._verify import quick_grade
from agentic_rag.text._candidates import answer_windows, candidates, line_role, restates
from agentic_rag.text._lexical import answer_type, has_answer_type

GUIDE = """3.4. Limiting the download bandwidth

3.4.1. Where the limit is set

The limit goes in the file "/etc/apt/apt.conf.d/90limit" as Acquire::http::Dl-Limit "800"; which caps
each download at 800 kB/s. Restart nothing: the next apt run reads it.

| package | size | description |
| trickle | 80 | a user-space bandwidth shaper |
"""


def _passage(text, title="Guide", doc_id="guide"):
    return {"id": f"{doc_id}#0", "doc_id": doc_id, "title": title, "text": text}


def test_lines_that_frame_the_text_are_told_from_those_that_say_something():
    assert line_role("1.1.6. Virtual consoles") == "heading"
    assert line_role("## Installing") == "heading"
    assert line_role("# apt-get install trickle") == "code"
    assert line_role("$ ssh-keygen -p") == "code"
    assert line_role("1.7 How does one pronounce it? . . . . . . . . . 3") == "toc"
    assert line_role("16.1 Authors 63") == "toc"
    assert line_role("How do I limit it?") == "question"
    assert line_role("mc | V:54 | a file manager") == "row"
    assert line_role("1. Run the installer, then reboot.") == "item"  # a numbered sentence is a list item
    assert line_role("Virtual consoles", alone=True) == "heading"
    assert line_role("# 退换货政策（Returns and refunds）") == "heading"


def test_candidates_join_wrapped_lines_and_keep_rows_whole():
    pieces = candidates(GUIDE)
    assert pieces[0] == ("3.4. Limiting the download bandwidth", "heading")
    assert ("| package | size | description |", "row") in pieces
    assert any(role == "text" and p.startswith("which caps each download") for p, role in pieces)
    assert [p for p, _ in candidates("违约金总额\n不超过货款的 5%。")] == ["违约金总额不超过货款的 5%。"]


def test_a_restatement_of_the_question_is_no_answer_unless_it_holds_the_asked_thing():
    assert restates("How do I record my shell activities?", "Recording the shell activities")
    assert restates("APT 下载时把带宽都占满了，怎样给它限速？", "限制 APT 的下载带宽")
    assert not restates("How many minutes is the session timeout?", "The session timeout is 15 minutes.")
    assert not restates("哪份合同的乙方是星河公司？", "乙方：星河公司", title="供货合同 B")
    assert not restates("How do I record my shell activities?", "Use script(1) to record them in a file.")


def test_the_kind_is_read_where_an_english_question_asks():
    # a "when" inside the asking clause, or in a clause before it, asks for no date
    assert answer_type("Which shell runs when a script asks for /bin/sh?") == "other"
    assert answer_type("When I ping a host, how many bytes of overhead do I add?") == "number"
    assert answer_type("Is it restarted when the package is upgraded?") == "yes_no"
    assert answer_type("From which server are security fixes distributed?") == "place"
    assert answer_type("How can I make it reject weak passwords? Which package do I need?") == "package"
    # a wh-word where nothing opens a question still asks, and Chinese interrogatives count anywhere
    assert answer_type("Tell me when the store opens") == "date"
    assert answer_type("The club was founded when?") == "date"
    assert answer_type("当我用 ping 测试时，要加多少字节？") == "number"


def test_a_question_asks_for_a_kind_and_a_text_holds_one_or_not():
    assert answer_type("Which file does systemd read to name the machine?") == "file"
    assert answer_type("编辑好的文件保存在哪里？") == "file"
    assert answer_type("Which package do I need for it?") == "package"
    assert answer_type("mkpasswd 命令要装哪个软件包？") == "package"
    assert answer_type("用什么工具检查脚本？") == "command"
    assert answer_type("How many consoles are there?") == "number"
    assert has_answer_type("file", 'the name stored in "/etc/hostname".')
    assert not has_answer_type("file", "the name stored in the hostname file.")
    assert has_answer_type("package", "Installing the libpam-cracklib package enables it.")
    assert has_answer_type("package", "whois | V:28 | 380 | mkpasswd")
    assert has_answer_type("command", "你可以使用 checkbashisms(1) 对其进行检查。")
    assert has_answer_type("number", "there are six switchable consoles")
    assert not has_answer_type("number", "press the keys together")
    assert has_answer_type("place", "served through security.debian.org")


def test_the_answer_holds_the_asked_thing_not_the_heading_that_echoes_the_question():
    evidence = [_passage(GUIDE)]
    answer = extractive.generate({"question": "Which file holds the APT download bandwidth limit?",
                                  "evidence": evidence}).answer
    assert "/etc/apt/apt.conf.d/90limit" in answer and "3.4." not in answer
    echo = extractive.generate({"question": "How do I limit the download bandwidth?",
                                "evidence": [_passage("3.4. Limiting the download bandwidth\n\nSee below.")]})
    assert "Limiting the download bandwidth" not in echo.answer


def test_evidence_made_of_headings_grades_low_and_says_so():
    evidence = [_passage("3.4. Limiting the download bandwidth\n\n3.5. Other settings\n\nThe cache lives on disk.")]
    grade = extractive.grade({"question": "How do I limit the download bandwidth?", "evidence": evidence})
    assert grade.score < 0.6 and "only in headings" in grade.reason
    assert quick_grade("How do I limit the download bandwidth?", evidence) is None or not \
        quick_grade("How do I limit the download bandwidth?", evidence).sufficient


def test_a_number_question_without_a_number_beside_its_terms_grades_low():
    asked = "How many bytes of overhead does each IPv6 packet carry?"
    without = [_passage("Each IPv6 packet carries overhead. The bytes of overhead depend on the headers.")]
    with_it = [_passage("Each IPv6 packet carries 48 bytes of overhead.")]
    low = extractive.grade({"question": asked, "evidence": without})
    high = extractive.grade({"question": asked, "evidence": with_it})
    assert low.score < 0.6 <= high.score and "none says a number" in low.reason
    assert quick_grade(asked, with_it).sufficient


def test_a_question_naming_a_number_counts_its_terms_at_half_where_the_number_is_missing():
    asked = "How many stations does line 19 have?"
    other_line = extractive.grade({"question": asked, "evidence": [_passage("Line 4 has 35 stations.")]})
    this_line = extractive.grade({"question": asked, "evidence": [_passage("Line 19 has 12 stations.")]})
    assert other_line.score < this_line.score


def test_a_sparse_embedder_adds_nothing_to_the_lexical_ranking():
    evidence = [_passage(GUIDE)]
    assert extractive.similarities("Which file holds the limit?", evidence, HashingEmbedder()) == {}
    assert extractive.similarities("Which file holds the limit?", evidence, None) == {}


class _Recording(OfflineModel):
    """The offline model, keeping the inputs of each request it answers."""

    def __init__(self):
        self.inputs = []

    def complete(self, request):
        self.inputs.append((request.task, request.inputs))
        return super().complete(request)


def test_e5_breaks_a_lexical_tie_for_the_sentence_that_answers(example_kb_e5):
    evidence = [_passage("The sky is blue in many paintings of the old masters. The sky is blue because air "
                         "scatters the short wavelengths of sunlight.", "Notes")]
    asked, because = "Why is the sky blue?", "The sky is blue because air scatters"
    sims = extractive.similarities(asked, evidence, example_kb_e5.embedder)
    assert max(sims, key=sims.get).startswith(because) and sorted(sims.values()) == [0.0, 1.0]
    assert not extractive.generate({"question": asked, "evidence": evidence}).answer.startswith(because)  # a tie
    answer = extractive.generate({"question": asked, "evidence": evidence, "embedder": example_kb_e5.embedder})
    assert answer.answer.startswith(because)


def test_the_run_gives_the_offline_model_its_knowledge_base_embedder(example_kb_e5):
    model = _Recording()
    run_agentic_rag("How long are deleted notes kept in the trash?", example_kb_e5, model)
    generated = [inputs for task, inputs in model.inputs if task == "generate"]
    assert generated and all(inputs["embedder"] is example_kb_e5.embedder for inputs in generated)


def test_answer_windows_leave_out_framing_lines():
    windows = answer_windows("Which file holds the limit?", GUIDE, "Guide")
    assert windows and not any("3.4.1." in w for w in windows)


def test_the_bench_counts_the_first_citation():
    citations = [{"n": 1, "doc_id": "b.md"}, {"n": 2, "doc_id": "a.md"}]
    assert first_cited("Quoted [2] and [1].", citations) == "a.md"
    assert first_cited("No marker.", citations) is None
    q = Question("q1", "Where?", [["x"]], ["a.md"], True, "fact", {"file": "docs/a.md", "page": None})
    record = {"id": "q1", "mode": "linear", "kind": "fact", "answer": "x [2]", "abstained": False,
              "ranking": ["a.md"], "evidence": ["a.md"], "citations": ["b.md", "a.md"], "first_cited": "a.md",
              "pool_size": 1, "rounds": 1, "usage": {"model_calls": 1, "prompt_tokens": 1, "completion_tokens": 1,
                                                      "cost_usd": 0.0}, "ms": 1.0, "faithfulness": 1.0,
              "stop_reason": "linear"}
    metrics = summarize([record], [q], by_kind=False)
    assert metrics["source_first"] == 1.0 and metrics["source_file"] == 1.0
