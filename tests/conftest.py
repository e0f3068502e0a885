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
