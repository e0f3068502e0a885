"""`agentic-rag serve` stopped by SIGTERM (what systemd, Docker and Kubernetes send) or SIGINT, in a
real process: it stops taking connections (a new one is answered 503), finishes the request under
way (an upload whose body is still arriving when the signal comes), exits 0 with one line, and the
knowledge base holds the upload whole; a second signal stops it at once, leaving the knowledge base
as it was; past --shutdown-timeout what is still under way is cut off and counted. Its access lines
go to stderr unless --access-log says otherwise."""
import http.client
import json
import shutil
import signal
import socket

import pytest

from agentic_rag import KnowledgeBase
from helpers import start_service

WRITER = "writer-key-0123456789abcdef"


def _upload_begun(port: int, doc_id: str) -> tuple[socket.socket, bytes]:
    """A POST /v1/documents under way: its headers read by the server (it has said 100 Continue) and
    part of its body sent; the rest of the body is returned."""
    body = json.dumps({"documents": [{"id": doc_id, "text": "Zebras cross the road at dawn. " * 50}]}).encode()
    client = socket.create_connection(("127.0.0.1", port), timeout=60)
    client.sendall(f"POST /v1/documents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                   f"Expect: 100-continue\r\n\r\n".encode())
    assert client.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    client.sendall(body[:100])
    return client, body[100:]


def _reply(client: socket.socket) -> bytes:
    received = b""
    while chunk := client.recv(65536):
        received += chunk
    return received


def _stopping(port: int) -> None:
    """A new connection while the server stops is turned away: answered 503 if its request line
    came within the second it has (on a machine too busy for that, closed without an answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        try:
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            refused = _reply(client)
        except ConnectionResetError:
            refused = b""
    assert refused == b"" or (refused.startswith(b"HTTP/1.1 503 ") and b"the server is stopping" in refused), refused


def asked_then_stopped(process, port: int, times: int = 1) -> None:
    """GET /healthz answered 200 `times`, then a SIGTERM that ends the server with 0."""
    for _ in range(times):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0


@pytest.fixture
def served(example_kb_dir, tmp_path):
    folder = tmp_path / "kb"
    shutil.copytree(example_kb_dir, folder)
    started: list = []

    def start(*flags: str):
        process, port = start_service(folder, tmp_path, "serve", *flags, env={"AGENTIC_RAG_WRITE_KEYS": WRITER})
        started.append(process)
        return process, port

    yield folder, start
    for process in started:  # passed or failed, no server is left behind
        if process.poll() is None:
            process.kill()
        process.wait(60)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_finishes_the_upload_under_way_then_exits_0_with_one_line(served, tmp_path, signum):
    folder, start = served
    process, port = start()
    client, rest = _upload_begun(port, "zebra")
    process.send_signal(signum)
    _stopping(port)  # turned away: the signal has been taken
    client.sendall(rest)
    reply = _reply(client)
    client.close()
    assert reply.startswith(b"HTTP/1.1 200 "), reply
    assert process.wait(60) == 0
    log = (tmp_path / "serve.log").read_text().splitlines()
    assert log[-1] == "stopped: finished the requests under way", log
    assert any('"POST /v1/documents HTTP/1.1" 200 ' in line and " key=" in line for line in log), log  # stderr
    assert KnowledgeBase.load(folder).held_documents(["zebra"]) == ["zebra"]


def test_a_second_signal_stops_at_once_and_the_knowledge_base_is_as_it_was(served, tmp_path):
    folder, start = served
    before = (folder / "manifest.json").read_text()
    process, port = start()
    client, _ = _upload_begun(port, "zebra")
    process.send_signal(signal.SIGTERM)
    _stopping(port)
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 130
    client.close()
    assert (tmp_path / "serve.log").read_text().endswith("agentic-rag: stopped\n")
    assert (folder / "manifest.json").read_text() == before
    assert not KnowledgeBase.load(folder).held_documents(["zebra"])


def test_access_lines_go_to_a_file_or_nowhere_and_a_bad_file_is_one_line(served, tmp_path):
    import subprocess
    import sys

    from helpers import ROOT

    folder, start = served
    asked_then_stopped(*start("--access-log", str(tmp_path / "access.log")))
    access = (tmp_path / "access.log").read_text()
    assert '"GET /healthz HTTP/1.1" 200 ' in access and "GET /healthz" not in (tmp_path / "serve.log").read_text()
    done = subprocess.run([sys.executable, "-m", "agentic_rag.cli", "serve", "--kb", str(folder), "--port", "0",
                           "--access-log", str(tmp_path / "no" / "such" / "dir.log")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("agentic-rag: error: --access-log ") and "- for stderr or off" in done.stderr


def test_an_access_log_that_cannot_be_written_is_one_line_not_a_traceback_per_request(served, tmp_path):
    _, start = served
    asked_then_stopped(*start("--access-log", "/dev/full"), times=3)  # every write fails: no space left on device
    log = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in log and "Logging error" not in log, log
    assert log.count("agentic-rag serve: cannot write the access log /dev/full: ") == 1, log


def test_what_is_still_under_way_at_the_shutdown_timeout_is_cut_off_and_counted(served, tmp_path):
    folder, start = served
    process, port = start("--shutdown-timeout", "1")
    client, _ = _upload_begun(port, "zebra")  # its body never comes
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    client.close()
    assert (tmp_path / "serve.log").read_text().splitlines()[-1] == \
        "stopped: finished the requests under way; 1 request still under way after 1 s cut off"
    assert not KnowledgeBase.load(folder).held_documents(["zebra"])
