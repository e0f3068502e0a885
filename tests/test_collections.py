"""Several knowledge bases in one server and keys with scopes, over real HTTP on 127.0.0.1: two
folders and one PostgreSQL database as collections, every endpoint under a scoped key (its filter
inside every search, its writes kept to its scope), the keys file read again when it changes,
chat models as collections, and one access line per request."""
import json
import logging
import re
import shutil
import time

import pytest

from agentic_rag import KnowledgeBase, OfflineModel
from agentic_rag.kb import Document
from agentic_rag.service import KeyRing, create_collections, legacy_scopes
from agentic_rag.service._keys import digest, write_keys_file
from test_service import Server

ACME, GLOBEX, HR, OPERATOR, STRANGER = ("acme-key-" + "a" * 16, "globex-key-" + "g" * 16, "hr-key-" + "h" * 16,
                                         "operator-" + "o" * 16, "stranger-" + "s" * 16)
DOCS = [Document("acme-plan", "The Zephyr launch code of Acme is 7731. Acme ships rockets on Tuesdays.",
                 title="Acme plan", metadata={"tenant": "acme"}),
        Document("globex-plan", "The Zephyr launch code of Globex is 9924. Globex ships rockets on Fridays.",
                 title="Globex plan", metadata={"tenant": "globex"}),
        Document("shared-faq", "Zephyr rockets need a launch code before they ship.", title="FAQ",
                 metadata={"tenant": ["acme", "globex"]})]
POLICY = [Document("hr-leave", "Annual leave is 30 days for the HR team.", title="Leave",
                   metadata={"groups": ["hr"]}),
          Document("all-leave", "Annual leave requests go through the portal for everyone.", title="Portal",
                   metadata={"groups": ["all", "hr"]}),
          Document("it-leave", "IT staff keep 5 days of annual leave for on-call weeks.", title="On call",
                   metadata={"groups": ["it"]})]


def _saved(folder, documents) -> None:
    """A knowledge base of `documents`, saved in `folder`."""
    kb = KnowledgeBase()
    kb.add_documents(documents)
    kb.save(folder)


def _entries():
    return [{"id": "acme", "sha256": digest(ACME), "read": ["docs", "sales"], "write": ["docs"],
             "filter": {"tenant": "acme"}},
            {"id": "globex", "sha256": digest(GLOBEX), "read": ["docs"], "filter": {"tenant": "globex"}},
            {"id": "hr", "sha256": digest(HR), "read": ["policy"], "write": ["policy"],
             "filter": {"groups": ["hr", "all"]}},
            {"id": "operator", "sha256": digest(OPERATOR), "read": ["*"], "write": ["*"]}]


@pytest.fixture
def collections(tmp_path, pg_url):
    """A server over two folders (docs, policy) and a PostgreSQL database (sales), with a keys file."""
    from agentic_rag.kb import open_kb

    for name, documents in (("docs", DOCS), ("policy", POLICY)):
        _saved(tmp_path / name, documents)
    sales = open_kb(pg_url)
    sales.add_documents([Document("acme-sales", "Acme sold 12 Zephyr rockets in March.", metadata={"tenant": "acme"}),
                         Document("globex-sales", "Globex sold 40 Zephyr rockets in March.",
                                  metadata={"tenant": "globex"})])
    keys_file = tmp_path / "keys.json"
    write_keys_file(keys_file, _entries())
    keys = KeyRing(file=keys_file, collections=["docs", "policy", "sales"])
    app = create_collections(OfflineModel(), {"docs": tmp_path / "docs", "policy": tmp_path / "policy",
                                              "sales": sales}, keys, state_dir=tmp_path / "state")
    server = Server(app)
    yield server, keys_file
    server.close()
    sales.close()


def test_a_key_sees_the_collections_it_may_read_and_a_model_for_each(collections):
    server, _ = collections
    status, _, listed = server.request("GET", "/v1/collections", key=ACME)
    assert status == 200 and listed["data"] == [{"name": "docs", "read": True, "write": True},
                                                {"name": "sales", "read": True, "write": False}]
    assert [m["id"] for m in server.request("GET", "/v1/models", key=HR)[2]["data"]] == ["policy"]
    assert [m["id"] for m in server.request("GET", "/v1/models", key=OPERATOR)[2]["data"]] == \
        ["docs", "policy", "sales"]
    assert server.request("GET", "/v1/collections")[0] == 401
    assert server.request("GET", "/v1/collections", key=STRANGER)[0] == 401
    # a collection the key may not read is as unknown as one that does not exist
    unknown = server.request("POST", "/v1/collections/policy/search", {"query": "leave"}, key=ACME)
    missing = server.request("POST", "/v1/collections/nowhere/search", {"query": "leave"}, key=ACME)
    assert unknown[0] == missing[0] == 404 and "policy" not in json.dumps(missing[2])
    many = server.request("POST", "/v1/ask", {"question": "launch code?"}, key=OPERATOR)
    assert many[0] == 404 and "/v1/collections/{name}/ask" in many[2]["error"]["message"]


@pytest.mark.parametrize("key", [ACME, GLOBEX])
def test_a_scoped_search_and_answer_keep_to_the_key_s_filter(collections, key):
    server, _ = collections
    mine, theirs = ("acme", "globex") if key == ACME else ("globex", "acme")
    for body in ({"query": "Zephyr launch code", "k": 10}, {"query": "Zephyr launch code", "mode": "bm25"},
                 {"query": f"launch code of {theirs}", "k": 10, "filters": {"tenant": theirs}}):
        status, _, found = server.request("POST", "/v1/collections/docs/search", body, key=key)
        assert status == 200 and all(theirs not in h["doc_id"] for h in found["hits"]), body
    assert {h["doc_id"] for h in server.request("POST", "/v1/collections/docs/search",
                                                {"query": "Zephyr launch code", "k": 10}, key=key)[2]["hits"]} == \
        {f"{mine}-plan", "shared-faq"}
    for cache in (True, True, False):  # the second is the first's cached reply
        status, _, reply = server.request("POST", "/v1/collections/docs/ask", {
            "question": f"What is the Zephyr launch code of {theirs.title()}?", "cache": cache}, key=key)
        text, secret = json.dumps(reply), "9924" if key == ACME else "7731"
        assert status == 200 and secret not in text and f"{theirs}-plan" not in text, reply
        # the question names a tenant the key's scope holds nowhere: refused as unmentioned, not answered
        # with the key's own tenant's code
        assert reply["abstained"] and reply["stop_reason"] == "unmentioned", reply
        assert f"never mention {theirs.title()}" in reply["answer"] and reply["citations"] == []
    question = f"What is the Zephyr launch code of {theirs.title()}?"
    streamed = server.request("POST", "/v1/collections/docs/ask", {"question": question, "stream": True}, key=key)[2]
    chat = server.request("POST", "/v1/chat/completions", {"model": "docs", "stream": True, "messages": [
        {"role": "user", "content": question}]}, key=key)[2]
    for text in (streamed, chat):
        assert "event: done" in text or "[DONE]" in text
        assert secret not in text and f"{theirs}-plan" not in text
    sales = server.request("POST", "/v1/collections/sales/search", {"query": "Zephyr rockets sold"}, key=ACME)[2]
    assert [h["doc_id"] for h in sales["hits"]] == ["acme-sales"]  # the database keeps to the filter too


def test_an_any_of_filter_matches_documents_in_several_groups(collections):
    server, _ = collections
    hits = server.request("POST", "/v1/collections/policy/search", {"query": "annual leave", "k": 10}, key=HR)[2]
    assert sorted(h["doc_id"] for h in hits["hits"]) == ["all-leave", "hr-leave"]
    everyone = server.request("POST", "/v1/collections/policy/search", {"query": "annual leave", "k": 10},
                              key=OPERATOR)[2]
    assert len(everyone["hits"]) == 3


def test_writes_keep_to_the_key_s_scope(collections):
    server, _ = collections
    add = lambda key, *documents, where="docs": server.request(  # noqa: E731
        "POST", f"/v1/collections/{where}/documents", {"documents": list(documents)}, key=key)
    assert add(ACME, {"id": "acme-note", "text": "Acme moved the Zephyr launch to Wednesday."})[0] == 200
    hits = server.request("POST", "/v1/collections/docs/search", {"query": "Zephyr launch Wednesday", "k": 10},
                          key=OPERATOR)[2]["hits"]
    assert next(h for h in hits if h["doc_id"] == "acme-note")["metadata"]["tenant"] == "acme"  # written in
    refused = add(ACME, {"id": "sneaky", "text": "x", "metadata": {"tenant": "globex"}})
    assert refused[0] == 403 and "'tenant' is 'acme'" in refused[2]["error"]["message"]
    cached = server.request("POST", "/v1/collections/docs/ask", {"question": "When does Acme ship?"}, key=ACME)[2]
    taken = add(ACME, {"id": "globex-plan", "text": "Globex has no launch code."})
    assert taken[0] == 403 and "taken outside the key's scope" in taken[2]["error"]["message"]
    again = server.request("POST", "/v1/collections/docs/ask", {"question": "When does Acme ship?"}, key=ACME)[2]
    assert not cached["cached"] and again["cached"]  # a refused write changed nothing: the cache stands
    # a document may not reach past the writer's scope: a list value must lie wholly inside it
    spread = add(ACME, {"id": "acme-spread", "text": "x", "metadata": {"tenant": ["acme", "globex"]}})
    assert spread[0] == 403 and "'tenant' is 'acme'" in spread[2]["error"]["message"]
    assert add(ACME, {"id": "acme-list", "text": "Acme only.", "metadata": {"tenant": ["acme"]}})[0] == 200
    # the FAQ both tenants share is neither replaced nor deleted by one of them
    assert add(ACME, {"id": "shared-faq", "text": "Acme took the FAQ."})[0] == 403
    assert server.request("DELETE", "/v1/collections/docs/documents/shared-faq", key=ACME)[0] == 404
    assert add(GLOBEX, {"id": "g", "text": "x"})[0] == 403              # reads docs, writes nothing
    assert add(HR, {"id": "p", "text": "Parental leave is 20 weeks."}, where="policy")[0] == 403  # any of: must say
    assert add(HR, {"id": "p", "text": "Parental leave is 20 weeks.", "metadata": {"groups": ["all"]}},
               where="policy")[0] == 200
    # a document outside the scope cannot be deleted, and is as unknown as a missing one
    assert server.request("DELETE", "/v1/collections/docs/documents/globex-plan", key=ACME)[0] == 404
    assert server.request("DELETE", "/v1/collections/docs/documents/acme-note", key=ACME)[0] == 200
    assert server.request("POST", "/v1/collections/docs/search", {"query": "Globex launch code 9924"},
                          key=GLOBEX)[2]["hits"][0]["doc_id"] == "globex-plan"


def test_chat_names_the_collection_as_its_model_and_keeps_conversations_to_the_scope(collections):
    server, _ = collections
    asked = {"model": "docs", "messages": [{"role": "user", "content": "What is the Zephyr launch code of Acme?"}],
             "conversation": True}
    status, _, reply = server.request("POST", "/v1/chat/completions", asked, key=ACME)
    assert status == 200 and reply["model"] == "docs" and "7731" in reply["choices"][0]["message"]["content"]
    conversation = reply["agentic_rag"]["conversation_id"]
    follow = {"model": "docs", "conversation_id": conversation,
              "messages": [{"role": "user", "content": "And on which day does it ship?"}]}
    assert server.request("POST", "/v1/chat/completions", follow, key=GLOBEX)[0] == 404  # another key's
    assert server.request("POST", "/v1/chat/completions", dict(follow, model="sales"), key=ACME)[0] == 404
    assert server.request("POST", "/v1/chat/completions", follow, key=ACME)[0] == 200
    assert server.request("POST", "/v1/chat/completions", dict(asked, model="policy"), key=ACME)[2]["error"][
        "type"] == "model_not_found"


def test_the_keys_file_is_read_again_when_it_changes_and_a_bad_one_keeps_the_last(collections, caplog):
    server, keys_file = collections
    assert server.request("GET", "/v1/collections", key=STRANGER)[0] == 401
    write_keys_file(keys_file, _entries() + [{"id": "stranger", "sha256": digest(STRANGER), "read": ["policy"]}])
    assert [c["name"] for c in server.request("GET", "/v1/collections", key=STRANGER)[2]["data"]] == ["policy"]
    typo = dict(_entries()[1], read=["dcos"])  # a grant of no collection here: it grants nothing, the rest stands
    write_keys_file(keys_file, [typo] + [e for e in _entries() if e["id"] != "globex"] +
                    [{"id": "stranger", "sha256": digest(STRANGER), "read": ["policy"]}])
    assert server.request("GET", "/v1/collections", key=GLOBEX)[2]["data"] == []
    assert server.request("GET", "/v1/collections", key=STRANGER)[0] == 200
    keys_file.write_text("{not json")
    with caplog.at_level(logging.ERROR, logger="agentic_rag.service"):
        assert server.request("GET", "/v1/collections", key=STRANGER)[0] == 200
    assert "keys file not read again" in caplog.text
    write_keys_file(keys_file, _entries())  # the stranger's key is taken away
    assert server.request("GET", "/v1/collections", key=STRANGER)[0] == 401
    write_keys_file(keys_file, [])  # every key taken away: no one gets in, the server is not opened
    for key in (None, ACME):
        assert server.request("POST", "/v1/collections/docs/search", {"query": "launch code"}, key=key)[0] == 401


def test_metrics_are_for_an_operator_key_and_each_request_has_an_access_line(collections, caplog):
    server, _ = collections
    with caplog.at_level(logging.INFO, logger="agentic_rag.access"):
        assert server.request("GET", "/metrics", key=ACME)[0] == 403
        assert server.request("GET", "/metrics", key=OPERATOR)[0] == 200
        server.request("POST", "/v1/collections/docs/search", {"query": "launch"}, key=ACME)
        for _ in range(6000):  # a line is written once the server has sent the reply's last byte (60 s at most)
            if len(lines := [r.getMessage() for r in caplog.records if r.name == "agentic_rag.access"]) == 3:
                break
            time.sleep(0.01)
    refused = next(line for line in lines if '"GET /metrics HTTP/1.1" 403 ' in line)  # written by the server's
    searched = next(line for line in lines if '"POST /v1/collections/docs/search HTTP/1.1" 200 ' in line)  # threads
    assert re.fullmatch(r'127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] '  # the Common Log Format
                        r'"POST /v1/collections/docs/search HTTP/1\.1" 200 \d+ collection=docs key=acme \d+\.\dms',
                        searched), searched
    assert " collection=- key=acme " in refused
    assert not any(ACME in line for line in lines)
    assert server.request("GET", "/healthz")[2] == {"status": "ok", "collections": 3}
    wrong = server.request("GET", "/v1/collections/docs/documents", key=ACME)[2]["error"]["message"]
    assert wrong == "GET /v1/collections/docs/documents: use POST"  # the path sent, not the collection's own
    deep = server.request("POST", "/v1/chat/completions", raw=b"[" * 100_000, key=ACME)
    assert deep[0] == 400 and deep[2]["error"]["type"] == "invalid_request"  # not a traceback
    paths = server.request("GET", "/openapi.json")[2]["paths"]
    assert [p["name"] for p in paths["/v1/collections/{name}/documents/{id}"]["delete"]["parameters"]] == ["name",
                                                                                                           "id"]


def test_an_access_line_gives_the_request_as_sent_and_nothing_can_forge_a_line():
    from agentic_rag.service._collections import access_line

    seen = {"status": "200", "collection": "docs", "key": "acme"}
    sent = {"REQUEST_METHOD": "DELETE", "REQUEST_URI": "/v1/documents/a%2Fb%20c", "PATH_INFO": "/v1/documents/a/b c",
            "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "10.0.0.1"}
    assert '"DELETE /v1/documents/a%2Fb%20c HTTP/1.1" 200 12 ' in access_line(sent, seen, 12, 0.01)
    forged = dict(sent, REQUEST_URI='/x" 200 1\n10.0.0.9 - - [x] "GET / HTTP/1.1')
    line = access_line(forged, seen, 0, 0.01)
    assert "\n" not in line and line.count('"') == 2 and '"DELETE /x\\x22\\x20200\\x201\\x0a10.0.0.9' in line, line


def test_one_collection_keeps_the_paths_and_keys_of_one_knowledge_base(tmp_path):
    _saved(tmp_path / "kb", DOCS)
    app = create_collections(OfflineModel(), {"default": tmp_path / "kb"}, KeyRing(legacy_scopes([ACME], [])))
    server = Server(app)
    try:
        assert server.request("POST", "/v1/search", {"query": "Zephyr"}, key=ACME)[0] == 200
        assert server.request("POST", "/v1/search", {"query": "Zephyr"})[0] == 401
        assert server.request("GET", "/healthz")[2]["documents"] == 3
        chat = {"model": "agentic-rag", "messages": [{"role": "user", "content": "What is the launch code of Acme?"}]}
        assert server.request("POST", "/v1/chat/completions", chat, key=ACME)[2]["model"] == "agentic-rag"
        assert [m["id"] for m in server.request("GET", "/v1/models", key=ACME)[2]["data"]] == ["agentic-rag"]
        chat["model"] = "default"  # the collection's own name is still taken, though not listed
        assert server.request("POST", "/v1/chat/completions", chat, key=ACME)[0] == 200
        chat["model"] = "nosuch"
        status, _, reply = server.request("POST", "/v1/chat/completions", chat, key=ACME)
        assert (status, reply["error"]["message"]) == (404, "model 'nosuch' does not exist; use 'agentic-rag'")
        assert server.request("POST", "/v1/documents", {"documents": [{"id": "x", "text": "y"}]},
                              key=ACME)[0] == 403  # a read key
    finally:
        server.close()
    shutil.rmtree(tmp_path / "kb")


def test_two_server_processes_share_collections_keys_and_conversations(tmp_path):
    import subprocess
    import sys

    from helpers import start_service, stop_service

    for name, documents in (("docs", DOCS), ("policy", POLICY)):
        _saved(tmp_path / name, documents)
    (tmp_path / "collections.json").write_text(json.dumps({"collections": {"policy": "policy"}}))
    keys_file = tmp_path / "keys.json"
    write_keys_file(keys_file, [dict(_entries()[0], read=["docs"])])
    flags = ["--kb", f"docs={tmp_path / 'docs'}", "--collections", str(tmp_path / "collections.json"),
             "--keys-file", str(keys_file), "--state-dir", str(tmp_path / "state")]
    started = [start_service(flags[1], tmp_path, name, *flags[2:]) for name in ("a", "b")]
    try:
        a, b = (object.__new__(Server) for _ in range(2))
        a.port, b.port = started[0][1], started[1][1]
        asked = {"model": "docs", "conversation": True,
                 "messages": [{"role": "user", "content": "What is the Zephyr launch code of Acme?"}]}
        reply = a.request("POST", "/v1/chat/completions", asked, key=ACME)[2]
        follow = {"model": "docs", "conversation_id": reply["agentic_rag"]["conversation_id"],
                  "messages": [{"role": "user", "content": "On which day does it ship?"}]}
        assert b.request("POST", "/v1/chat/completions", follow, key=ACME)[0] == 200  # the other worker's turn
        note = {"documents": [{"id": "acme-memo", "text": "Acme keeps spare Zephyr fins in Depot 9."}]}
        assert a.request("POST", "/v1/collections/docs/documents", note, key=ACME)[0] == 200
        hits = b.request("POST", "/v1/collections/docs/search", {"query": "spare Zephyr fins"}, key=ACME)[2]["hits"]
        assert hits[0]["doc_id"] == "acme-memo" and hits[0]["metadata"]["tenant"] == "acme"
        added = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "keys", "add", "--file", str(keys_file),
                                "--id", "hr", "--read", "policy", "--filter", '{"groups": "hr"}'],
                               capture_output=True, text=True, check=True)
        new_key = added.stdout.strip()
        for server in (a, b):  # both read the changed file
            found = server.request("POST", "/v1/collections/policy/search", {"query": "annual leave", "k": 5},
                                   key=new_key)[2]["hits"]
            assert sorted(h["doc_id"] for h in found) == ["all-leave", "hr-leave"]
            assert server.request("GET", "/v1/collections", key=new_key)[2]["data"][0]["name"] == "policy"
    finally:
        for process, _ in started:
            stop_service(process)
    log = (tmp_path / "a.log").read_text()
    assert "serving 2 collections (docs, policy)" in log and ACME not in log


def test_serve_flags_name_collections_and_refuse_bad_ones(tmp_path):
    from types import SimpleNamespace

    from agentic_rag.cli._settings import serve_collections
    from agentic_rag.core._errors import ConfigurationError

    def named(kb=None, collections=None):
        return serve_collections(SimpleNamespace(kb=kb, collections=collections))

    assert named(["kb"]) == {"default": "kb"}
    assert named(["docs=a", "sales=postgresql://u@h/db?sslmode=require"]) == {
        "docs": "a", "sales": "postgresql://u@h/db?sslmode=require"}
    (tmp_path / "c.json").write_text(json.dumps({"collections": {"hr": "hr", "db": "postgresql://h/db"}}))
    assert named(["docs=a"], str(tmp_path / "c.json")) == {"docs": "a", "hr": str(tmp_path / "hr"),
                                                           "db": "postgresql://h/db"}
    for kb, collections, message in ((["a", "b"], None, "name each, --kb NAME=DIR"),
                                     (["x=a", "x=b"], None, "collection 'x' is named twice"),
                                     (None, None, "give the knowledge base to serve"),
                                     (None, str(tmp_path / "none.json"), "cannot read --collections"),
                                     (None, str(tmp_path / "c.json") + "x", "cannot read")):
        with pytest.raises(ConfigurationError, match=message):
            named(kb, collections)
    (tmp_path / "bad.json").write_text('{"collections": ["a"]}')
    with pytest.raises(ConfigurationError, match='write {"collections": {"NAME": "DIR or URL"}}'):
        named(None, str(tmp_path / "bad.json"))


def test_a_keys_file_entry_that_is_wrong_is_one_line_naming_it(tmp_path):
    from agentic_rag.core._errors import ConfigurationError
    from agentic_rag.service._keys import read_keys_file

    good = {"id": "a", "sha256": digest(ACME), "read": ["docs"]}
    for entry, message in (({**good, "sha256": "abc"}, "64 lowercase hex digits"),
                           ({**good, "id": "a b"}, "'id' must be 1-64 letters"),
                           ({**good, "read": "docs"}, "'read' must be a list"),
                           ({**good, "read": ["nowhere"]}, "no collection 'nowhere'"),
                           ({**good, "filter": {"tenant": {"like": "a"}}}, "unknown range operators"),
                           ({**good, "admin": True}, "unknown fields"),
                           ({"id": "a", "sha256": digest(ACME)}, "grants nothing")):
        write_keys_file(tmp_path / "k.json", [entry])
        with pytest.raises(ConfigurationError, match=message):
            read_keys_file(tmp_path / "k.json", frozenset({"docs"}))
    write_keys_file(tmp_path / "k.json", [good, {**good, "id": "b"}])
    with pytest.raises(ConfigurationError, match="given twice"):
        read_keys_file(tmp_path / "k.json")


def test_the_leak_check_finds_no_leak_and_would_find_one(pg_url, tmp_path):
    from agentic_rag.eval import leak_check

    report = leak_check.run(scopes=3, docs=6, count=3, backends=("embedded", "postgres"), postgres_url=pg_url)
    assert report["leaks"] == 0, report["runs"]["cache_on"]["leak_examples"]
    for run in report["runs"].values():
        statuses = run["statuses"]
        assert run["checked"] >= 250 and sum(run["writes"].values()) > 0 and set(run["writes"]) == {"200"}
        rest = {s.rsplit(" ", 1)[1] for s in statuses if not s.startswith("mcp ")}
        assert rest == {"200"}, statuses  # every request answered
        for what in ("ask", "ask stream", "search", "search filtered", "chat", "chat stream", "chat follow-up"):
            assert statuses[f"{what} 200"] > 0, what
        # the MCP client: every tool and resource call answered, but another tenant's documents, by id
        mcp = {s: n for s, n in statuses.items() if s.startswith("mcp ")}
        assert {s for s in mcp if s.endswith(" error")} == {"mcp get_document error", "mcp read_resource error"}
        assert mcp["mcp get_document error"] == mcp["mcp read_resource error"] == 2 * 4 * 2  # 2 ids, keys, places
        for what in ("search", "ask", "list_documents", "get_document", "list_resources", "read_resource"):
            assert mcp[f"mcp {what} ok"] > 0, what
    # the check is not blind: the same corpus read with a key that has no filter shows the other tenants
    planted = leak_check.Planted()
    documents = leak_check.corpus(3, 6, 7, planted)
    _saved(tmp_path / "kb", documents)
    app = create_collections(OfflineModel(), {"folder": tmp_path / "kb"}, KeyRing(legacy_scopes([OPERATOR], [])))
    server = Server(app)
    try:
        client = leak_check.Client(server.port, planted)
        client.call("POST", "/v1/collections/folder/search", {"query": "vault code of project Falcon", "k": 10},
                    OPERATOR, frozenset({"tenant0"}), "search")
        assert client.leaks and {leak["token"].split("-")[0] for leak in client.leaks} >= {"tenant1", "tenant2"}
        client.leaks.clear()  # and so is its MCP client
        leak_check.mcp_every_way(client, {"key": OPERATOR, "allowed": frozenset({"tenant0"})}, "folder",
                                 ["What is the vault code of project Falcon?"], ["tenant1"])
        assert {leak["what"] for leak in client.leaks} >= {"mcp search", "mcp ask", "mcp get_document"}
    finally:
        server.close()


def test_a_scoped_answer_does_not_tell_a_word_only_another_scope_holds_from_one_nobody_holds(collections):
    server, _ = collections

    def asked(number: str) -> str:
        reply = server.request("POST", "/v1/collections/docs/ask", {
            "question": f"Which Acme rocket unlocks {number}?", "cache": False}, key=ACME)[2]
        said = [reply["answer"], reply["abstain_reason"] or "", *(e["summary"] for e in reply["trace"]),
                *(json.dumps(e["detail"], sort_keys=True) for e in reply["trace"] if e["step"] == "verify")]
        return "\n".join(said).replace(number, "N")

    assert asked("9924") == asked("9921")  # 9924 is Globex's launch code; 9921 is held nowhere


@pytest.mark.parametrize("name", ["keys.json", ".keys.json"])
def test_keys_add_leaves_one_hidden_lock_file_that_the_ignore_file_matches(tmp_path, capsys, name):
    import subprocess

    from agentic_rag.cli import main
    from helpers import ROOT

    assert main(["keys", "add", "--file", str(tmp_path / name), "--id", "ops", "--write", "*"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({name, ".keys.json.lock"})
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q", ".keys.json.lock"], cwd=ROOT)
    assert ignored.returncode == 0  # the project's own .gitignore, where the docs make the keys file
