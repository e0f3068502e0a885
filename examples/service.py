"""Embedding the library in an existing service: a standard-library WSGI app, one knowledge base
shared read-only by every request, one run (and one state) per request.

    python examples/service.py          # starts, answers two requests itself, stops
"""
import json
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

from agentic_rag import AgenticRAGError, KnowledgeBase, OfflineModel, load_documents, run_agentic_rag

KB = KnowledgeBase()                     # built once at start-up; searches share it safely
KB.add_documents(load_documents(Path(__file__).parent / "data").documents)
MODEL = OfflineModel()                   # stateless: one for the whole service


def answer(question: str) -> dict:
    """The plain function the handler calls: one run, its own state."""
    state = run_agentic_rag(question, KB, MODEL)
    return {"answer": state["answer"], "abstained": state["abstained"], "stop_reason": state["stop_reason"],
            "citations": [c["source"] for c in state["citations"]]}


def app(environ, start_response):
    question = urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).get("q", [""])[0]
    try:
        status, body = "200 OK", answer(question)
    except AgenticRAGError as exc:       # bad input: a clear 400, never a stack trace
        status, body = "400 Bad Request", {"error": str(exc)}
    start_response(status, [("Content-Type", "application/json; charset=utf-8")])
    return [json.dumps(body, ensure_ascii=False).encode()]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/?"
    for q in ["登录报错的问题在 2.3.1 版本里修复了吗？", " "]:
        try:
            with urllib.request.urlopen(url + urllib.parse.urlencode({"q": q})) as response:
                print(response.status, response.read().decode())
        except urllib.error.HTTPError as error:
            print(error.code, error.read().decode())
    server.shutdown()
