"""Embedding the library in an existing service: the WSGI application agentic_rag.service makes,
served here by waitress on 127.0.0.1 (pip install 'agentic-rag[serve]'); any WSGI server or
framework can mount the same `app` (docs/how-to/service.md).

    python examples/service.py          # builds a knowledge base, starts, answers two requests, stops
"""
import json
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import waitress

from agentic_rag import KnowledgeBase, OfflineModel, create_app, load_documents

folder = Path(tempfile.mkdtemp()) / "kb"
kb = KnowledgeBase()
kb.add_documents(load_documents(Path(__file__).parent / "data").documents)
kb.save(folder)

app = create_app(OfflineModel(), kb_dir=folder)   # one knowledge base and model, shared by every request
server = waitress.create_server(app, host="127.0.0.1", port=0)
threading.Thread(target=server.run, daemon=True).start()

for question in ["登录报错的问题在 2.3.1 版本里修复了吗？", " "]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.effective_port}/v1/ask",
                                     data=json.dumps({"question": question}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            reply = json.load(response)
            print(response.status, reply["stop_reason"], [c["source"] for c in reply["citations"]])
    except urllib.error.HTTPError as error:     # bad input: a JSON error with the right status
        print(error.code, json.load(error)["error"]["message"])
server.close()
