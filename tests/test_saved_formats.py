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


@pytest.mark.parametrize("question,n", STATES)
def test_a_state_saved_mid_run_resumes_to_the_end_its_run_had(question, n, resumed_with, fresh_run):
    """The events the saved state holds stay as they were; the run goes on as this version runs it, to
    the end a run started now has (the offline model's answers change between versions: the saved
    run's own end is in `expected`, for the record)."""
    run, resumed = resumed_with(question, n)
    saved = run["states"][n]
    assert resumed["phase"] == "done" and resumed["question"] == question
    assert resumed["trace"][:len(saved["trace"])] == saved["trace"]
    ending, fresh = _ending(resumed), _ending(fresh_run(question))
    if saved.get("draft_answer"):  # a draft the earlier version wrote may stand as the answer
        ending["answer"] = fresh["answer"] = None
    assert ending == fresh
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
# knowledge base's stores): this version must load them, search them and run on from them exactly as
# that version did, to the same answer, trace, citations and token counts.
BEFORE = "04e177d"
BEFORE_RUNS = json.loads((SAVED / f"states-{BEFORE}.json").read_text(encoding="utf-8"))["runs"]


def test_the_example_knowledge_base_saved_before_the_folders_searches_as_it_did(tmp_path):
    saved = json.loads((SAVED / f"kb-{BEFORE}.json").read_text(encoding="utf-8"))
    kb = KnowledgeBase.load(shutil.copytree(SAVED / f"kb-{BEFORE}", tmp_path / "kb"))
    assert (kb.document_count, len(kb)) == (saved["documents"], saved["chunks"])
    assert {q: [[h.id, h.doc_id] for h in kb.search(q, k=3)] for q in saved["search"]} == saved["search"]


@pytest.mark.parametrize("question,n", [(run["question"], n) for run in BEFORE_RUNS for n in range(len(run["states"]))])
def test_a_state_saved_before_the_folders_resumes_to_the_very_end_it_had(question, n, example_kb, example_tools):
    run = next(r for r in BEFORE_RUNS if r["question"] == question)
    resumed = run_agentic_rag(question, example_kb, OfflineModel(), example_tools, state=run["states"][n])
    assert _outcome(resumed) == run["expected"]
