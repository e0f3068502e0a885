"""Searches on a streaming read replica, against a real primary (the session's pgserver server) and a
real hot standby beside it (pg_basebackup -R and postgres from the pgserver wheel: eval/_replica):
reads go to the replica, a knowledge base's own last write is read from the primary until the
replica has replayed it, a killed or lagging replica is skipped with a warning, and the service's
leak check holds with its searches on the replica."""
import logging
from urllib.parse import quote

import psycopg
import pytest

from agentic_rag.eval._replica import StreamingReplica
from agentic_rag.kb import Document, PostgresKnowledgeBase
from helpers import TINY


@pytest.fixture(scope="module")
def replica(pg_server, tmp_path_factory):
    """One replica for the module's tests (a base backup and a start take seconds each); the test that
    kills it comes last."""
    started = StreamingReplica(pg_server.get_uri(), tmp_path_factory.mktemp("replica") / "replica")
    yield started
    started.kill()


def _name(url: str) -> str:
    return url.partition("?")[0].rsplit("/", 1)[1]


def _with_replica(pg_url: str, replica: StreamingReplica, options: str = "") -> str:
    return pg_url + "&read=" + quote(replica.url(_name(pg_url)), safe="") + options


def _served(kb: PostgresKnowledgeBase) -> dict[str, int]:
    """Connections handed out per server: 'primary' and 'replica'."""
    pools = kb._servers._pools
    return {("primary" if url == kb.url else "replica"): pool.get_stats().get("requests_num", 0)
            for url, pool in pools.items()}


def test_searches_go_to_the_replica_and_a_write_is_read_back_from_the_primary(pg_url, replica):
    writer = PostgresKnowledgeBase(_with_replica(pg_url, replica))
    writer.add_documents(TINY)
    replica.caught_up()
    reader = PostgresKnowledgeBase(_with_replica(pg_url, replica))
    assert [h.id for h in reader.search("Team plan", k=3)] == [h.id for h in writer.search("Team plan", k=3)]
    assert _served(reader).get("replica", 0) >= 1
    with psycopg.connect(replica.url(_name(pg_url))) as db:  # the replica is a standby: it refuses writes
        assert db.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    with psycopg.connect(replica.url(), autocommit=True) as db:  # replay paused: the replica falls behind
        db.execute("SELECT pg_wal_replay_pause()")
    try:
        writer.add_documents([Document("fresh", "A zebra-striped release note, just written.")])
        assert [h.doc_id for h in writer.search("zebra-striped", k=1)] == ["fresh"]  # its own write: the primary
        with psycopg.connect(replica.url(_name(pg_url))) as db:
            assert db.execute("SELECT count(*) FROM ar_documents WHERE id = 'fresh'").fetchone()[0] == 0
    finally:
        with psycopg.connect(replica.url(), autocommit=True) as db:
            db.execute("SELECT pg_wal_replay_resume()")
    replica.caught_up()
    before = _served(reader).get("replica", 0)
    assert [h.doc_id for h in reader.search("zebra-striped", k=1)] == ["fresh"]  # found on the replica once replayed
    assert _served(reader)["replica"] == before + 1
    writer.close()
    reader.close()


def test_a_lagging_replica_is_skipped_with_a_warning(pg_url, replica, caplog):
    writer = PostgresKnowledgeBase(pg_url)
    writer.add_documents(TINY[:2])
    replica.caught_up()
    reader = PostgresKnowledgeBase(_with_replica(pg_url, replica, "&max_lag_s=0"))
    with psycopg.connect(replica.url(), autocommit=True) as db:
        db.execute("SELECT pg_wal_replay_pause()")
        try:
            writer.add_documents(TINY[2:])  # another process's write: the replica has received it, not replayed it
            with caplog.at_level(logging.WARNING, logger="agentic_rag.postgres"):
                hits = reader.search("Team plan", k=5)
        finally:
            db.execute("SELECT pg_wal_replay_resume()")
    assert {h.doc_id for h in hits} & {d.id for d in TINY[2:]}  # the primary answered: it sees the new write
    assert any("lags" in r.getMessage() and "max_lag_s=0" in r.getMessage() for r in caplog.records)
    writer.close()
    reader.close()


def test_a_killed_replica_does_not_fail_searches(pg_url, replica, caplog):
    kb = PostgresKnowledgeBase(_with_replica(pg_url, replica))
    kb.add_documents(TINY)
    replica.caught_up()
    expected = [h.id for h in kb.search("authentication timeout", k=3)]
    replica.kill()
    with caplog.at_level(logging.WARNING, logger="agentic_rag.postgres"):
        for _ in range(3):
            assert [h.id for h in kb.search("authentication timeout", k=3)] == expected
    skipped = [r.getMessage() for r in caplog.records if r.name == "agentic_rag.postgres"]
    assert len(skipped) == 1 and "cannot be reached" in skipped[0] and "the primary serves" in skipped[0], skipped
    kb.close()


@pytest.mark.parametrize("option, message", [
    ("&read=replica.internal", "a read replica is a postgresql:// URL"),
    ("&pool_size=0", "pool_size='0'"),
    ("&prepare_threshold=soon", "prepare_threshold='soon'"),
])
def test_a_bad_option_in_the_url_is_one_clear_line(pg_url, option, message):
    from agentic_rag import ConfigurationError

    with pytest.raises(ConfigurationError, match=message):
        PostgresKnowledgeBase(pg_url + option)


def test_prepare_threshold_none_never_prepares(pg_url):
    kb = PostgresKnowledgeBase(pg_url + "&prepare_threshold=none")
    kb.add_documents(TINY)
    for _ in range(8):
        kb.search("Team plan", k=2)
    with kb._servers.primary() as db:
        assert db.prepare_threshold is None
        assert db.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
    kb.close()


def test_the_leak_check_holds_with_searches_on_the_replica(pg_url):
    from agentic_rag.eval import leak_check

    report = leak_check.run(scopes=3, docs=6, count=2, backends=("postgres",), postgres_url=pg_url, replica=True,
                            mcp=False)  # the MCP client reads through the same searches (test_collections)
    assert report["leaks"] == 0, report["runs"]["cache_on"]["leak_examples"]
    for run in report["runs"].values():
        assert {s.rsplit(" ", 1)[1] for s in run["statuses"]} == {"200"}, run["statuses"]
    assert report["replica_transactions"] > 100  # the searches ran on the replica


def test_the_url_keeps_libpqs_parameters_as_written_and_takes_ours_out():
    from agentic_rag.kb.postgres._connections import split_url

    url, options = split_url("postgresql://rag@db/kb?options=-c%20search_path%3Dkb&read=postgresql%3A%2F%2Frag%40r1%2Fkb"
                             "&pool_size=3&sslmode=require&prepare_threshold=none&read=postgres%3A%2F%2Fr2%2Fkb")
    assert url == "postgresql://rag@db/kb?options=-c%20search_path%3Dkb&sslmode=require"
    assert options["read"] == ["postgresql://rag@r1/kb", "postgres://r2/kb"]
    assert (options["pool_size"], options["prepare_threshold"], options["pool_timeout"]) == (3, None, 5.0)
