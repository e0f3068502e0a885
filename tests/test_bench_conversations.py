"""`agentic-rag bench` on a conversation set: a tiny set written into tmp_path whose follow-ups name
their subject only by a pronoun, so that the question alone finds the wrong passages and the written
out one finds the right one; run through the real command line and run_bench (offline model,
hashing embedder)."""
import json

import pytest

from agentic_rag import Config, OfflineModel, run_bench
from agentic_rag.cli import main
from agentic_rag.eval._conversations import MODES
from agentic_rag.eval._report import ROWS

LEAKED = "Quillfeather"  # the gold answer of a first turn the corpus cannot answer: only conversation_gold sees it

CORPUS = [
    {"id": "orchid", "title": "Orchid Society",
     "text": "The Orchid Society is a club of amateur growers who meet every second Sunday in a greenhouse on the "
             "river bank in Lisbon. Its members trade cuttings, judge the spring show and keep a library of old "
             "catalogues. The Orchid Society was founded in 1921 by the botanist Maria Sousa."},
    {"id": "press", "title": "Quillfeather Press",
     "text": "Quillfeather Press makes books of poetry and short novels on hand-set type in a mill by the canal. "
             "Its books are sewn by hand and sold by subscription. Quillfeather Press was founded by Ada Brill."},
    {"id": "gazette", "title": "Harbour Gazette",
     "text": "The Harbour Gazette is a weekly paper about the port, printed on Fridays and read by dockers."},
    *[{"id": f"d{n}", "title": name, "text": f"{name} was founded in {1800 + 7 * n}. It was founded by {who}."}
      for n, (name, who) in enumerate([("The Glass Museum", "a glazier"), ("The Rowing Club", "two students"),
                                       ("The Night School", "a teacher"), ("The Tram Company", "a banker"),
                                       ("The Choir", "a priest"), ("The Chess Circle", "a baker"),
                                       ("The Fire Brigade", "the mayor"), ("The Cider Mill", "a farmer"),
                                       ("The Observatory", "an astronomer"), ("The Bicycle Works", "a smith"),
                                       ("The Lending Library", "a widow"), ("The Football Club", "miners")])],
]


def conversation(id, first, last, standalone, answers, relevant, history_answers):
    return {"id": id, "turns": [{"role": "user", "content": first}, {"role": "assistant", "content": None},
                                {"role": "user", "content": last}],
            "question": last, "standalone": standalone, "answers": answers, "relevant_ids": relevant,
            "answerable": True, "kind": "2turn", "history_answers": history_answers}


ROWS_CONV = [
    conversation("c-orchid", "Where does the Orchid Society meet?", "When was it founded?",
                 "When was the Orchid Society founded?", [["1921"]], ["orchid"], ["Lisbon"]),
    # the answer to the first turn is not in the corpus: the system's own reply cannot name the press
    conversation("c-press", "Who owns the Harbour Gazette?", "Who founded it?",
                 "Who founded Quillfeather Press?", [["Ada Brill"]], ["press"], [f"{LEAKED} Press"]),
]


def write_set(folder, rows):
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS))
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def conv_run(tmp_path_factory, capsys):
    """The conversation set benched once through the command line: (out folder, metrics, records)."""
    tmp = tmp_path_factory.mktemp("conv")
    data, out = write_set(tmp / "conv_tiny", ROWS_CONV), tmp / "out"
    assert main(["bench", "--data", str(data), "--embedder", "hashing", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "report.md").read_text().strip()   # the report, printed
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, json.loads((out / "metrics.json").read_text()), records


def test_the_four_modes_are_reported_and_explained(conv_run):
    out, metrics, records = conv_run
    assert list(metrics) == list(MODES)
    report = (out / "report.md").read_text()
    assert "| metric | conversation | conversation_gold | no_history | standalone |" in report
    for mode in MODES:
        assert f"- `{mode}`: " in report                                  # each mode explained in a line
        m = metrics[mode]
        assert m["n"] == 2 and m["answer_accuracy_ci"] is not None and m["evidence_recall_ci"] is not None
        assert m["false_abstain_rate"] is not None and m["model_calls"] > 0 and "answer_chars" in m
    assert "agentic runs" in report and "| condensed |" in report
    assert {(r["mode"], r["id"]) for r in records} == {(m, r["id"]) for m in MODES for r in ROWS_CONV}
    for r in records:  # the last turn as asked, what the system was given, its standalone, the answer, usage
        assert {"question", "asked", "standalone", "answer", "abstained", "evidence", "citations"} <= set(r)
        assert r["question"] in ("When was it founded?", "Who founded it?") and r["usage"]["model_calls"] > 0
    conv = [r for r in records if r["mode"] == "conversation"]
    assert all(len(r["earlier"]) == 1 and r["model_calls_all_turns"] > r["usage"]["model_calls"] for r in conv)
    assert metrics["conversation"]["model_calls_all_turns"] > metrics["conversation"]["model_calls"]


def test_the_written_out_question_finds_what_the_pronoun_alone_cannot(conv_run):
    _, metrics, records = conv_run
    assert metrics["standalone"]["evidence_recall"] > metrics["no_history"]["evidence_recall"]
    assert metrics["conversation_gold"]["evidence_recall"] >= metrics["no_history"]["evidence_recall"]
    alone = {r["id"]: r for r in records if r["mode"] == "no_history"}
    assert alone["c-orchid"]["standalone"] == "When was it founded?"   # nothing to condense it with
    asked = {r["id"]: r for r in records if r["mode"] == "conversation"}
    assert "Orchid Society" in asked["c-orchid"]["standalone"]        # the previous question's subject


def test_history_answers_reach_only_the_gold_mode(conv_run):
    _, metrics, records = conv_run
    by = {(r["mode"], r["id"]): r for r in records}
    gold, real = by["conversation_gold", "c-press"], by["conversation", "c-press"]
    assert LEAKED in gold["standalone"] and "press" in gold["evidence"]  # the gold answer, condensed in
    assert LEAKED not in real["standalone"]                                 # the system's own reply: not it
    assert not any(LEAKED in (e["answer"] + e["standalone"]) for e in real["earlier"])
    assert LEAKED not in by["no_history", "c-press"]["standalone"]
    assert metrics["conversation_gold"]["evidence_recall"] > metrics["conversation"]["evidence_recall"]
    # scored after the run: the orchid's first turn was answered right (Lisbon), the press's was not
    assert metrics["conversation"]["earlier_correct"] == 0.5 and metrics["no_history"]["earlier_correct"] is None


def test_a_single_question_set_reports_as_before(tmp_path):
    rows = [{"id": "q1", "question": "When was the Orchid Society founded?", "answers": [["1921"]],
             "relevant_ids": ["orchid"], "answerable": True, "kind": "fact"},
            {"id": "q2", "question": "Who founded the Rowing Club?", "answers": [["two students"]],
             "relevant_ids": ["d1"], "answerable": True, "kind": "fact"}]
    out = tmp_path / "out"
    metrics = run_bench(write_set(tmp_path / "single", rows), ["linear", "agentic"], out, OfflineModel(), Config())
    assert list(metrics) == ["linear", "agentic"] and "condensed" not in metrics["agentic"]
    report = (out / "report.md").read_text()
    assert report.startswith("# single, all questions: linear against agentic, retrieval, answers and cost")
    table = [line.split(" | ")[0].removeprefix("| ") for line in report.splitlines() if line.startswith("| ")]
    assert table == ["metric", *ROWS] and "`no_history`" not in report
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and not any({"asked", "standalone", "earlier"} & set(r) for r in records)


def test_a_conversation_set_is_not_run_linear_and_a_mixed_set_is_refused(tmp_path, capsys):
    data = write_set(tmp_path / "conv", ROWS_CONV)
    assert main(["bench", "--data", str(data), "--mode", "linear", "--out", str(tmp_path / "o")]) != 0
    assert "agentic runs only" in capsys.readouterr().err
    single = {"id": "q1", "question": "Who founded it?", "answers": [["x"]], "relevant_ids": ["d1"]}
    mixed = write_set(tmp_path / "mixed", [ROWS_CONV[0], single])
    assert main(["bench", "--data", str(mixed), "--out", str(tmp_path / "m")]) != 0
    err = capsys.readouterr().err
    assert "mixes conversations" in err and "Traceback" not in err


def test_the_half_and_resume_apply_to_conversations(tmp_path):
    data, out = write_set(tmp_path / "conv", ROWS_CONV), tmp_path / "out"
    run_bench(data, ["standalone"], out, OfflineModel(), Config(), limit=1)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["mode"] for line in lines] == ["standalone"]
    metrics = run_bench(data, ["standalone"], out, OfflineModel(), Config(), limit=1)
    assert (out / "results.jsonl").read_text().splitlines() == lines and metrics["standalone"]["n"] == 1
