"""Slow clients for the service's load check: connections from 127.0.0.2 and up that send a
request a header line (or a body byte) at a time, and connect again when the server closes them,
all from one thread (one select() over every socket). Traffic stays on 127.0.0.0/8."""
from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import Counter

_SLOW_STARTS = (b"POST /v1/ask HTTP/1.1\r\nHost: load\r\n",  # then a header line a tick
                b"POST /v1/ask HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")


def _slow_connect(port: int, n: int, addresses: int) -> socket.socket | None:
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=2,
                                          source_address=(f"127.0.0.{2 + n % addresses}", 0))
        client.sendall(_SLOW_STARTS[n % 2])
    except OSError:
        return None
    client.setblocking(False)
    return client


def _answer_of(client: socket.socket) -> str:
    """The status and error type the server closed a slow connection with ("closed": none came)."""
    client.settimeout(2)
    data = b""
    try:
        while len(data) < 4096 and (chunk := client.recv(4096)):
            data += chunk
    except OSError:
        pass
    client.close()
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        return f"{head.split()[1].decode()} {json.loads(body)['error']['type']}"
    except (IndexError, ValueError, KeyError, TypeError):
        return "closed"


def slow_clients(port: int, count: int, addresses: int, interval: float, stop: threading.Event) -> dict:
    """`count` slow connections kept open from 127.0.0.2 and up until `stop`, each sending a header
    line (or, every other one, a body byte) per `interval` s; what closed them, and how many were open."""
    answers: Counter[str] = Counter()
    open_counts: list[int] = []
    connects = 0
    due = {n: time.monotonic() + interval * n / count for n in range(count)}  # n -> next connect
    held: dict[socket.socket, list] = {}  # socket -> [n, next drip]
    while not stop.is_set():
        now = time.monotonic()
        for n in [n for n, at in due.items() if at <= now]:
            client, connects = _slow_connect(port, n, addresses), connects + 1
            del due[n]
            if client is None:
                answers["connect failed"] += 1
                due[n] = now + interval
            else:
                held[client] = [n, now + interval]
        ready = set(select.select(list(held), [], [], 0.05)[0]) if held else set()
        if not held:
            stop.wait(0.05)
        for client, (n, at) in list(held.items()):
            closed = client in ready  # the server answered, or closed: the connection is over
            if not closed and at <= now:
                closed = not _drip(client, n)
                held[client][1] = at + interval
            if closed:
                del held[client]
                answers[_answer_of(client)] += 1
                due[n] = now + interval
        open_counts.append(len(held))
    for client in held:
        client.close()
    return {"clients": count, "addresses": addresses, "interval_s": interval, "connects": connects,
            "open_mean": round(sum(open_counts) / max(len(open_counts), 1), 1), "closed_by": dict(answers)}


def _drip(client: socket.socket, n: int) -> bool:
    try:
        client.send(b"X-Slow: 1\r\n" if n % 2 == 0 else b" ")
        return True
    except OSError:
        return False
