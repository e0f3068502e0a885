"""The error tree: where each class sits, so that an `except` written for a parent still catches what
it caught before; and a PostgreSQL connection that drops for good, against a real server."""
import pytest

from agentic_rag import (
    AccessDenied,
    AgenticRAGError,
    ConfigurationError,
    ConnectionLost,
    RetrievalError,
    StorageError,
    WriteConflict,
)
from agentic_rag.kb.ingestion._loaders import Unreadable
from agentic_rag.service import ServiceError
from agentic_rag.service._http import NotJSON as _NotJSON
from helpers import TINY


def test_each_class_sits_where_its_callers_catch_it():
    for conflict in (WriteConflict, ConnectionLost):       # `except RetrievalError` catches both, as before
        assert issubclass(conflict, RetrievalError) and not issubclass(conflict, StorageError)
    assert not issubclass(WriteConflict, ConnectionLost) and not issubclass(ConnectionLost, WriteConflict)
    for private in (Unreadable, ServiceError):              # caught where they are raised, now in the tree too
        assert issubclass(private, AgenticRAGError) and not issubclass(private, (ConfigurationError, RetrievalError))
    assert issubclass(_NotJSON, ConfigurationError) and issubclass(_NotJSON, ValueError)  # JSON's parser's kind
    # a role without a right: `except ConfigurationError` still catches it; the service tells it apart (500)
    assert issubclass(AccessDenied, ConfigurationError) and not issubclass(AccessDenied, RetrievalError)


def _drop_own_connection(db):
    db.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # the server drops it mid-statement, every time


def test_a_connection_that_drops_again_on_its_retry_is_connection_lost(pg_url):
    import psycopg

    from agentic_rag.kb import PostgresKnowledgeBase

    pg = PostgresKnowledgeBase(pg_url + "&pool_timeout=1")
    pg.add_documents(TINY)
    with pytest.raises(ConnectionLost, match=r"the connection to postgresql://.* dropped: .*check the server"):
        pg._read(_drop_own_connection)
    with pytest.raises(ConnectionLost, match="dropped during a write, before its commit: .*nothing of it was written"):
        pg._write(_drop_own_connection)
    assert pg.document_count == len(TINY)                  # it reconnects for the next call
    name = pg_url.partition("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(pg_url.replace(f"/{name}", "/postgres"), autocommit=True) as db:
        db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")  # drop it, and refuse it from now on
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        try:
            with pytest.raises(ConnectionLost, match=r"cannot connect to postgresql://postgres:\*\*\*@/.* again"):
                pg.search("Team plan", k=2)
            with pytest.raises(ConnectionLost, match=r"again \(the connection was lost\): .*; nothing of the write "
                                                     r"was written: check the server and retry$"):
                pg.delete_documents(["pricing"])  # a write that cannot connect again has written nothing, and says so
        finally:
            db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    with pytest.raises(RetrievalError, match="cannot connect to") as refused:  # never connected: not lost
        PostgresKnowledgeBase("postgresql://nobody:secret@127.0.0.1:1/none")
    assert not isinstance(refused.value, ConnectionLost)
