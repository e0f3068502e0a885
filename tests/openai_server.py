"""A real HTTP server on 127.0.0.1 that speaks the OpenAI protocol with scripted replies, for tests.

Chat replies are queued (`server.chat.append(...)`): a string (the assistant's content), or a dict
with `status`, `body`, `headers`, `delay` to script errors and slowness, or with `content` and
`finish_reason` / `usage` to script a reply cut off at its limit or counted otherwise; `hang`
(never answer, until the server stops) and `dribble` (seconds between pieces: a stream's five-character
pieces, or a plain reply's bytes after its headers) script a server too slow to wait for. Request
fields named in `server.refused_fields` get HTTP 400 naming the field, as an endpoint that does not
know them answers. Streaming requests get the content as server-sent events ending in [DONE].
Embeddings are deterministic vectors of `dim` floats, sent base64-encoded (the client's default) or
as lists; `server.embedding_errors` scripts the next embeddings calls (`status`, `hang`, or
`dribble`). Every request is recorded, and `server.dropped` lists the replies whose client closed
the connection before they were sent whole.
"""
from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def vector(text: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeOpenAI:
    def __init__(self, dim: int = 16):
        self.chat: deque = deque()
        self.embedding_errors: deque = deque()
        self.requests: list[dict] = []
        self.dim = dim
        self.float_only = False  # like servers that ignore encoding_format and always send float lists
        self.models = ["small-model", "big-model", "embed-model"]
        self.refused_fields: set[str] = set()
        self.dropped: list[str] = []  # the paths of replies cut short by the client closing the connection
        self.stopping = threading.Event()  # ends the waits of hanging and dribbling replies
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                owner.requests.append({"path": self.path})
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                                  "owned_by": "test"} for m in owner.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                owner.requests.append({"path": self.path, "body": body,
                                       "authorization": self.headers.get("authorization")})
                if self.path.endswith("/embeddings"):
                    return self._embeddings(body)
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                refused = sorted(owner.refused_fields & set(body))
                if refused:
                    message = f"Unrecognized request argument supplied: {refused[0]}"
                    return self._send(400, {"error": {"message": message}})
                unscripted = {"status": 500, "body": {"error": {"message": "no reply scripted"}}}
                item = owner.chat.popleft() if owner.chat else unscripted
                if isinstance(item, str):
                    item = {"content": item}
                time.sleep(item.get("delay", 0))
                if item.get("hang"):
                    owner.stopping.wait(600)
                    return
                if "status" in item:
                    return self._send(item["status"], item.get("body", {"error": {"message": "scripted error"}}),
                                      item.get("headers"))
                content, finish = item["content"], item.get("finish_reason", "stop")
                usage = item.get("usage", {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
                if body.get("stream"):
                    return self._stream(body, content, finish, usage, item.get("dribble", 0))
                reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": finish,
                                      "message": {"role": "assistant", "content": content}}], "usage": usage}
                if item.get("dribble"):
                    return self._dribble(json.dumps(reply).encode(), item["dribble"])
                self._send(200, reply)

            def _stream(self, body, content, finish, usage, seconds: float):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                pieces = [{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "delta": {"content": content[i:i + 5]}, "finish_reason": None}]}
                          for i in range(0, len(content), 5)]
                end = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}
                events = [f"data: {json.dumps(piece)}\n\n".encode() for piece in pieces]
                self._write(events + [f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()], seconds)

            def _dribble(self, data: bytes, seconds: float):
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self._write([data[i:i + 1] for i in range(len(data))], seconds)

            def _write(self, parts: list[bytes], seconds: float):
                """Send `parts` `seconds` apart, counting a client that closes the connection before the end."""
                try:
                    for i, part in enumerate(parts):
                        if i and owner.stopping.wait(seconds):
                            return
                        self.wfile.write(part)
                        self.wfile.flush()
                except OSError:  # BrokenPipeError, ConnectionResetError: the client went away
                    owner.dropped.append(self.path)
                    self.close_connection = True

            def _embeddings(self, body):
                scripted = owner.embedding_errors.popleft() if owner.embedding_errors else {}
                if scripted.get("hang"):
                    owner.stopping.wait(600)
                    return
                if "status" in scripted:
                    return self._send(scripted["status"], {"error": {"message": "scripted"}}, scripted.get("headers"))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = []
                for i, text in enumerate(texts):
                    v = vector(str(text), owner.dim)
                    as_base64 = body.get("encoding_format") == "base64" and not owner.float_only
                    encoded = base64.b64encode(v.tobytes()).decode() if as_base64 else v.tolist()
                    data.append({"object": "embedding", "index": i, "embedding": encoded})
                reply = {"object": "list", "data": data, "model": body["model"],
                         "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}
                if scripted.get("dribble"):
                    return self._dribble(json.dumps(reply).encode(), scripted["dribble"])
                self._send(200, reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for the loop to look up once a poll interval: 0.05 s, not the default 0.5 s,
        # which would add half a second to every test that starts this server
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def chat_requests(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]
