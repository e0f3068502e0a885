"""The PostgreSQL backend against a real PostgreSQL 16 with pgvector, started by the tests themselves
(pgserver, one server for the whole session, a new database per test): what only this backend
has (concurrent writers from two processes, a crash in the middle of a batch, a dropped
connection, schema versions and migrations, the bulk index rebuild, text it cannot store). What
both backends promise is tested on each in test_backend_contract.py."""
import json
import os
import signal
import subprocess
import sys

import pytest

from agentic_rag import (
    AccessDenied,
    Config,
    ConfigurationError,
    IndexConfig,
    KnowledgeBase,
    OfflineModel,
    RetrievalError,
    SearchConfig,
)
from agentic_rag.kb import Document, PostgresKnowledgeBase
from helpers import ROOT, TINY

QUERIES = ["认证失败", "authentication timeout 2.3.1", "shipping after 15:00", "Team plan"]


def _ids(hits):
    return [h.id for h in hits]


def test_the_schema_version_and_settings_are_checked(pg_url):
    import psycopg

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:2])
    with pytest.raises(ConfigurationError, match="was chunked with size 800 and overlap 100, not 300 and 100"):
        PostgresKnowledgeBase(pg_url, config=Config(chunk_size=300))
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("UPDATE ar_meta SET value = '4' WHERE key = 'schema_version'")
    with pytest.raises(RetrievalError, match="schema 4; this agentic-rag reads schema 3 and older: upgrade"):
        PostgresKnowledgeBase(pg_url)


def test_a_layer_alone_sets_its_settings_and_the_saved_chunking_the_rest(pg_url):
    PostgresKnowledgeBase(pg_url, config=IndexConfig(chunk_size=200, chunk_overlap=20)).add_documents(TINY)
    again = PostgresKnowledgeBase(pg_url, config=SearchConfig(bm25_k1=2.0))
    assert again.config == Config(chunk_size=200, chunk_overlap=20, bm25_k1=2.0)
    embedded = KnowledgeBase(config=again.config)
    embedded.add_documents(TINY)
    for query in QUERIES:
        assert _ids(again.search(query, k=3, mode="bm25")) == _ids(embedded.search(query, k=3, mode="bm25"))


_WRITER = """
import sys
from agentic_rag.kb import Document
from agentic_rag.kb import PostgresKnowledgeBase
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
kb = PostgresKnowledgeBase(url)
for i in range(count):
    kb.add_documents([Document(f"{name}-{i}", f"note {i} from writer {name}: parcels ship on Monday"),
                      Document("shared", f"the shared note, last written by {name} at {i}")])
print("done", flush=True)
"""


def _writer(url: str, name: str, count: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WRITER, url, name, str(count)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_writing_at_once_lose_nothing(pg_url):
    PostgresKnowledgeBase(pg_url).add_documents(TINY[:1])   # the schema exists before they race
    a, b = _writer(pg_url, "a", 15), _writer(pg_url, "b", 15)
    for process in (a, b):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0 and out.strip() == "done", err[-2000:]
    pg = PostgresKnowledgeBase(pg_url)
    assert pg.document_count == 1 + 15 + 15 + 1
    import psycopg

    with psycopg.connect(pg_url) as db:    # the statistics agree with the rows
        n, total = db.execute("SELECT n, total_length FROM ar_stats").fetchone()
        assert (n, total) == db.execute("SELECT count(*), sum(length) FROM ar_chunks").fetchone()
        assert db.execute("SELECT count(*) FROM ar_chunks WHERE doc_id = 'shared'").fetchone()[0] == 1
        counted = "SELECT term, count(*) AS df FROM ar_postings GROUP BY term"
        assert db.execute(f"SELECT count(*) FROM ({counted}) c FULL JOIN ar_terms t USING (term) "
                          f"WHERE c.df IS DISTINCT FROM t.df").fetchone()[0] == 0   # document frequencies too


def test_a_crash_in_the_middle_of_a_batch_leaves_nothing_of_it(pg_url):
    PostgresKnowledgeBase(pg_url).add_documents(TINY[:1])
    code = ("import sys, time\nfrom agentic_rag.kb import Document\n"
            "from agentic_rag.kb.postgres import _knowledge_base as p, _sql as sql\n"
            "kb = p.PostgresKnowledgeBase(sys.argv[1])\n"
            "real = sql.chunk_edges\n"
            "def slow(*a):\n    print('inside', flush=True); time.sleep(0.05); return real(*a)\n"
            "sql.chunk_edges = slow\n"
            "kb.add_documents([Document(f'batch-{i}', f'batch note {i}') for i in range(400)])\n")
    process = subprocess.Popen([sys.executable, "-c", code, pg_url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    for _ in range(5):
        process.stdout.readline()                   # some chunks of the batch are written, not committed
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    pg = PostgresKnowledgeBase(pg_url)
    assert pg.document_count == 1 and len(pg) == 1
    assert not [h for h in pg.search("batch note", k=5, mode="bm25") if h.doc_id.startswith("batch")]


def test_a_dropped_connection_is_retried_and_an_unreachable_server_is_a_clear_error(pg_url):
    import psycopg

    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents(TINY)
    before = _ids(pg.search("Team plan", k=2))
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND pid <> pg_backend_pid()")
    assert _ids(pg.search("Team plan", k=2)) == before          # a read reconnects once
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND pid <> pg_backend_pid()")
    assert pg.delete_documents(["pricing"]) == 1                # a write that had not begun: retried once
    assert pg.document_count == len(TINY) - 1
    with pytest.raises(RetrievalError, match="cannot connect to postgresql://nobody:\\*\\*\\*@127.0.0.1:1/"):
        PostgresKnowledgeBase("postgresql://nobody:secret@127.0.0.1:1/none")


def test_every_command_and_the_service_take_a_database_url(pg_url, capsys):
    from agentic_rag.cli import main
    from agentic_rag.service import create_app
    from helpers import EXAMPLE_DATA

    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA / "release-notes"), "--kb", pg_url]) == 0
    assert "into" in capsys.readouterr().out
    assert main(["search", "登录", "--kb", pg_url, "--json", "--k", "1"]) == 0
    assert '"doc_id"' in capsys.readouterr().out
    assert main(["ask", "登录报错的问题在 2.3.1 版本里修复了吗？", "--kb", pg_url, "--json"]) == 0
    reply = capsys.readouterr().out
    assert '"stop_reason"' in reply and "nimbus-2.3.1" in reply
    assert main(["delete", "nimbus-2.3.1.md", "--kb", pg_url]) == 0
    assert "deleted 1 document\n" in capsys.readouterr().out
    assert main(["compact", "--kb", pg_url]) == 0 and "nothing to compact" in capsys.readouterr().out
    app = create_app(OfflineModel(), kb=PostgresKnowledgeBase(pg_url))
    other = PostgresKnowledgeBase(pg_url)
    with pytest.raises(ConfigurationError, match="does not save to one: give such a knowledge base"):
        create_app(OfflineModel(), kb_dir="kb", kb=other)  # a database has no folder to watch or save to
    other.close()
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "wsgi.input": None}
    status = []
    body = json.loads(b"".join(app(environ, lambda s, h: status.append(s))))
    assert status == ["200 OK"] and body["generation"].startswith("pg-") and body["documents"] >= 1
    import io

    data = json.dumps({"documents": [{"id": "mascot", "text": "The Nimbus mascot is a teal cloud."}]}).encode()
    written = json.loads(b"".join(app({"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/documents",
                                       "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data)),
                                       "wsgi.input": io.BytesIO(data)}, lambda s, h: status.append(s))))
    assert status[-1] == "200 OK" and written["added"] == 1 and written["generation"] != body["generation"]
    assert PostgresKnowledgeBase(pg_url).search("mascot teal", k=1)[0].doc_id == "mascot"  # through the database


def test_a_bulk_load_rebuilds_the_vector_index_after_it(pg_url):
    import psycopg

    from agentic_rag.kb.postgres import _knowledge_base as _postgres
    from helpers import DenseHashing

    pg = PostgresKnowledgeBase(pg_url, DenseHashing(64))
    docs = [Document(f"d{i}", f"note {i} about topic{i % 50} and word{i % 7}") for i in range(_postgres.BULK_ROWS)]
    pg.add_documents(docs)
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'ar_chunks_hnsw'").fetchone()[0] == 1
        n, total = db.execute("SELECT n, total_length FROM ar_stats").fetchone()  # every add batch's chunks, tokens
        assert (n, total) == (len(docs), db.execute("SELECT sum(length) FROM ar_chunks").fetchone()[0])
    assert pg.search("note 4321 about topic21", k=1, mode="bm25")[0].doc_id == "d4321"
    assert len(pg.search("topic21 word4", k=5, mode="vector")) == 5


def test_an_older_schema_is_migrated_step_by_step(pg_url, monkeypatch):
    import psycopg

    from agentic_rag.kb.postgres import _knowledge_base as _postgres

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:2])
    monkeypatch.setattr(_postgres, "SCHEMA_VERSION", 4)
    monkeypatch.setitem(_postgres.MIGRATIONS, 4, lambda db, embedder, config: db.execute(
        "ALTER TABLE ar_documents ADD COLUMN note text"))
    assert PostgresKnowledgeBase(pg_url).document_count == 2
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT value FROM ar_meta WHERE key = 'schema_version'").fetchone()[0] == 4
        assert db.execute("SELECT count(note) FROM ar_documents").fetchone()[0] == 0   # the new column is there


def test_a_schema_1_database_gets_the_index_of_edges_by_row(pg_url):
    import psycopg

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:2])
    with psycopg.connect(pg_url, autocommit=True) as db:   # as a database built before schema 2 is
        db.execute("DROP INDEX ar_edges_row")
        db.execute("UPDATE ar_meta SET value = '1' WHERE key = 'schema_version'")
    assert PostgresKnowledgeBase(pg_url).document_count == 2   # migrated through schema 2 to 3
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT value FROM ar_meta WHERE key = 'schema_version'").fetchone()[0] == 3
        assert db.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'ar_edges_row'").fetchone()[0] == 1


def _restore_schema_2(url):
    """The database schema 2's code wrote (TINY, hashing embedder), restored from its pg_dump."""
    import subprocess

    import pgserver

    psql = os.path.join(os.path.dirname(pgserver.__file__), "pginstall", "bin", "psql")
    subprocess.run([psql, "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f",
                    str(ROOT / "tests" / "fixtures" / "postgres" / "schema2.sql")], check=True, capture_output=True)


def test_a_schema_2_database_is_migrated_and_searches_as_a_new_one(pg_url, pg_server):
    import psycopg

    from agentic_rag.eval.postgres_parity import new_database

    _restore_schema_2(pg_url)
    old = PostgresKnowledgeBase(pg_url)
    with psycopg.connect(pg_url) as db:
        assert db.execute("SELECT value FROM ar_meta WHERE key = 'schema_version'").fetchone()[0] == 3
        held = {row[0] for row in db.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ar_%'")}
        assert {"ar_postings_bound", "ar_sparse_dim", "ar_edges_row"} <= held
        assert db.execute("SELECT count(*) FROM ar_sparse").fetchone()[0] > 0
    new = PostgresKnowledgeBase(new_database(pg_server.get_uri(), "t"))
    new.add_documents(TINY)
    with psycopg.connect(pg_url) as db, psycopg.connect(new.url) as fresh:
        sparse = "SELECT c.chunk_id, s.dim, s.weight FROM ar_sparse s JOIN ar_chunks c USING (row) ORDER BY 1, 2"
        assert db.execute(sparse).fetchall() == fresh.execute(sparse).fetchall()
    for query in QUERIES:
        for mode in ("bm25", "vector", "hybrid"):
            assert [(h.id, round(h.score, 5)) for h in old.search(query, k=5, mode=mode)] == \
                [(h.id, round(h.score, 5)) for h in new.search(query, k=5, mode=mode)]
    old.add_documents([Document(TINY[0].id, "A changed release note about timeouts.")])  # writes go on
    assert old.search("changed timeouts", k=1, mode="bm25")[0].id == f"{TINY[0].id}#0"


def test_text_postgresql_cannot_hold_is_refused_and_an_empty_write_keeps_the_generation(pg_url):
    from agentic_rag.kb import safe_url

    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents(TINY[:3])
    before = pg.generation()
    with pytest.raises(ConfigurationError, match="PostgreSQL text cannot hold NUL characters"):
        pg.add_documents([Document("nul", "a NUL \x00 inside")])
    assert pg.document_count == 3 and pg.generation() == before   # the refused write moved nothing
    assert before.startswith("pg-")
    assert pg.delete_documents(["nope"]) == 0 and pg.generation() == before   # nothing changed: same generation
    assert safe_url("postgresql://:s3cret@h/kb") == "postgresql://:***@h/kb"
    assert safe_url("postgresql://alice@h/kb?sslmode=require&password=s3cret") == \
        "postgresql://alice@h/kb?sslmode=require&password=***"


def test_doctor_checks_a_database_and_never_prints_its_password(pg_url, capsys):
    from agentic_rag.cli import main

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:1])
    assert main(["doctor", "--kb", pg_url]) == 0
    assert "built with hashing (2048 dimensions)" in capsys.readouterr().out
    main(["doctor", "--kb", "postgresql://alice:s3cret@127.0.0.1:1/kb"])
    out = capsys.readouterr().out
    assert "s3cret" not in out and "cannot be read" in out


def test_a_pdf_in_the_database_keeps_its_pages_and_the_answer_cites_one(pg_url):
    from agentic_rag import run_agentic_rag
    from agentic_rag.kb.ingestion._documents import read_file

    spec = read_file("spec.pdf", (ROOT / "tests" / "fixtures" / "docs" / "shared-mime-info-spec.pdf").read_bytes(),
                     "spec.pdf")
    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents([spec])
    assert {h.metadata["page"] for h in pg.search("glob files", k=10)} <= set(range(1, 18))
    assert all(h.metadata["page"] == 14 for h in pg.search("extended attribute", k=5, filters={"page": 14}))
    state = run_agentic_rag("Which extended attribute can hold a file's MIME type?", pg, OfflineModel(),
                            config=Config(max_rounds=2))
    assert "user.mime_type" in state["answer"] and 14 in [c.get("page") for c in state["citations"]]


def test_options_the_database_cannot_honour_are_refused_not_ignored(pg_url, tmp_path):
    pg = PostgresKnowledgeBase(pg_url, config=Config())  # every default: nothing to refuse
    with pytest.raises(ConfigurationError, match="PostgreSQL cannot reuse vectors from a saved folder"):
        pg.add_documents(TINY, reuse_from=[tmp_path])
    assert pg.add_documents(TINY, reuse_from=[]).added == len(TINY)
    with pytest.raises(ConfigurationError, match=r"^seed = 7: PostgreSQL's HNSW index \(pgvector\) takes no seed"):
        PostgresKnowledgeBase(pg_url, config=IndexConfig(seed=7))
    with pytest.raises(ConfigurationError, match=r"^hnsw_ef_construction = 40: pgvector's HNSW index takes "
                                                 r"ef_construction from 64 \(twice m\) to 1000$"):
        PostgresKnowledgeBase(pg_url, config=IndexConfig(hnsw_m=32, hnsw_ef_construction=40))


def test_the_hnsw_settings_define_the_database_s_vector_index(pg_url):
    import psycopg

    from helpers import DenseHashing

    PostgresKnowledgeBase(pg_url, DenseHashing(64), IndexConfig(hnsw_m=8, hnsw_ef_construction=40))
    with psycopg.connect(pg_url) as db:
        definition = db.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'ar_chunks_hnsw'").fetchone()[0]
    assert "m='8'" in definition and "ef_construction='40'" in definition


def test_below_exact_search_below_vectors_are_searched_exactly_as_the_embedded_index(pg_url):
    import random

    from helpers import DenseHashing

    # a deliberately poor HNSW graph (m 2, ef 1): searched through it, the database would miss neighbours
    config = Config(hnsw_m=2, hnsw_ef_construction=4, hnsw_ef=1, candidates=10)
    pick = random.Random(5)
    words = [f"w{i}" for i in range(400)]
    docs = [Document(f"d{i}", " ".join(pick.choices(words, k=pick.randint(3, 12)))) for i in range(3000)]
    embedded, pg = KnowledgeBase(DenseHashing(64), config), PostgresKnowledgeBase(pg_url, DenseHashing(64), config)
    for kb in (embedded, pg):
        kb.add_documents(docs)
    for query in ("w5 w7 w300", "w11 w12", "w3 w90 w2 w399"):  # the same best scores (ties may swap ids)
        ours, theirs = embedded.search(query, k=10, mode="vector"), pg.search(query, k=10, mode="vector")
        assert [h.score for h in theirs] == pytest.approx([h.score for h in ours], abs=1e-3), query


def test_a_failure_in_a_later_batch_leaves_nothing_of_the_add(pg_url):
    from agentic_rag.kb import ADD_BATCH, HashingEmbedder

    class FailsLate(HashingEmbedder):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def embed(self, texts):
            self.calls += 1
            if self.calls > ADD_BATCH // self.batch_size:  # the first add batch went in: the second fails
                raise RuntimeError("the embedding server went away")
            return super().embed(texts)

    pg = PostgresKnowledgeBase(pg_url, FailsLate())
    with pytest.raises(RuntimeError, match="went away"):
        pg.add_documents([Document(f"d{i}", f"short note {i}") for i in range(ADD_BATCH + 10)])
    assert len(pg) == 0 and pg.document_count == 0


def test_the_database_refuses_another_embedder_as_a_folder_does(pg_url):
    from agentic_rag.kb import HashingEmbedder

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:1])
    with pytest.raises(ConfigurationError, match=r"^postgresql://.* was built with embedder 'hashing' \(2048-dim\) "
                                                 r"but 'hashing' \(64-dim\) was given; use --embedder hashing or "
                                                 r"rebuild it into a new knowledge base"):
        PostgresKnowledgeBase(pg_url, HashingEmbedder(64))


def test_a_database_tokenized_otherwise_is_refused_as_a_folder_is(pg_url):
    import psycopg

    PostgresKnowledgeBase(pg_url).add_documents(TINY[:1])
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("""UPDATE ar_meta SET value = '{"version": 0}' WHERE key = 'tokenizer'""")
    with pytest.raises(RetrievalError, match=r"^postgresql://.* was tokenized with \{'version': 0\}; rebuild it with "
                                             r"this version: agentic-rag index PATH --kb NEW_DATABASE_URL$"):
        PostgresKnowledgeBase(pg_url)


def _admin(pg_url: str) -> tuple[str, str]:
    """(the database's name, a URL of the server's postgres database, to change this one from)."""
    name = pg_url.partition("?")[0].rsplit("/", 1)[1]
    return name, pg_url.replace(f"/{name}", "/postgres")


def test_a_lost_server_is_connection_lost_in_every_thread(pg_url):
    import threading

    import psycopg

    from agentic_rag import ConnectionLost

    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents(TINY[:2])
    name, admin = _admin(pg_url)
    caught: list[Exception] = []

    def search() -> None:
        try:
            pg.search("Team plan")
        except RetrievalError as exc:
            caught.append(exc)

    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        try:
            search()
            thread = threading.Thread(target=search)  # never connected in this thread: still a lost connection
            thread.start()
            thread.join()
        finally:
            db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    assert len(caught) == 2 and all(isinstance(e, ConnectionLost) for e in caught), caught
    assert all("check the server and retry" in str(e) for e in caught)


def test_a_role_without_a_right_is_one_line_naming_it(pg_url, capsys):
    import uuid

    import psycopg

    from agentic_rag.cli import main

    role = f"ro_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f"CREATE ROLE {role} LOGIN")
    as_role = pg_url.replace("postgres:@", f"{role}:@")
    assert as_role != pg_url
    with pytest.raises(AccessDenied, match="may not create or read .*run CREATE EXTENSION vector"):
        PostgresKnowledgeBase(as_role)
    doc = ROOT / "examples" / "data" / "contracts" / "contract-a.md"
    assert main(["index", "--embedder", "hashing", str(doc), "--kb", as_role]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CREATE EXTENSION vector" in err and "Traceback" not in err, err
    PostgresKnowledgeBase(pg_url).add_documents(TINY[:2])
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    reader = PostgresKnowledgeBase(as_role)
    assert _ids(reader.search("Team plan", k=1))  # reading is all it may do
    with pytest.raises(AccessDenied, match="may not write .*connect as a role that may write"):
        reader.add_documents(TINY[2:3])
    with pytest.raises(AccessDenied, match="may not write"):
        reader.delete_documents(["pricing"])


def test_a_nul_in_a_query_a_filter_or_an_id_is_one_clear_error(pg_url):
    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents(TINY[:2])
    nul = "PostgreSQL text cannot hold NUL characters; remove them from"
    for call in (lambda: pg.search("Team", filters={"doc_id": "a\x00"}),
                 lambda: pg.graph_search("Team\x00 plan"), lambda: pg.held_documents(["a\x00"])):
        with pytest.raises(ConfigurationError, match=f"{nul} the query, the filters and the document ids"):
            call()
    with pytest.raises(ConfigurationError, match=f"{nul} the document ids$"):
        pg.delete_documents(["a\x00"])
    with pytest.raises(ConfigurationError, match=f"{nul} the documents' ids$"):
        pg.add_documents([Document("n\x00", "text")])
    assert pg.document_count == 2


@pytest.mark.parametrize("tables", [
    "CREATE TABLE ar_meta (key text PRIMARY KEY, value jsonb NOT NULL); "
    "INSERT INTO ar_meta VALUES ('schema_version', '\"x\"')",
    "CREATE TABLE ar_meta (key text PRIMARY KEY, value jsonb NOT NULL); "
    "INSERT INTO ar_meta VALUES ('schema_version', '1')",
    "CREATE TABLE ar_meta (a int); INSERT INTO ar_meta VALUES (1)"])
def test_a_database_with_a_foreign_or_damaged_schema_says_so(pg_url, tables):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(tables)
    with pytest.raises(RetrievalError, match="does not hold an agentic-rag knowledge base's schema, or it is damaged "
                                             ".*give a new, empty database") as caught:
        PostgresKnowledgeBase(pg_url)
    assert "upgrade" not in str(caught.value)


@pytest.mark.parametrize("damage", ["DROP TABLE ar_postings", "DROP TABLE ar_documents CASCADE",
                                    "ALTER TABLE ar_chunks RENAME COLUMN text TO body",
                                    "ALTER TABLE ar_stats DROP COLUMN generation"])
def test_an_ar_table_dropped_or_altered_after_opening_says_the_schema_is_damaged(pg_url, damage):
    import psycopg

    pg = PostgresKnowledgeBase(pg_url)
    pg.add_documents(TINY[:2])
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(damage)
    query = TINY[0].text  # words the knowledge base holds: BM25 reads their postings
    reads = [lambda: pg.search(query, k=2, mode="bm25"), lambda: pg.search(query, k=2), pg.generation,
             lambda: pg.document_count, lambda: pg.held_documents([TINY[0].id])]
    writes = [lambda: pg.add_documents(TINY[2:3]), lambda: pg.delete_documents([TINY[0].id])]
    failed = []
    for call in reads + writes:  # psycopg's own error (UndefinedTable, UndefinedColumn) would end the test here
        try:
            call()
        except RetrievalError as exc:
            assert "does not hold an agentic-rag knowledge base's schema, or it is damaged (" in str(exc), exc
            assert "give a new, empty database" in str(exc) and pg_url not in str(exc), exc
            failed.append("read" if call in reads else "write")
    assert "read" in failed and "write" in failed, failed


def test_an_ssl_key_password_is_masked_too():
    from agentic_rag.kb import safe_url

    assert safe_url("postgresql://h/kb?sslpassword=s3cret&password=p") == "postgresql://h/kb?sslpassword=***&password=***"
