"""open_kb: a saved folder loads, a folder holding none is an error unless created, a PostgreSQL URL
opens (its schema made), anything else is one clear line; and both backends implement every member
of the protocol the callers rely on."""
import inspect
import re
import threading
import typing
from pathlib import Path

import pytest

from agentic_rag import (
    Config,
    ConfigurationError,
    HashingEmbedder,
    KnowledgeBase,
    KnowledgeBaseBackend,
    PostgresKnowledgeBase,
    RetrievalError,
    WriteConflict,
    open_kb,
    writer_lock,
)
from agentic_rag.cli import main
from agentic_rag.kb import check_address, writing
from helpers import EXAMPLE_DATA, TINY, without


def _ids(kb, query="认证失败"):
    return [h.id for h in kb.search(query, k=3)]


def test_a_saved_folder_loads_as_the_knowledge_base_saved_there(tmp_path, tiny_kb):
    tiny_kb.save(tmp_path / "kb")
    for where in (tmp_path / "kb", str(tmp_path / "kb")):
        kb = open_kb(where)
        assert type(kb) is KnowledgeBase and kb.saves_to_folder
        assert _ids(kb) == _ids(tiny_kb) and kb.config.chunk_size == 200  # its own chunking, not the default
        assert kb.generation(tmp_path / "kb") == tiny_kb.generation(tmp_path / "kb")
        assert kb.generation(None) is None  # the protocol allows no folder; the embedded one then names none
    with pytest.raises(ConfigurationError, match="chunked with size 200"):  # KnowledgeBase.load's checks hold
        open_kb(tmp_path / "kb", config=Config(chunk_size=300))
    with pytest.raises(ConfigurationError, match="built with embedder 'hashing' \\(2048-dim\\)"):
        open_kb(tmp_path / "kb", HashingEmbedder(64))


def test_a_folder_holding_none_is_an_error_unless_created(tmp_path):
    (tmp_path / "empty").mkdir()
    for where in (tmp_path / "missing", tmp_path / "empty"):
        with pytest.raises(RetrievalError, match="no knowledge base at .*agentic-rag index PATH --kb"):
            open_kb(where)
    assert not (tmp_path / "missing").exists()  # opening creates nothing
    kb = open_kb(tmp_path / "missing", HashingEmbedder(64), Config(chunk_size=300), create=True)
    assert type(kb) is KnowledgeBase and len(kb) == 0 and not (tmp_path / "missing").exists()
    assert (kb.embedder.dimension, kb.config.chunk_size, kb.graph_method) == (64, 300, "names")
    kb.add_documents(TINY)
    kb.save(tmp_path / "missing")
    again = open_kb(tmp_path / "missing", create=True)  # create=True loads what is saved there
    assert _ids(again) == _ids(kb) and again.embedder.dimension == 64


def test_a_new_folder_takes_a_model_graph_and_a_saved_one_keeps_its_own(tmp_path):
    def extract(title, text):
        return [("Nimbus", "has", "mascot")]

    kb = open_kb(tmp_path / "kb", create=True, extract_triples=extract, graph_method="model:tiny")
    kb.add_documents(TINY[:1])
    kb.save(tmp_path / "kb")
    assert kb.graph_method == "model:tiny" and kb.graph_size[0] >= 2
    assert open_kb(tmp_path / "kb", graph_method="names").graph_method == "model:tiny"


def test_a_folder_that_cannot_hold_one_is_refused_before_anything_is_made(tmp_path):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="is under .*file, which is not a folder"):
        open_kb(tmp_path / "file" / "kb", create=True)


@pytest.mark.parametrize("where, says", [
    (42, "not by a int; give a folder \\(str or Path\\) or a postgresql:// URL"),
    (None, "not by a NoneType"),
    (b"kb", "not by a bytes"),
    ("mysql://alice:s3cret@db/kb", "^mysql://alice:\\*\\*\\*@db/kb: not a knowledge base's address; give a folder"),
    ("file:///tmp/kb", "not a knowledge base's address"),
    ("  ", "empty text"),
])
def test_what_names_no_knowledge_base_is_one_line_saying_what_to_give(where, says):
    with pytest.raises(ConfigurationError, match=says) as raised:
        open_kb(where, create=True)
    assert "\n" not in str(raised.value) and "s3cret" not in str(raised.value)


def test_a_file_is_refused_with_the_folder_to_give(tmp_path, tiny_kb):
    (tmp_path / "notes.txt").write_text("notes", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="notes.txt is a file, not a knowledge base's folder; give the "
                                                 "folder holding one"):
        open_kb(tmp_path / "notes.txt", create=True)
    tiny_kb.save(tmp_path / "kb")
    with pytest.raises(ConfigurationError, match=f"give the folder holding it: {re.escape(str(tmp_path / 'kb'))}$"):
        open_kb(tmp_path / "kb" / "manifest.json")


def test_the_command_line_refuses_another_url_before_making_a_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["index", "--embedder", "hashing", str(EXAMPLE_DATA / "policies"), "--kb", "mysql://db/kb"]) == 1
    assert "mysql://db/kb: not a knowledge base's address" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_address_names_its_folder_or_none_for_a_database(tmp_path):
    assert check_address(tmp_path / "kb") == tmp_path / "kb" and check_address("kb") == Path("kb")
    assert check_address("postgresql://rag@db/kb") is None and check_address("postgres://db/kb") is None


def test_writing_holds_a_folders_writer_lock_and_nothing_for_a_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RetrievalError, match="no knowledge base at .*missing; build one with: agentic-rag index"):
        with writing(tmp_path / "missing"):
            pass
    taken = []

    def another_writer():
        try:
            with writer_lock(tmp_path / "kb", wait_s=0.1):
                taken.append("taken")
        except WriteConflict:
            taken.append("refused")

    with writing(tmp_path / "kb", create=True):
        thread = threading.Thread(target=another_writer)
        thread.start()
        thread.join()
    assert taken == ["refused"]
    with writing("postgresql://rag@127.0.0.1:1/kb"):  # nothing opened, no folder made of the URL
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["kb"]


def test_an_empty_kb_is_refused_before_a_lock_is_taken_anywhere(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["delete", "x", "--kb", ""]) == 1
    assert capsys.readouterr().err == ("agentic-rag: error: the knowledge base's folder is empty text; give a folder "
                                       "(str or Path) or a postgresql:// URL\n")
    assert list(tmp_path.iterdir()) == []  # no .lock in the working folder


def test_a_postgresql_url_opens_the_database_making_its_schema(pg_url):
    kb = open_kb(pg_url)  # a new, empty database: the schema is made
    assert type(kb) is PostgresKnowledgeBase and not kb.saves_to_folder and len(kb) == 0
    kb.add_documents(TINY)
    assert kb.save("anywhere") is None  # nothing to save: every write was committed
    other = open_kb("postgres://" + pg_url.removeprefix("postgresql://"))  # libpq's other scheme
    assert _ids(other) == _ids(kb) and other.generation(None) == kb.generation(None)
    other.close()
    with pytest.raises(ConfigurationError, match="was chunked with size 800 and overlap 100, not 300"):
        open_kb(pg_url, config=Config(chunk_size=300))
    with pytest.raises(ConfigurationError, match="not offered for it yet"):  # refused, not ignored
        open_kb(pg_url, extract_triples=lambda title, text: [])
    with pytest.raises(ConfigurationError, match="not offered"):
        open_kb(pg_url, graph_method="model:x")
    assert open_kb(pg_url, graph_method="names").graph_method == "names"


def test_the_command_line_asks_a_database_for_what_it_cannot_do_and_is_refused(capsys, pg_url):
    assert main(["index", "--embedder", "hashing",
                 str(EXAMPLE_DATA / "policies"), "--kb", pg_url, "--graph-model", "small-model"]) == 1
    assert "a graph by a model (extract_triples, --graph-model) is not offered" in capsys.readouterr().err
    assert open_kb(pg_url).document_count == 0  # nothing was written
    assert main(["compact", "--kb", "postgresql://nobody:s3cret@127.0.0.1:1/kb"]) == 1  # opened before it says
    err = capsys.readouterr().err                                                      # there is nothing to do
    assert "cannot connect to postgresql://nobody:***@127.0.0.1:1/kb" in err and "s3cret" not in err


# -- the protocol -----------------------------------------------------------------------------------


def _members(protocol) -> dict:
    """The protocol's own members (name -> what it declares): methods, properties and attributes."""
    declared = {name: value for name, value in vars(protocol).items() if not name.startswith("_")}
    declared["__len__"] = protocol.__len__
    return {**dict.fromkeys(protocol.__annotations__, "attribute"), **declared}


def _accepts(implemented, declared) -> bool:
    """Whether a (bound) method takes every call the protocol's signature allows: all its parameters
    by name, and its required ones alone."""
    params = list(inspect.signature(declared).parameters.values())[1:]  # not self
    given = inspect.signature(implemented)
    try:
        given.bind(**{p.name: None for p in params})
        given.bind(**{p.name: None for p in params if p.default is p.empty})
    except TypeError:
        return False
    return True


@pytest.fixture
def backends(pg_url, tiny_kb):
    database = open_kb(pg_url)
    database.add_documents(TINY)
    yield {"embedded": tiny_kb, "postgres": database, "restricted": tiny_kb.restricted({"type": "ticket"})}
    database.close()


def test_both_backends_implement_every_member_of_the_protocol(backends):
    members = _members(KnowledgeBaseBackend)
    assert {"save", "generation", "config", "embedder", "close", "graph_method", "saves_to_folder",
            "fusion", "held_documents", "__len__"} <= set(members)
    hints = typing.get_type_hints(KnowledgeBaseBackend)
    for label, kb in backends.items():
        assert isinstance(kb, KnowledgeBaseBackend), label
        for name, declared in members.items():
            value = getattr(kb, name)  # a property is read: it must work, not just exist
            if declared == "attribute":
                assert isinstance(value, hints[name]), (label, name, value)
            elif callable(declared) and not isinstance(declared, property):
                assert _accepts(value, declared), (label, name)
    assert [kb.saves_to_folder for kb in backends.values()] == [True, False, True]
    assert backends["postgres"].generation(None).startswith("pg-")


def test_a_backend_missing_a_member_is_no_backend(tiny_kb):
    assert isinstance(tiny_kb, KnowledgeBaseBackend)
    assert not isinstance(without(tiny_kb, "saves_to_folder"), KnowledgeBaseBackend)
    assert not _accepts(lambda directory, force: None, KnowledgeBaseBackend.save)  # a required extra
    assert not _accepts(lambda directory: None, KnowledgeBaseBackend.save)         # no compact
    assert _accepts(lambda *args, **kwargs: None, KnowledgeBaseBackend.save)
