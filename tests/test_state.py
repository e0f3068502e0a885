import json

import pytest

from agentic_rag import (
    AgentState,
    Config,
    ConfigurationError,
    Evidence,
    format_trace,
    new_evidence,
    new_state,
)


def test_new_state_is_plain_json_with_every_documented_key():
    state = new_state("What changed in 2.3.1?", Config(max_rounds=2))
    assert set(state) == set(AgentState.__annotations__)
    assert state["question"] == "What changed in 2.3.1?" and state["config"]["max_rounds"] == 2
    assert state["phase"] == "route" and state["stop_reason"] is None and state["usage"]["model_calls"] == 0
    assert json.loads(json.dumps(state)) == state


def test_each_call_gets_its_own_state():
    first, second = new_state("q"), new_state("q")
    first["evidence"].append({"id": "x"})
    assert second["evidence"] == []


def test_new_evidence_has_the_required_keys_and_only_the_optional_ones_given():
    passage = new_evidence(id="d1#0", doc_id="d1", source="d1.md", text="Acme was founded in 1948.")
    assert set(passage) == Evidence.__required_keys__
    assert passage["kind"] == "passage" and passage["title"] == "" and passage["ranks"] == {}
    found = new_evidence(id="d1#0", doc_id="d1", source="d1.md", text="...", ranks={"bm25": 2}, query="Acme", rank=1,
                         relevance=0.0)
    assert set(found) - set(passage) == {"query", "rank", "relevance"} and found["relevance"] == 0.0
    assert json.loads(json.dumps(found)) == found
    every = new_evidence(id="d1#0", doc_id="d1", source="d1.md", text="...", path=["Acme"], query="Acme", rank=1,
                         relevance=0.5, page=2, section="History", media="image")
    assert list(every) == ["id", "doc_id", "source", "title", "text", "kind", "ranks", "path", "query", "rank",
                           "relevance", "page", "section", "media"]  # the order traces and saved states write


def test_a_state_key_is_checked_only_against_classes():
    from typing import Literal

    from agentic_rag.loop._state import _runtime_types

    assert _runtime_types(float | None) == (int, float, type(None))
    with pytest.raises(TypeError, match="names no class"):  # isinstance could not check a value against it
        _runtime_types(Literal["route"])


def test_bad_questions_are_refused():
    with pytest.raises(ConfigurationError, match="empty"):
        new_state("")
    with pytest.raises(ConfigurationError, match="token budget"):
        new_state("long " * 300, Config(token_budget=1000))


def test_format_trace_joins_event_summaries():
    state = new_state("q")
    state["trace"] = [{"summary": s} for s in ("route:vector", "search:d3,d7", "verify:0.42", "rewrite")]
    assert format_trace(state) == "route:vector -> search:d3,d7 -> verify:0.42 -> rewrite"


def test_state_depends_on_no_part_above_it():
    import ast

    from helpers import ROOT

    tree = ast.parse((ROOT / "agentic_rag" / "loop" / "_state.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assert imported <= {"core"}, imported  # the ground floor only


def _saved(name):
    from helpers import ROOT

    return json.loads((ROOT / "tests" / "fixtures" / "saved" / f"{name}.json").read_text(encoding="utf-8"))["state"]


def test_upgrade_turns_the_old_round_markers_into_typed_keys():
    from agentic_rag.loop._state import upgrade_state

    pending = _saved("loop-pending-grade")
    assert pending["rounds"][-1]["grade"] is None and "grade_pending" not in pending   # the old marker
    upgraded = upgrade_state(pending)
    assert upgraded["grade_pending"] is True and "grade" not in upgraded["rounds"][-1]
    assert upgraded["draft_for"] == [] and upgraded["draft_reply"] is None
    kept = _saved("loop-kept-draft")
    drafted = kept["rounds"][-1]["drafted"]
    upgraded = upgrade_state(kept)
    assert upgraded["draft_for"] == drafted and upgraded["grade_pending"] is False
    assert not any("drafted" in r for r in upgraded["rounds"]) and upgraded["rounds"][-1]["grade"] == 0.585
    assert set(upgraded) == set(AgentState.__annotations__)


def test_upgrade_keeps_the_latest_kept_draft_and_leaves_a_current_state_alone():
    from agentic_rag.loop._state import upgrade_state

    old = {k: v for k, v in new_state("q").items() if k not in ("grade_pending", "draft_for", "draft_reply")}
    old["rounds"] = [{"round": 1, "route": "vector", "grade": 0.4, "drafted": ["a"]},
                     {"round": 2, "route": "vector", "grade": 0.3, "drafted": ["b", "c"]}]
    assert upgrade_state(old)["draft_for"] == ["b", "c"]
    current = dict(new_state("q"), grade_pending=True, draft_for=["x"])
    assert upgrade_state(json.loads(json.dumps(current))) == current


def test_upgrade_takes_the_error_type_from_an_older_states_error():
    from agentic_rag.loop._state import upgrade_state

    for error, kind in ((None, None), ("ModelError: the server answered 500", "ModelError"),
                        ("the on_step hook raised ValueError: the hook's own bug", "ValueError"),
                        ("no class named here", None)):
        old = _without(dict(new_state("q"), error=error), "error_type")   # saved before error_type was kept
        assert upgrade_state(old)["error_type"] == kind, error
    failed = dict(new_state("q"), error="KeyError: 'x'", error_type="KeyError")
    assert upgrade_state(json.loads(json.dumps(failed))) == failed


def test_a_failed_run_records_the_class_of_what_failed_beside_its_message(tiny_kb):
    from agentic_rag import ModelError, OfflineModel, ScriptedModel, run_agentic_rag

    model = ScriptedModel({"generate": [ModelError("the server answered 500")]})
    state = run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, model)
    assert (state["stop_reason"], state["error"]) == ("error", "ModelError: the server answered 500")
    assert state["error_type"] == "ModelError" and state["trace"][-1]["step"] == "error"
    assert state["trace"][-1]["detail"] == {"message": "the server answered 500", "error_type": "ModelError"}

    def hook(event, state):
        if event["step"] == "verify":
            raise LookupError("the hook's own bug")

    state = run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, OfflineModel(), on_step=hook)
    assert state["error"] == "the on_step hook raised LookupError: the hook's own bug"
    assert state["error_type"] == "LookupError" and state["trace"][-1]["detail"]["error_type"] == "LookupError"
    answered = run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, OfflineModel())
    assert answered["stop_reason"] != "error" and answered["error"] is None and answered["error_type"] is None


def _stopped(tiny_kb, at="generate"):
    from agentic_rag import OfflineModel, run_agentic_rag

    return run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, OfflineModel(),
                           on_step=lambda event, state: "stop" if event["step"] == at else None)


def _without(state, key):
    return {k: v for k, v in state.items() if k != key}


BAD_STATES = [  # (how the stopped state is spoiled, what the error names)
    (lambda s: "not a state", "the state is a str, not a dict"),
    (lambda s: [s], "the state is a list, not a dict"),
    (lambda s: _without(s, "rounds"), "the state has no rounds"),
    (lambda s: _without(_without(s, "usage"), "trace"), "the state has no trace, usage"),
    (lambda s: _without(s, "evidence"), "the state has no evidence"),
    (lambda s: _without(s, "question"), "the state has no question"),
    (lambda s: dict(s, rounds="none"), "the state's rounds should be list, not str"),
    (lambda s: dict(s, rounds=[1]), "the state's rounds holds an item that is not a dict"),
    (lambda s: dict(s, round="2"), "the state's round should be int, not str"),
    (lambda s: dict(s, error_type=3), "the state's error_type should be str or NoneType, not int"),
    (lambda s: dict(s, phase="answer"), "the state's phase 'answer' is none of condense, route, search"),
    (lambda s: dict(s, draft_reply=None), "in phase 'grade' but holds no draft_reply"),
    (lambda s: dict(s, phase="route", grade_pending=True, rounds=[]), "a grade is pending for no round"),
    (lambda s: dict(s, phase="search", route=None), "in phase 'search' but holds no routing decision"),
    (lambda s: dict(s, phase="verify", rounds=[]), "in phase 'verify' but holds no round"),
    (lambda s: dict(s, phase="verify", grade=None, rounds=[{"round": 1, "route": "vector", "stalled": True}]),
     "its stalled round has no grade to keep"),
    (lambda s: dict(s, config=dict(s["config"], max_round=2)), "unknown setting 'max_round'"),
    (lambda s: dict(s, config=dict(s["config"], max_rounds="2")), "Config.max_rounds = '2' is a str, not an int"),
    (lambda s: dict(s, config=dict(s["config"], sources="vector")), "Config.sources = 'vector' is not a tuple of str"),
    (lambda s: dict(s, config=dict(s["config"], min_context_score=2.0)), "min_context_score = 2.0 must lie in"),
]


@pytest.mark.parametrize("spoil, names", BAD_STATES, ids=[names for _, names in BAD_STATES])
def test_a_malformed_state_is_one_clear_error_before_the_run(tiny_kb, spoil, names):
    from agentic_rag import OfflineModel, run_agentic_rag

    stopped = _stopped(tiny_kb)
    assert stopped["phase"] == "grade"
    with pytest.raises(ConfigurationError, match="pass a state that run_agentic_rag returned") as caught:
        run_agentic_rag(stopped["question"], tiny_kb, OfflineModel(), state=spoil(json.loads(json.dumps(stopped))))
    assert names in str(caught.value)


def test_every_saved_state_of_the_earlier_version_passes_the_check():
    from agentic_rag.loop._state import check_state
    from helpers import ROOT

    saved = json.loads((ROOT / "tests" / "fixtures" / "saved" / "states.json").read_text(encoding="utf-8"))
    states = [state for run in saved["runs"] for state in run["states"]]
    states += [_saved("loop-pending-grade"), _saved("loop-kept-draft")]
    for state in states:
        check_state(state)
    assert len(states) > 20


def test_upgrade_reads_from_the_trace_whether_grading_had_gone_apart():
    from agentic_rag.loop._state import upgrade_state

    def old(*events):
        state = {k: v for k, v in new_state("q").items() if k != "fold_grades"}
        return dict(state, trace=[{"step": step, "detail": detail} for step, detail in events])

    folded, apart = ("verify", {"by": "with the answer"}), ("verify", {"by": "model"})
    draft, invalid = ("generate", {}), ("usage", {})
    assert upgrade_state(old(("verify", {}), draft, folded))["fold_grades"] is True
    assert upgrade_state(old(("verify", {}), draft, invalid, apart))["fold_grades"] is False
    assert upgrade_state(old(draft, ("faithfulness", {}), ("route", {}), apart))["fold_grades"] is True
    assert upgrade_state(old())["fold_grades"] is True
