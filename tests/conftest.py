"""Shared fixtures: a tiny mixed Chinese/English corpus and knowledge bases built from it."""
import pytest

from agentic_rag import Config, KnowledgeBase
from helpers import EXAMPLE_DATA, TINY


@pytest.fixture
def tiny_docs():
    return list(TINY)


@pytest.fixture
def tiny_kb():
    kb = KnowledgeBase(config=Config(chunk_size=200, chunk_overlap=20))
    kb.add_documents(TINY)
    return kb


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden files from the current behaviour instead of comparing")


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
    assert main(["index", str(EXAMPLE_DATA), "--kb", str(kb)]) == 0
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
def pg_server(tmp_path_factory):
    """A real PostgreSQL 16 with pgvector (pgserver), started once for the whole test session."""
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    yield server
    server.cleanup()


@pytest.fixture
def pg_url(pg_server):
    """A new, empty database on the session's server, by URL."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    base = pg_server.get_uri()
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    head, _, tail = base.partition("?")
    return head.rsplit("/", 1)[0] + f"/{name}" + (f"?{tail}" if tail else "")


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
