"""What earlier versions saved still works: knowledge bases of formats 3 and 4 load and search as they did
when saved, and run states saved mid-run resume to the end the run had (tests/fixtures/saved/README.md)."""
import json
import shutil

import pytest

from agentic_rag import Config, ConfigurationError, KnowledgeBase, OfflineModel, run_agentic_rag
from agentic_rag.loop._state import format_trace
from helpers import ROOT

SAVED = ROOT / "tests" / "fixtures" / "saved"
RUNS = json.loads((SAVED / "states.json").read_text(encoding="utf-8"))["runs"]
STATES = [(run["question"], n) for run in RUNS for n in range(len(run["states"]))]


def _outcome(state):
    return {"answer": state["answer"], "stop_reason": state["stop_reason"], "abstained": state["abstained"],
            "trace": format_trace(state), "citations": [c["id"] for c in state["citations"]],
            "model_calls": state["usage"]["model_calls"], "prompt_tokens": state["usage"]["prompt_tokens"],
            "completion_tokens": state["usage"]["completion_tokens"]}


@pytest.mark.parametrize("version", ["3", "4"])
def test_a_saved_knowledge_base_loads_and_searches_as_when_saved(version, tmp_path):
    saved = json.loads((SAVED / f"kb-format{version}.json").read_text(encoding="utf-8"))
    kb_dir = shutil.copytree(SAVED / f"kb-format{version}", tmp_path / "kb")
    kb = KnowledgeBase.load(kb_dir)
    assert (kb.document_count, len(kb)) == (saved["documents"], saved["chunks"])
    assert {q: [[h.id, h.doc_id] for h in kb.search(q, k=3)] for q in saved["search"]} == saved["search"]


@pytest.mark.parametrize("version", ["3", "4"])
def test_a_saved_knowledge_base_grows_and_is_saved_in_the_current_format(version, tmp_path, tiny_docs):
    kb_dir = shutil.copytree(SAVED / f"kb-format{version}", tmp_path / "kb")
    kb = KnowledgeBase.load(kb_dir)
    kb.add_documents([tiny_docs[1]])  # the document the saves deleted comes back
    kb.save(kb_dir)
    again = KnowledgeBase.load(kb_dir)
    assert json.loads((kb_dir / "manifest.json").read_text())["format_version"] == 4
    assert again.document_count == kb.document_count == 6
    assert again.search("sign-in page 2_3_0", k=1)[0].doc_id == "release-2.3.0"


@pytest.fixture(scope="module")
def resumed_with(example_kb, example_tools):
    def resume(question, n):
        run = next(r for r in RUNS if r["question"] == question)
        return run, run_agentic_rag(question, example_kb, OfflineModel(), example_tools, state=run["states"][n])
    return resume


def _ending(state):
    """What a run ends with, whichever version took its first steps: answer, stop, abstention, citations."""
    return {k: v for k, v in _outcome(state).items() if k in ("answer", "stop_reason", "abstained", "citations")}


@pytest.fixture(scope="module")
def fresh_run(example_kb, example_tools):
    return lambda question: run_agentic_rag(question, example_kb, OfflineModel(), example_tools)


def _resumed_as_now(saved: dict, resumed: dict, fresh: dict) -> None:
    """A resumed run keeps the events its saved state holds and goes on as this version runs it, to
    the end a run started now has. Two things a run started now decides before the state was saved
    are the earlier version's: a draft it wrote may stand as the answer (with its citations), and a
    state past its first round's route never meets the check that refuses a question about a name no
    document mentions, so it refuses by its grade instead."""
    assert resumed["phase"] == "done"
    assert resumed["trace"][:len(saved["trace"])] == saved["trace"]
    ending, now = _ending(resumed), _ending(fresh)
    if saved.get("draft_answer"):
        for key in ("answer", "citations"):
            ending[key] = now[key] = None
    if now["stop_reason"] == "unmentioned" and saved["round"] >= 1:
        assert ending["abstained"] and not ending["citations"] and ending["stop_reason"] != "sufficient"
        return
    assert ending == now


@pytest.mark.parametrize("question,n", STATES)
def test_a_state_saved_mid_run_resumes_to_the_end_its_run_had(question, n, resumed_with, fresh_run):
    """The offline model's answers change between versions: the saved run's own end is in
    `expected`, for the record."""
    run, resumed = resumed_with(question, n)
    assert resumed["question"] == question
    _resumed_as_now(run["states"][n], resumed, fresh_run(question))
    json.dumps(resumed)


def test_a_state_whose_saved_settings_this_version_refuses_resumes_with_settings_given(example_kb, example_tools):
    run = RUNS[0]
    state = dict(run["states"][0], config=dict(run["states"][0]["config"], deadline_s=float("inf")))  # once taken
    with pytest.raises(ConfigurationError, match="deadline_s = inf is not a finite number.*resume it with config="):
        run_agentic_rag(run["question"], example_kb, OfflineModel(), example_tools, state=state)
    resumed = run_agentic_rag(run["question"], example_kb, OfflineModel(), example_tools, config=Config(), state=state)
    assert _ending(resumed) == _ending(run_agentic_rag(run["question"], example_kb, OfflineModel(), example_tools))
    assert resumed["config"]["deadline_s"] == Config().deadline_s


# Written by the last version before the package was laid out in folders (loop/, cli/, core/, the
# knowledge base's stores): this version loads them and searches them exactly as that version did,
# and runs on from its states as it runs (that version's own ends are in `expected`, for the record).
BEFORE = "04e177d"
BEFORE_RUNS = json.loads((SAVED / f"states-{BEFORE}.json").read_text(encoding="utf-8"))["runs"]


def test_the_example_knowledge_base_saved_before_the_folders_searches_as_it_did(tmp_path):
    saved = json.loads((SAVED / f"kb-{BEFORE}.json").read_text(encoding="utf-8"))
    kb = KnowledgeBase.load(shutil.copytree(SAVED / f"kb-{BEFORE}", tmp_path / "kb"))
    assert (kb.document_count, len(kb)) == (saved["documents"], saved["chunks"])
    assert {q: [[h.id, h.doc_id] for h in kb.search(q, k=3)] for q in saved["search"]} == saved["search"]


@pytest.mark.parametrize("question,n", [(run["question"], n) for run in BEFORE_RUNS for n in range(len(run["states"]))])
def test_a_state_saved_before_the_folders_resumes_as_this_version_runs(question, n, example_kb, example_tools,
                                                                       fresh_run):
    run = next(r for r in BEFORE_RUNS if r["question"] == question)
    resumed = run_agentic_rag(question, example_kb, OfflineModel(), example_tools, state=run["states"][n])
    _resumed_as_now(run["states"][n], resumed, fresh_run(question))
