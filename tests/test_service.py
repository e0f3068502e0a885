"""The HTTP service, tested as clients use it: a real waitress server on 127.0.0.1 (a free port),
real HTTP (http.client, and the openai SDK for chat completions), every endpoint and error status,
keys, limits, the cache and its invalidation by a write, SSE framing, and two server processes
sharing one knowledge-base folder."""
import http.client
import json
import re
import threading
import time
from pathlib import Path

import pytest

from agentic_rag import KnowledgeBase, OfflineModel, RunConfig, ScriptedModel
from agentic_rag.kb import load_documents, writer_lock
from agentic_rag.service import ServiceLimits, create_app, keys_from
from agentic_rag.service._server import create_server
from helpers import EXAMPLE_DATA, ROOT, start_service, stop_service

QUESTION = "登录报错的问题在 2.3.1 版本里修复了吗？"
READ, WRITE = "r" * 20, "w" * 20


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("service") / "kb"
    kb = KnowledgeBase()
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    kb.save(folder)
    return folder


class Server:
    """An app served as `serve` serves it (guarded waitress) in a thread on 127.0.0.1, and a tiny
    JSON client for it."""

    def __init__(self, app):
        self.app = app
        self.server = create_server(app, "127.0.0.1", 0, 8, app.limits.max_body_bytes)
        self.port = self.server.effective_port
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def request(self, method: str, path: str, body=None, key: str | None = None, raw: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, object]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = dict(headers or {})
        if key:
            sent["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        kind = response.getheader("Content-Type", "")
        parsed = json.loads(payload) if kind.startswith("application/json") and payload else payload.decode()
        return response.status, response.headers, parsed

    def close(self):
        self.server.close()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the server's loop did not stop"


@pytest.fixture
def served(kb_dir, tmp_path):
    """A server over a fresh copy of the example knowledge base, with read and write keys."""
    import shutil

    folder = tmp_path / "kb"
    shutil.copytree(kb_dir, folder)
    server = Server(create_app(OfflineModel(), kb_dir=folder, read_keys=[READ], write_keys=[WRITE]))
    yield server, folder
    server.close()


def test_ask_answers_with_citations_and_the_generation_then_from_the_cache(served):
    server, folder = served
    status, _, reply = server.request("POST", "/v1/ask", {"question": QUESTION}, key=READ)
    assert status == 200 and "认证超时" in reply["answer"] and reply["citations"] and not reply["cached"]
    assert reply["generation"] == "gen-000001" and reply["stop_reason"] == "sufficient"
    assert set(reply) >= {"trace_line", "usage", "abstain_reason", "rounds", "model"}
    again = server.request("POST", "/v1/ask", {"question": "  " + QUESTION.upper() + " "}, key=READ)[2]
    assert again["cached"] and again["answer"] == reply["answer"]       # the normalised question hits
    fresh = server.request("POST", "/v1/ask", {"question": QUESTION, "cache": False}, key=READ)[2]
    assert not fresh["cached"]
    metrics = server.request("GET", "/metrics", key=READ)[2]
    assert 'agentic_rag_cache_total{result="hit"} 1.0' in metrics
    assert 'agentic_rag_requests_total{endpoint="/v1/ask",status="200"} 3.0' in metrics
    assert 'agentic_rag_answers_total{abstained="false",stop_reason="sufficient"} 2.0' in metrics
    assert "agentic_rag_request_seconds_bucket" in metrics and "agentic_rag_tokens_total" in metrics


def test_a_write_is_saved_before_the_reply_and_invalidates_the_cache(served):
    server, folder = served
    question = "What colour is the Nimbus mascot?"
    before = server.request("POST", "/v1/ask", {"question": question}, key=READ)[2]
    assert before["abstained"]
    document = {"id": "mascot.md", "text": "The Nimbus mascot is a teal cloud named Puff.", "title": "Mascot"}
    status, _, written = server.request("POST", "/v1/documents", {"documents": [document]}, key=WRITE)
    assert status == 200 and written["added"] == 1 and written["generation"] == "gen-000002"
    assert KnowledgeBase.load(folder).search("mascot Puff", k=1)[0].doc_id == "mascot.md"  # saved already
    after = server.request("POST", "/v1/ask", {"question": question}, key=READ)[2]
    assert not after["cached"] and "teal" in after["answer"] and after["generation"] == "gen-000002"
    status, _, deleted = server.request("DELETE", "/v1/documents/mascot.md", key=WRITE)
    assert status == 200 and deleted["deleted"] == 1 and deleted["generation"] == "gen-000003"
    assert server.request("DELETE", "/v1/documents/mascot.md", key=WRITE)[0] == 404
    hits = server.request("POST", "/v1/search", {"query": "mascot Puff", "k": 3}, key=READ)[2]
    assert "mascot.md" not in [h["doc_id"] for h in hits["hits"]] and hits["generation"] == "gen-000003"


def test_files_are_uploaded_in_base64_and_answers_cite_their_page(served):
    import base64

    server, _ = served
    pdf = ROOT / "tests" / "fixtures" / "docs" / "shared-mime-info-spec.pdf"
    upload = {"id": "spec", "filename": "spec.pdf", "file": base64.b64encode(pdf.read_bytes()).decode()}
    status, _, written = server.request("POST", "/v1/documents", {"documents": [upload]}, key=WRITE)
    assert status == 200 and written["added"] == 1 and written["chunks"] > 17
    reply = server.request("POST", "/v1/ask", {"question": "Which extended attribute can hold a file's MIME type?"},
                           key=READ)[2]
    assert "user.mime_type" in reply["answer"] and 14 in [c["page"] for c in reply["citations"]]
    picture = {"id": "dock.png", "file": base64.b64encode(b"\x89PNG fake").decode(), "text": "Dock 4 map"}
    assert server.request("POST", "/v1/documents", {"documents": [picture]}, key=WRITE)[0] == 200
    for document, message in [
            ({"id": "s.pdf", "file": base64.b64encode(b"%PDF-1.4 not a PDF past its header").decode()},
             "not a readable PDF"),
            ({"id": "x.pdf", "file": "not base64!"}, "'file' is not base64"),
            ({"id": "p.png", "file": base64.b64encode(b"png").decode()}, "give its description in 'text'"),
            ({"id": "t.txt", "file": base64.b64encode("café".encode("latin-1")).decode()}, "not UTF-8 text"),
            ({"id": "both", "text": "a", "file": "YQ==", "filename": "a.md"}, "not both"),
            ({"id": "none"}, "neither text nor a file")]:
        status, _, error = server.request("POST", "/v1/documents", {"documents": [document]}, key=WRITE)
        assert status == 400 and message in error["error"]["message"], (document["id"], error)


def test_an_upload_is_read_from_its_bytes_alone_and_bounded_in_size(served):
    import base64

    server, _ = served
    server.app.limits = ServiceLimits(max_file_bytes=2_000)
    page = "# Notes\n\n![x](/etc/passwd)\n![y](../../../../../etc/passwd)\n\nThe dock opens at six."
    html = "<p>Dock hours.</p><img src='/etc/passwd' alt='p'><img src='file:///etc/passwd' alt='q'>"
    uploads = [{"id": "md", "filename": "../../etc/passwd.md", "file": base64.b64encode(page.encode()).decode()},
               {"id": "html", "filename": "/etc/passwd.html", "file": base64.b64encode(html.encode()).decode()},
               {"id": "bare", "filename": "/etc/passwd", "file": base64.b64encode(b"x").decode()}]
    status, _, error = server.request("POST", "/v1/documents", {"documents": uploads[2:]}, key=WRITE)
    assert status == 400 and "(passwd): unsupported file type" in error["error"]["message"]
    lines = {"id": "lines", "filename": "t.jsonl", "file": base64.b64encode(b'{"id": "a", "text": "b"}').decode()}
    status, _, error = server.request("POST", "/v1/documents", {"documents": [lines]}, key=WRITE)
    assert status == 400 and "a .jsonl file holds many documents" in error["error"]["message"], error
    status, _, written = server.request("POST", "/v1/documents", {"documents": uploads[:2]}, key=WRITE)
    assert status == 200 and written["added"] == 2
    hits = server.request("POST", "/v1/search", {"query": "root passwd dock", "k": 10}, key=READ)[2]["hits"]
    ours = {h["doc_id"]: h for h in hits if h["doc_id"] in ("md", "html")}
    assert set(ours) == {"md", "html"} and not any("root:" in h["text"] for h in hits)
    assert ours["md"]["source"] == "../../etc/passwd.md"         # the name given is a label, never opened
    big = {"id": "big.txt", "file": base64.b64encode(b"a" * 2_001).decode()}
    status, _, error = server.request("POST", "/v1/documents", {"documents": [big]}, key=WRITE)
    assert status == 413 and "2,001 bytes; the limit is 2,000" in error["error"]["message"]
    just = {"id": "just.txt", "file": base64.b64encode(b"a" * 2_000).decode()}
    assert server.request("POST", "/v1/documents", {"documents": [just]}, key=WRITE)[0] == 200


def test_uploads_are_read_one_request_at_a_time(served):
    import base64

    server, _ = served
    server.app.limits = ServiceLimits(write_wait_s=0.2)
    upload = {"documents": [{"id": "one.md", "file": base64.b64encode(b"# One\n\nSent meanwhile.").decode()}]}
    text = {"documents": [{"id": "two", "text": "a text document: no file to read"}]}
    with server.app.documents.reading:  # what another request's files being read holds
        status, headers, reply = server.request("POST", "/v1/documents", upload, key=WRITE)
        assert server.request("POST", "/v1/documents", text, key=WRITE)[2]["added"] == 1  # text waits for nothing
    assert (status, reply["error"]["type"], headers["Retry-After"]) == (503, "unavailable", "5"), reply
    assert "other uploads have been read for 0.2 s" in reply["error"]["message"]
    assert server.request("POST", "/v1/documents", upload, key=WRITE)[2]["added"] == 1   # once they are read


def test_an_uploaded_docx_may_unpack_to_the_service_limit_and_no_more(served, tmp_path):
    import base64

    from agentic_rag.eval.hostile_files import write_docx, zip_bomb

    server, _ = served
    limit = ServiceLimits().max_file_bytes                  # the default, lower than index's own
    zip_bomb(tmp_path / "bomb.docx", limit + 1_000_000)      # about 20 KB that unpack past it
    packed = (tmp_path / "bomb.docx").read_bytes()
    assert len(packed) < 100_000
    upload = {"id": "bomb", "filename": "bomb.docx", "file": base64.b64encode(packed).decode()}
    status, _, error = server.request("POST", "/v1/documents", {"documents": [upload]}, key=WRITE)
    assert status == 400 and "a .docx that unpacks to 11,000," in error["error"]["message"], error
    assert f"past the file-size limit of {limit:,} bytes" in error["error"]["message"]
    def body(write):  # a paragraph of text, then 3 MB of spaces: three unpack to the limit together, four past it
        write("<w:p><w:r><w:t>dock hours</w:t></w:r></w:p><w:p><w:r><w:t>" + " " * 3_000_000 + "</w:t></w:r></w:p>")
    write_docx(tmp_path / "part.docx", body)
    part = base64.b64encode((tmp_path / "part.docx").read_bytes()).decode()
    parts = [{"id": f"part-{n}", "filename": "part.docx", "file": part} for n in range(4)]
    status, _, error = server.request("POST", "/v1/documents", {"documents": parts}, key=WRITE)
    assert status == 413 and "files pass 10,000,000 bytes together" in error["error"]["message"], error
    assert server.request("POST", "/v1/documents", {"documents": parts[:2]}, key=WRITE)[0] == 200



def test_uploaded_gz_files_count_as_decompressed_against_the_limit(served):
    import base64
    import gzip

    server, _ = served
    limit = ServiceLimits().max_file_bytes
    text = b"dock hours are nine to five.\n" + b" " * (limit * 4 // 10)  # 40% of the limit each, decompressed
    packed = base64.b64encode(gzip.compress(text)).decode()
    assert len(packed) < 100_000
    parts = [{"id": f"notes-{n}", "filename": "notes.txt.gz", "file": packed} for n in range(3)]
    status, _, error = server.request("POST", "/v1/documents", {"documents": parts}, key=WRITE)
    assert status == 413 and "a .gz as decompressed" in error["error"]["message"], error
    assert server.request("POST", "/v1/documents", {"documents": parts[:2]}, key=WRITE)[0] == 200
    bomb = base64.b64encode(gzip.compress(b" " * (limit + 1))).decode()
    upload = {"id": "bomb", "filename": "bomb.txt.gz", "file": bomb}
    status, _, error = server.request("POST", "/v1/documents", {"documents": [upload]}, key=WRITE)
    assert status == 400 and "decompresses to more than" in error["error"]["message"], error

def test_search_and_filters(served):
    server, _ = served
    status, _, found = server.request("POST", "/v1/search", {"query": "违约责任", "k": 2, "mode": "bm25"}, key=READ)
    assert status == 200 and len(found["hits"]) == 2 and {"id", "doc_id", "score", "ranks"} <= set(found["hits"][0])
    only = server.request("POST", "/v1/search", {"query": "违约责任", "filters": {"type": "ticket"}}, key=READ)[2]
    assert only["hits"] and all(h["metadata"].get("type") == "ticket" for h in only["hits"])
    asked = server.request("POST", "/v1/ask", {"question": QUESTION, "filters": {"doc_id": ["NT-1057"]}},
                           key=READ)[2]
    assert {c["doc_id"] for c in asked["citations"]} <= {"NT-1057"}


def test_a_filter_is_bounded_by_every_value_it_holds(served):
    server, _ = served
    bound_list = {"doc_id": {"gte": list(range(100_000))}}                 # 688 KB, under the body limit
    lists = {f"f{i}": {"gte": list(range(100))} for i in range(1_000)}      # 1,000 lists of 100 values
    bounds = {f"f{i}": {"gte": 0, "lte": 9} for i in range(501)}            # 1,002 bounds
    for path, field in (("/v1/search", "query"), ("/v1/ask", "question")):
        for filters, message in ((bound_list, "'gte' bound is a list"), (lists, "'f0': its 'gte' bound is a list"),
                                 (bounds, "hold 1002 values")):
            status, _, body = server.request("POST", path, {field: QUESTION, "filters": filters}, key=READ)
            assert status == 400 and body["error"]["type"] == "invalid_request", (path, status, body)
            assert message in body["error"]["message"] and len(body["error"]["message"]) < 300
    ids = [f"NT-{n}" for n in range(1_000, 1_999)] + ["NT-1057"]            # 1,000 members: at the limit
    found = server.request("POST", "/v1/search", {"query": QUESTION, "filters": {"doc_id": ids}}, key=READ)[2]
    assert found["hits"] and {h["doc_id"] for h in found["hits"]} <= set(ids)
    status, _, asked = server.request("POST", "/v1/ask", {"question": "2026 年的工单里登录报错修复了吗？",   # the route
                                                          "filters": {"doc_id": ids}}, key=READ)    # adds its own
    assert status == 200 and {c["doc_id"] for c in asked["citations"]} <= set(ids), asked


@pytest.mark.parametrize("method, path, body, key, status, kind", [
    ("POST", "/v1/ask", {"question": QUESTION}, None, 401, "unauthorized"),
    ("POST", "/v1/ask", {"question": QUESTION}, "x" * 20, 401, "unauthorized"),
    ("POST", "/v1/documents", {"documents": [{"id": "a", "text": "b"}]}, READ, 403, "forbidden"),
    ("DELETE", "/v1/documents/a", None, READ, 403, "forbidden"),
    ("GET", "/metrics", None, None, 401, "unauthorized"),
    ("POST", "/v1/ask", {"question": ""}, READ, 400, "invalid_request"),
    ("POST", "/v1/ask", {"question": "x" * 2001}, READ, 400, "invalid_request"),
    ("POST", "/v1/ask", {"question": QUESTION, "unknown": 1}, READ, 400, "invalid_request"),
    ("POST", "/v1/ask", {"question": QUESTION, "settings": {"max_rounds": 0}}, READ, 400, "invalid_request"),
    ("POST", "/v1/ask", [QUESTION], READ, 400, "invalid_request"),
    ("POST", "/v1/search", {"query": "x", "mode": "nope"}, READ, 400, "invalid_request"),
    ("POST", "/v1/search", {"query": "x", "filters": {"date": {"near": 1}}}, READ, 400, "invalid_request"),
    ("POST", "/v1/documents", {"documents": []}, WRITE, 400, "invalid_request"),
    ("POST", "/v1/documents", {"documents": [{"id": "a", "text": "b"}] * 101}, WRITE, 400, "invalid_request"),
    ("GET", "/v1/ask", None, READ, 405, "method_not_allowed"),
    ("PUT", "/v1/documents/a", None, WRITE, 405, "method_not_allowed"),
    ("GET", "/nowhere", None, READ, 404, "not_found"),
    ("POST", "/v1/chat/completions", {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}, READ,
     404, "model_not_found"),
    ("POST", "/v1/chat/completions", {"model": "agentic-rag", "messages": [{"role": "system", "content": "x"}]},
     READ, 400, "invalid_request"),
])
def test_every_error_is_one_json_line_with_its_status(served, method, path, body, key, status, kind):
    server, _ = served
    got, headers, reply = server.request(method, path, body, key=key)
    assert got == status and reply["error"]["type"] == kind and "\n" not in reply["error"]["message"]
    assert "Traceback" not in json.dumps(reply)
    if status == 401:
        assert headers.get("WWW-Authenticate") == "Bearer"


def test_bodies_that_are_too_large_or_not_json_utf8(served):
    server, _ = served
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as client:  # refused on its headers:
        client.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # sending
                       b"Authorization: Bearer " + READ.encode() + b"\r\nContent-Length: 1000001\r\n\r\n")  # the
        assert client.recv(4096).startswith(b"HTTP/1.1 413 ")   # whole body would race the server's close
    status, _, reply = server.request("POST", "/v1/ask", raw=b'{"question": "\xff\xfe"}', key=READ)
    assert status == 400 and "UTF-8 JSON" in reply["error"]["message"]
    assert server.request("POST", "/v1/ask", raw=b"{not json", key=READ)[0] == 400
    for constant, told in ((b"NaN", "is not a JSON number"), (b"Infinity", "is not a JSON number"),
                           (b"-Infinity", "is not a JSON number"), (b"1e999", "is too large a number")):
        document = b'{"documents": [{"id": "n", "text": "t", "metadata": {"score": ' + constant + b'}}]}'
        status, _, reply = server.request("POST", "/v1/documents", raw=document, key=WRITE)  # Python takes them
        assert status == 400 and f"{constant.decode()} {told}" in reply["error"]["message"], reply
    assert server.request("GET", "/healthz")[0] == 200            # no key needed
    assert server.request("GET", "/openapi.json")[2]["paths"]["/v1/ask"]["post"]["requestBody"]


def test_a_failure_inside_the_server_is_a_plain_500(kb_dir):
    model = ScriptedModel({}, default={})

    class Broken:
        def search(self, *args, **kwargs):
            raise ZeroDivisionError("boom")

    app = create_app(model, kb=KnowledgeBase.load(kb_dir))
    app.served.kb = type("Half", (), {"search": Broken().search})()
    server = Server(app)
    try:
        status, _, reply = server.request("POST", "/v1/search", {"query": "x"})
        assert status == 500 and reply["error"]["type"] == "internal_error" and "boom" not in json.dumps(reply)
    finally:
        server.close()


def test_too_many_runs_at_once_get_429_with_retry_after(kb_dir):
    gate = threading.Event()

    class Slow(OfflineModel):
        def complete(self, request):
            gate.wait(30)
            return super().complete(request)

    server = Server(create_app(Slow(), kb_dir=kb_dir, limits=ServiceLimits(max_concurrent_runs=1), cache_size=0))
    try:
        first = threading.Thread(target=server.request, args=("POST", "/v1/ask", {"question": QUESTION}))
        first.start()
        time.sleep(0.5)
        status, headers, reply = server.request("POST", "/v1/ask", {"question": "another question"})
        assert status == 429 and headers["Retry-After"] == "1" and reply["error"]["type"] == "too_many_requests"
    finally:
        gate.set()
        first.join()
        server.close()


def test_ask_streams_server_sent_events_draft_then_answer_then_done(served):
    server, _ = served
    status, headers, text = server.request("POST", "/v1/ask", {"question": QUESTION, "stream": True, "cache": False},
                                           key=READ)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [block.split("\n", 1) for block in text.strip().split("\n\n")]
    names = [e[0].removeprefix("event: ") for e in events]
    assert names[-2:] == ["answer", "done"] and names[:-2] and set(names[:-2]) == {"draft"}
    answer = json.loads(events[-2][1].removeprefix("data: "))
    assert "认证超时" in answer["answer"] and answer["generation"] == "gen-000001"


def test_the_openai_sdk_talks_to_the_agent(served):
    from openai import OpenAI

    server, _ = served
    client = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=READ, max_retries=0)
    assert [m.id for m in client.models.list()] == ["agentic-rag"]
    reply = client.chat.completions.create(model="agentic-rag", messages=[
        {"role": "user", "content": "an earlier question"}, {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": QUESTION}])
    text = reply.choices[0].message.content
    assert "认证超时" in text and "\n\nSources:\n[1]" in text and reply.usage.total_tokens > 0
    assert reply.model_extra["citations"] and reply.model_extra["agentic_rag"]["stop_reason"] == "sufficient"
    pieces = list(client.chat.completions.create(model="agentic-rag", stream=True,
                                                 messages=[{"role": "user", "content": QUESTION}]))
    streamed = "".join(p.choices[0].delta.content or "" for p in pieces)
    assert streamed == text and pieces[-1].choices[0].finish_reason == "stop"
    with pytest.raises(Exception) as refused:
        OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="nope", max_retries=0).models.list()
    assert "401" in str(refused.value)


def test_a_write_waiting_on_another_writer_gets_409_and_changes_nothing(served):
    server, folder = served
    server.app.limits = ServiceLimits(write_wait_s=0.2)
    before = (folder / "manifest.json").read_text()
    with writer_lock(folder):  # another process's writer, as far as the server can tell
        result = {}

        def write():
            result["reply"] = server.request("POST", "/v1/documents", {"documents": [{"id": "x", "text": "y"}]},
                                             key=WRITE)

        other = threading.Thread(target=write)
        other.start()
        other.join()
    status, _, reply = result["reply"]
    assert status == 409 and reply["error"]["type"] == "conflict" and (folder / "manifest.json").read_text() == before


def test_a_knowledge_base_given_beside_its_folder_is_read_again_from_the_folder(kb_dir, tmp_path):
    import shutil

    from agentic_rag import Document

    folder = tmp_path / "kb"
    shutil.copytree(kb_dir, folder)
    elsewhere = KnowledgeBase()
    elsewhere.add_documents([Document("elsewhere", "a note the folder does not hold")])
    app = create_app(OfflineModel(), kb_dir=folder, kb=elsewhere, cache_size=0)
    health = json.loads(b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz"}, lambda s, h: None)))
    saved = KnowledgeBase.load(folder)
    assert (health["documents"], health["generation"]) == (saved.document_count, saved.generation(folder))


def test_a_write_conflict_is_known_by_its_class_not_by_its_words(kb_dir, tmp_path):
    import shutil

    from agentic_rag import RetrievalError, WriteConflict
    from agentic_rag.service import ServiceError

    folder = tmp_path / "changed since" / "kb"            # words the service once looked for in a message
    shutil.copytree(kb_dir, folder)
    app = create_app(OfflineModel(), kb_dir=folder)

    def conflict(kb):
        raise WriteConflict("another writer, in words of its own")

    def damaged(kb):
        raise RetrievalError(f"{folder}/gen-000001/bm25.npz is corrupted")

    with pytest.raises(ServiceError) as refused:
        app.served.write(conflict, app.limits.write_wait_s)
    assert (refused.value.status, refused.value.kind) == (409, "conflict")
    with pytest.raises(RetrievalError, match="is corrupted"):  # not a conflict, though it says "changed since"
        app.served.write(damaged, app.limits.write_wait_s)


def test_the_services_own_errors_joined_the_tree_and_reply_as_before(served):
    import base64

    from agentic_rag import AgenticRAGError, ConfigurationError
    from agentic_rag.kb.ingestion._loaders import Unreadable
    from agentic_rag.service import ServiceError
    from agentic_rag.service._http import NotJSON as _NotJSON

    assert issubclass(ServiceError, AgenticRAGError) and issubclass(Unreadable, AgenticRAGError)
    assert issubclass(_NotJSON, ConfigurationError)
    server, _ = served                                     # each is answered where it was, not as a 500
    status, _, reply = server.request("GET", "/v1/nowhere", key=READ)                      # a ServiceError
    assert (status, reply["error"]) == (404, {"type": "not_found", "message": "no such endpoint; see /openapi.json"})
    status, _, reply = server.request("POST", "/v1/documents", raw=b'{"documents": NaN}', key=WRITE)  # _NotJSON
    assert (status, reply["error"]["message"]) == (400, "the body is not UTF-8 JSON (NaN is not a JSON number; "
                                                        "send a number or null)")
    upload = {"id": "bare", "filename": "notes.xyz", "file": base64.b64encode(b"x").decode()}  # Unreadable
    status, _, reply = server.request("POST", "/v1/documents", {"documents": [upload]}, key=WRITE)
    assert (status, reply["error"]["type"]) == (400, "invalid_request")
    assert reply["error"]["message"].startswith("document 'bare' (notes.xyz): unsupported file type; use one of ")


def test_keys_come_from_the_environment_and_a_file(tmp_path):
    file = tmp_path / "keys"
    file.write_text("# service keys\nread " + "a" * 16 + "\nwrite " + "b" * 16 + "\n")
    reads, writes = keys_from({"AGENTIC_RAG_READ_KEYS": "c" * 16 + ", " + "d" * 16}, str(file))
    assert reads == ["c" * 16, "d" * 16, "a" * 16] and writes == ["b" * 16]
    file.write_text("admin " + "a" * 16)
    with pytest.raises(Exception, match="line 1: write 'read KEY' or 'write KEY'"):
        keys_from({}, str(file))
    with pytest.raises(Exception, match="shorter than 16"):
        keys_from({"AGENTIC_RAG_WRITE_KEYS": "short"})


def test_two_server_processes_share_one_folder(kb_dir, tmp_path):
    import shutil

    folder = tmp_path / "kb"
    shutil.copytree(kb_dir, folder)
    held = KnowledgeBase.load(folder).document_count
    (a, port_a), (b, port_b) = start_service(folder, tmp_path, "a"), start_service(folder, tmp_path, "b")
    try:
        server_a, server_b = object.__new__(Server), object.__new__(Server)
        server_a.port, server_b.port = port_a, port_b
        question = {"question": "What colour is the Nimbus mascot?", "cache": True}
        assert server_b.request("POST", "/v1/ask", question)[2]["abstained"]
        document = {"id": "mascot.md", "text": "The Nimbus mascot is a teal cloud named Puff."}
        assert server_a.request("POST", "/v1/documents", {"documents": [document]})[0] == 200
        after = server_b.request("POST", "/v1/ask", question)[2]       # b reloads the new generation first
        assert "teal" in after["answer"] and after["generation"] == "gen-000002"
        replies = []
        writers = [threading.Thread(target=lambda s=s, i=i: replies.append(s.request(
            "POST", "/v1/documents", {"documents": [{"id": f"note-{i}", "text": f"note {i} about zebras"}]})))
            for i, s in enumerate([server_a, server_b] * 3)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        assert sorted(r[0] for r in replies) == [200] * 6                 # one writer at a time, none lost
        health = server_a.request("GET", "/healthz")[2]
        assert health["documents"] == KnowledgeBase.load(folder).document_count == held + 1 + 6
    finally:
        for process in (a, b):
            stop_service(process)


def test_a_knowledge_base_that_cannot_be_loaded_answers_503_and_recovers(served):
    server, folder = served
    manifest = folder / "manifest.json"
    good = manifest.read_text()
    manifest.write_text(json.dumps(dict(json.loads(good), generation="gen-000099")))  # a generation that is not there
    status, headers, reply = server.request("POST", "/v1/ask", {"question": QUESTION}, key=READ)
    assert status == 503 and headers["Retry-After"] == "5" and "gen-000099" in reply["error"]["message"]
    assert server.request("GET", "/healthz")[0] == 503
    manifest.write_text(good)
    assert server.request("GET", "/healthz")[2]["generation"] == "gen-000001"


def test_the_load_check_runs_clean_on_the_example(kb_dir, tmp_path):
    from agentic_rag.eval import service_load

    assert service_load.main(["--kb", str(kb_dir), "--clients", "3", "--seconds", "1.5", "--writes", "3",
                              "--slow-clients", "45", "--slow-addresses", "2", "--slow-interval", "0.5",
                              "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["cross_talk"] == 0 and report["lost_writes"] == 0 and report["writes_acknowledged"] >= 1
    assert all(report[phase]["errors"] == 0 and report[phase]["requests"] > 0
               for phase in ("http", "http_slow", "library", "http_with_writer", "http_cached"))
    assert report["slow"]["closed_by"].get("429 too_many_connections", 0) > 0  # 23 from one address, 20 allowed


def test_hostile_requests_get_clean_client_errors(served):
    server, folder = served
    documents = [{"id": "xA", "text": "alpha"}, {"id": "x%41", "text": "beta"}, {"id": "café", "text": "gamma"}]
    assert server.request("POST", "/v1/documents", {"documents": documents}, key=WRITE)[0] == 200
    assert server.request("DELETE", "/v1/documents/x%2541", key=WRITE)[0] == 200       # x%41, decoded once
    assert server.request("DELETE", "/v1/documents/caf%C3%A9", key=WRITE)[0] == 200
    ids = {h["doc_id"] for h in server.request("POST", "/v1/search", {"query": "alpha beta gamma", "k": 30},
                                                key=READ)[2]["hits"]}
    assert "xA" in ids and not {"x%41", "café"} & ids
    assert server.request("DELETE", "/v1/documents/%ff", key=WRITE)[0] == 400            # not UTF-8
    assert server.request("POST", "/v1/ask", raw=json.dumps({"question": "x"}).encode(), key=READ,
                          headers={"Content-Type": "text/plain"})[0] == 415              # no cross-site posts
    assert server.request("POST", "/v1/ask", raw=b'{"question": ' + b"[" * 100_000, key=READ)[0] == 400
    assert server.request("POST", "/v1/search", {"query": "x", "filters": {"doc_id": list(range(1001))}},
                          key=READ)[0] == 400
    bad = {"documents": [{"id": "s", "text": "t", "metadata": {"k": "\ud800"}}]}
    assert server.request("POST", "/v1/documents", raw=json.dumps(bad).encode(), key=WRITE)[0] == 400
    assert server.request("POST", "/v1/ask", {"question": QUESTION, "stream": "yes"}, key=READ)[0] == 400
    for i in range(30):
        server.request("GET", f"/made-up-{i}", key=READ)
    metrics = server.request("GET", "/metrics", key=READ)[2]
    assert "made-up" not in metrics and 'endpoint="other",status="404"} 30.0' in metrics
    status, headers, body = server.request("HEAD", "/healthz")
    assert status == 200 and body == ""


def test_the_cache_keeps_apart_what_answers_differently_and_only_what_answers_the_same(served):
    server, _ = served
    server.request("POST", "/v1/ask", {"question": "What is 7 * 32?"}, key=READ)
    assert not server.request("POST", "/v1/ask", {"question": "What is 7 * 3²?"}, key=READ)[2]["cached"]
    assert server.request("POST", "/v1/ask", {"question": " What is  7 * 32? "}, key=READ)[2]["cached"]
    server.request("POST", "/v1/ask", {"question": QUESTION, "cache": False}, key=READ)
    assert not server.request("POST", "/v1/ask", {"question": QUESTION}, key=READ)[2]["cached"]  # not stored


def test_a_failed_run_is_a_502_and_a_stream_is_refused_before_it_starts(kb_dir):
    from agentic_rag import ModelError

    class Failing(OfflineModel):
        def complete(self, request):
            raise ModelError("the provider is down")

    server = Server(create_app(Failing(), kb_dir=kb_dir, cache_size=0,
                               limits=ServiceLimits(max_concurrent_runs=1)))
    try:
        status, _, reply = server.request("POST", "/v1/ask", {"question": QUESTION})
        assert status == 502 and reply["error"]["type"] == "model_error"
        assert "provider is down" in reply["error"]["message"]
        chat = {"model": "agentic-rag", "messages": [{"role": "user", "content": QUESTION}]}
        assert server.request("POST", "/v1/chat/completions", chat)[0] == 502
        server.app.asking.slots.acquire()                          # every run slot taken
        assert server.request("POST", "/v1/ask", {"question": QUESTION, "stream": True})[0] == 429
        assert server.request("POST", "/v1/chat/completions", dict(chat, stream=True))[0] == 429
        server.app.asking.slots.release()
    finally:
        server.close()


def _api_model(fake):
    from agentic_rag import Endpoint, OpenAIChatModel

    return OpenAIChatModel("small-model", Endpoint(base_url=fake.url, timeout=10, max_retries=2))


def test_a_deadline_answers_against_a_hanging_model_and_frees_its_run_slot(kb_dir):
    from openai_server import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.chat.extend([{"hang": True}] * 9)
        server = Server(create_app(_api_model(fake), kb_dir=kb_dir, cache_size=0,
                                   limits=ServiceLimits(max_concurrent_runs=1)))
        try:
            status, _, reply = server.request("POST", "/v1/ask", {"question": QUESTION, "settings": {"deadline_s": 2}})
            assert status == 200 and reply["stop_reason"] == "deadline" and reply["abstained"]
            assert len(fake.chat_requests()) <= 1                  # one try at most, cut to the time left: no retry
            assert server.app.asking.slots.acquire(blocking=False)        # the run's slot is free again
            server.app.asking.slots.release()
        finally:
            server.close()


def test_usage_a_model_server_reports_is_checked_before_the_counters_see_it(kb_dir):
    """A negative count is no count (tiktoken's is billed); a huge one is the provider's: over the budget."""
    from openai_server import FakeOpenAI

    answer = json.dumps({"answer": "2.3.1 修复了认证失败的问题。 [1]", "evidence_score": 0.9, "missing": []},
                        ensure_ascii=False)
    with FakeOpenAI() as fake:
        server = Server(create_app(_api_model(fake), kb_dir=kb_dir, cache_size=0))
        try:
            for completion, stop in ((-199_999, "sufficient"), (2_000_000_000, "token_budget")):
                fake.chat.clear()
                fake.chat.append({"content": answer, "usage": {"prompt_tokens": 11, "completion_tokens": completion}})
                status, _, reply = server.request("POST", "/v1/ask", {"question": QUESTION})
                assert status == 200 and reply["stop_reason"] == stop, reply
                assert reply["usage"]["invalid_usage"][0]["completion_tokens"] == completion
                assert 0 < reply["usage"]["completion_tokens"] < 1000
            assert reply["abstained"] and reply["usage"]["reported_completion_tokens"] == 2_000_000_000
            metrics = server.request("GET", "/metrics")[2]
            counted = [line for line in metrics.splitlines() if line.startswith("agentic_rag_tokens_total")]
            assert counted and all(0 < float(line.split()[-1]) < 10_000 for line in counted)
        finally:
            server.close()


def test_a_folder_built_again_under_the_server_is_reloaded(served):
    import shutil

    server, folder = served
    shutil.rmtree(folder)
    other = KnowledgeBase()
    other.add_documents(load_documents(EXAMPLE_DATA / "policies").documents)
    other.save(folder)                                        # gen-000001 again, with other files
    health = server.request("GET", "/healthz")[2]
    assert health["documents"] == other.document_count and health["generation"] == "gen-000001"


def test_serve_on_a_port_in_use_is_a_one_line_error(kb_dir, capsys):
    import socket

    from agentic_rag.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code = main(["serve", "--kb", str(kb_dir), "--port", str(taken.getsockname()[1])])
    err = capsys.readouterr().err
    assert code != 0 and "cannot listen on 127.0.0.1" in err and "choose another --port" in err
    assert "Traceback" not in err and err.strip().count("\n") == 0
    code = main(["serve", "--kb", str(kb_dir), "--host", "192.0.2.1", "--port", "0"])   # no address of this machine
    err = capsys.readouterr().err
    assert code != 0 and "cannot listen on 192.0.2.1:0" in err and "check --host" in err, err
    assert "Traceback" not in err and err.strip().count("\n") == 0


# -- the server's own disk: 507 when it is full, 503 when read-only; no server path in any reply ---------


def _server_paths(reply: dict, *folders: Path) -> list[str]:
    """Absolute paths of this machine that a reply's text gives away."""
    text = json.dumps(reply, ensure_ascii=False)
    return [str(f) for f in folders if str(f) in text] + re.findall(r"(?<![\w.:/])/(?:tmp|root|home|work)\b", text)


def test_a_write_past_a_file_size_limit_is_507_and_nothing_is_lost(kb_dir, tmp_path, file_size_limited):
    import shutil

    folder = tmp_path / "kb"
    shutil.copytree(kb_dir, folder)
    before = sorted(p.name for p in folder.iterdir()), (folder / "manifest.json").read_text()
    process, port = start_service(folder, tmp_path, "limited", python=lambda *a: file_size_limited(8192, *a))
    try:
        server = object.__new__(Server)
        server.port = port
        document = {"documents": [{"id": "zebra", "text": "zebras cross the road " * 500}]}
        status, _, reply = server.request("POST", "/v1/documents", document)
        assert (status, reply["error"]["type"]) == (507, "insufficient_storage"), reply
        assert reply["error"]["message"] == ("cannot write knowledge base kb: file too large (EFBIG); a file size "
                                             "limit stops it (ulimit -f): raise the limit or choose another --kb; "
                                             "nothing was saved")
        assert not _server_paths(reply, folder)
        assert server.request("GET", "/healthz")[0] == 200
    finally:
        stop_service(process)
    assert (sorted(p.name for p in folder.iterdir()), (folder / "manifest.json").read_text()) == before


def test_a_write_on_a_full_disk_is_507_on_a_read_only_one_503_and_nothing_is_lost(kb_dir, small_disk, caplog):
    import shutil

    folder = small_disk.path / "kb"
    shutil.copytree(kb_dir, folder)
    server = Server(create_app(OfflineModel(), kb_dir=folder, read_keys=[READ], write_keys=[WRITE]))
    try:
        health = server.request("GET", "/healthz")[2]
        document = {"documents": [{"id": "zebra", "text": "zebras cross the road " * 500}]}
        small_disk.fill(0)
        try:
            status, _, full = server.request("POST", "/v1/documents", document, key=WRITE)
        finally:
            small_disk.empty()
        small_disk.read_only()
        try:
            replies = [server.request("POST", "/v1/documents", document, key=WRITE),
                       server.request("DELETE", "/v1/documents/policies%2Frefunds.md", key=WRITE)]
        finally:
            small_disk.read_only(False)
        assert (status, full["error"]["type"]) == (507, "insufficient_storage")
        assert full["error"]["message"] == ("cannot write knowledge base kb: no space left on device (ENOSPC); free "
                                            "space on its disk or choose another --kb; nothing was saved")
        for status, _, reply in replies:
            assert (status, reply["error"]["type"]) == (503, "unavailable")
            assert reply["error"]["message"].startswith("cannot write knowledge base kb: read-only file system (EROFS)")
        assert not _server_paths(full, folder) and not any(_server_paths(r[2], folder) for r in replies)
        assert f"cannot write knowledge base {folder}: no space left" in caplog.text  # the operator's log has it
        assert server.request("GET", "/healthz")[2] == health
        hits = server.request("POST", "/v1/search", {"query": "zebras cross the road"}, key=READ)[2]["hits"]
        assert "zebra" not in {h["doc_id"] for h in hits}
        assert server.request("POST", "/v1/documents", document, key=WRITE)[0] == 200  # space again: saved
        assert KnowledgeBase.load(folder).search("zebras", k=1)[0].doc_id == "zebra"
    finally:
        server.close()


def test_a_knowledge_base_that_cannot_be_loaded_shows_no_server_path(served, caplog):
    server, folder = served
    (folder / "gen-000001" / "bm25.npz").write_bytes(b"damaged")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(manifest))  # another manifest: the server reloads
    status, _, reply = server.request("POST", "/v1/documents", {"documents": [{"id": "x", "text": "y"}]}, key=WRITE)
    assert status == 503 and "kb/gen-000001/bm25.npz is corrupted" in reply["error"]["message"]
    assert not _server_paths(reply, folder, folder.parent), reply
    assert str(folder / "gen-000001" / "bm25.npz") in caplog.text


def test_a_requests_run_settings_are_bounded_by_the_services(kb_dir):
    """A request may lower the service's run settings, never raise them."""
    low = Server(create_app(OfflineModel(), kb=KnowledgeBase.load(kb_dir), config=RunConfig(max_rounds=1),
                            cache_size=0))
    high = Server(create_app(OfflineModel(), kb=KnowledgeBase.load(kb_dir), cache_size=0))
    question = "Is there a mobile app for phones?"   # two rounds when three are allowed
    try:
        _, _, bounded = low.request("POST", "/v1/ask", {"question": question, "settings": {"max_rounds": 3}})
        _, _, lowered = high.request("POST", "/v1/ask", {"question": question, "settings": {"max_rounds": 1}})
        _, _, default = high.request("POST", "/v1/ask", {"question": question})
        assert (bounded["rounds"], lowered["rounds"], default["rounds"]) == (1, 1, 2)
        assert bounded["stop_reason"] == lowered["stop_reason"] == "max_rounds"
    finally:
        low.close()
        high.close()


def test_a_question_too_long_for_its_budget_is_a_400_streamed_or_not(served):
    server, _ = served
    long_question = "Does the login fix in version 2.3.1 also cover single sign-on? " * 25  # ~1,600 characters
    chat = {"model": "agentic-rag", "messages": [{"role": "user", "content": long_question}]}
    replies = [server.request("POST", "/v1/ask", {"question": long_question, "settings": {"token_budget": 500},
                                                  "stream": stream}, key=READ) for stream in (False, True)]
    for status, headers, reply in replies:
        assert status == 400 and headers["Content-Type"].startswith("application/json"), reply
        assert reply["error"]["type"] == "invalid_request"
        assert "more than a quarter of the token budget (500)" in reply["error"]["message"]
    assert replies[0][2] == replies[1][2]
    low = Server(create_app(OfflineModel(), kb=KnowledgeBase.load(served[1]), config=RunConfig(token_budget=500)))
    try:
        for stream in (False, True):
            status, _, reply = low.request("POST", "/v1/chat/completions", dict(chat, stream=stream))
            assert status == 400 and "quarter of the token budget" in reply["error"]["message"]
    finally:
        low.close()


@pytest.mark.parametrize("settings, field", [
    ({"max_rounds": True}, "max_rounds"), ({"max_rounds": "2"}, "max_rounds"), ({"max_rounds": 2.0}, "max_rounds"),
    ({"token_budget": "9000"}, "token_budget"), ({"deadline_s": True}, "deadline_s"),
    ({"deadline_s": "30"}, "deadline_s"),
])
def test_run_settings_of_the_wrong_type_are_a_400_naming_the_field(served, settings, field):
    server, _ = served
    status, _, reply = server.request("POST", "/v1/ask", {"question": QUESTION, "settings": settings}, key=READ)
    assert status == 400 and reply["error"]["message"].startswith(f"settings.{field}: "), reply
    assert server.request("POST", "/v1/ask", {"question": QUESTION, "settings": {"deadline_s": 30, "max_rounds": 2}},
                          key=READ)[0] == 200  # a whole number of seconds is a number


def test_a_requests_settings_keep_the_services_config_and_its_class(kb_dir):
    from dataclasses import replace

    from agentic_rag import Config
    from agentic_rag.service._schemas import AskRequest

    class Tuned(Config):
        pass

    config = Tuned(chunk_size=300, fusion="score", max_rounds=2)
    app = create_app(OfflineModel(), kb=KnowledgeBase.load(kb_dir), config=config)
    given = app.asking.settings(AskRequest(question=QUESTION, settings={"max_rounds": 3, "token_budget": 9000}))
    assert type(given) is Tuned and given == replace(config, token_budget=9000) and given.max_rounds == 2


def test_a_database_that_cannot_be_reached_is_503_with_retry_after_on_every_endpoint(pg_url):
    import psycopg

    from agentic_rag.kb import Document, PostgresKnowledgeBase

    kb = PostgresKnowledgeBase(pg_url + "&pool_timeout=1")
    kb.add_documents([Document(id="a", text="Orders paid on weekends ship on Monday.")])
    server = Server(create_app(OfflineModel(), kb=kb))
    name = pg_url.partition("?")[0].rsplit("/", 1)[1]
    admin = pg_url.replace(f"/{name}", "/postgres")
    try:
        assert server.request("POST", "/v1/search", {"query": "orders weekend"})[0] == 200
        with psycopg.connect(admin, autocommit=True) as db:  # the server refuses it, as one that is down does
            db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        for method, path, body in [("POST", "/v1/search", {"query": "orders weekend"}), ("GET", "/healthz", None),
                                   ("POST", "/v1/documents", {"documents": [{"id": "b", "text": "hello"}]}),
                                   ("POST", "/v1/ask", {"question": "When do orders paid on weekends ship?"})]:
            status, headers, reply = server.request(method, path, body)
            assert (status, headers.get("Retry-After")) == (503, "5"), (path, status, reply)
            assert reply["error"]["type"] == "unavailable" and "check the server" in reply["error"]["message"], reply
            assert "postgresql://" not in reply["error"]["message"] and "the database" in reply["error"]["message"]
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    try:
        assert server.request("POST", "/v1/search", {"query": "orders weekend"})[0] == 200  # back: served again
    finally:
        server.close()


def _events(text: str) -> list[tuple[str, dict]]:
    """A server-sent-events reply as (event, data) pairs."""
    return [(re.search(r"event: (\w+)", part).group(1), json.loads(re.search(r"data: (.*)", part).group(1)))
            for part in text.strip().split("\n\n")]


def test_a_database_lost_during_a_run_is_503_on_ask_chat_and_their_streams(pg_url):
    import psycopg

    from agentic_rag.kb import Document, PostgresKnowledgeBase

    name = pg_url.partition("?")[0].rsplit("/", 1)[1]
    admin = pg_url.replace(f"/{name}", "/postgres")

    def allow(on: bool) -> None:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS {'true' if on else 'false'}")
            if not on:
                db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))

    class GoesDown(PostgresKnowledgeBase):
        """The database goes down as the run's search begins: after the service read its generation
        and the run its size, so that the run, not the request, meets the lost connection."""

        def search(self, *args, **kwargs):
            allow(False)
            return super().search(*args, **kwargs)

    kb = GoesDown(pg_url + "&pool_timeout=1")  # the first request of each outage waits this long
    kb.add_documents([Document(id="a", text="Orders paid on weekends ship on Monday.")])
    server = Server(create_app(OfflineModel(), kb=kb, cache_size=0))
    question = "When do orders paid on weekends ship?"
    chat = {"model": "agentic-rag", "messages": [{"role": "user", "content": question}]}
    try:
        for path, body in [("/v1/ask", {"question": question}), ("/v1/chat/completions", chat)]:
            status, headers, reply = server.request("POST", path, body)
            allow(True)
            assert (status, headers.get("Retry-After"), reply["error"]["type"]) == (503, "5", "unavailable"), reply
            assert "ConnectionLost" in reply["error"]["message"] and "postgresql://" not in reply["error"]["message"]
        status, _, text = server.request("POST", "/v1/ask", {"question": question, "stream": True})
        allow(True)
        error = dict(_events(text))["error"]["error"]
        assert (status, error["status"], error["type"]) == (200, 503, "unavailable"), text
        status, _, text = server.request("POST", "/v1/chat/completions", dict(chat, stream=True))
        allow(True)
        assert status == 200 and '"type": "unavailable"' in text and "postgresql://" not in text, text
    finally:
        allow(True)
        server.close()


def test_a_role_without_a_right_is_the_servers_500_and_no_reply_shows_the_database_url(pg_url):
    import uuid

    import psycopg

    from agentic_rag.kb import Document, PostgresKnowledgeBase

    PostgresKnowledgeBase(pg_url).add_documents([Document(id="a", text="Orders paid on weekends ship on Monday.")])
    role = f"ro_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f"CREATE ROLE {role} LOGIN")
        db.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    as_role = pg_url.replace("postgres:@", f"{role}:@")
    server = Server(create_app(OfflineModel(), kb=PostgresKnowledgeBase(as_role)))
    try:
        status, _, reply = server.request("POST", "/v1/documents", {"documents": [{"id": "b", "text": "hello"}]})
        assert (status, reply["error"]["type"]) == (500, "internal_error"), reply
        message = reply["error"]["message"]
        assert message.startswith("the database: this role may not write the knowledge base"), message
        assert "postgresql://" not in message and role not in message, message
    finally:
        server.close()


def test_the_load_check_runs_clean_with_three_collections_and_scoped_keys(kb_dir, tmp_path):
    from agentic_rag.eval import service_load

    assert service_load.main(["--kb", str(kb_dir), "--clients", "3", "--seconds", "1.5", "--writes", "4",
                              "--slow-clients", "0", "--collections", "3", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["collections"] == 3 and report["keys"] == 3
    assert report["cross_talk"] == 0 and report["lost_writes"] == 0 and report["writes_acknowledged"] >= 1
    assert all(report[phase]["errors"] == 0 and report[phase]["requests"] > 0
               for phase in ("http", "library", "http_with_writer", "http_cached"))
