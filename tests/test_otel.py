"""OpenTelemetry: a run is one span, each step a child and each model call a grandchild, with the
GenAI conventions' attributes and ours and no text of a document, question or answer; the service's request
span is their parent, in a stream's thread too. Exported to the SDK's in-memory exporter here, and
over OTLP/HTTP by `agentic-rag serve` to a real receiver on 127.0.0.1 whose protobuf payload is
decoded with opentelemetry-proto. Without OpenTelemetry installed, nothing of it is imported and
the run's answer and trace are the same."""
import http.client
import http.server
import json
import subprocess
import sys
import threading
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentic_rag import KnowledgeBase, OfflineModel, run_agentic_rag
from agentic_rag.kb import load_documents
from helpers import EXAMPLE_DATA, ROOT

QUESTION = "登录报错的问题在 2.3.1 版本里修复了吗？"
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans():
    """The process's tracer provider (set once: OpenTelemetry allows one), exporting to memory."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    yield _EXPORTER
    _EXPORTER.clear()
    _EXPORTER.shutdown()  # the provider stays (one a process), but later tests' spans are no longer kept


@pytest.fixture(scope="module")
def example_kb():
    kb = KnowledgeBase()
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    return kb


def test_a_run_is_a_span_with_a_child_per_step_and_a_grandchild_per_model_call(spans, example_kb):
    spans.clear()
    state = run_agentic_rag(QUESTION, example_kb, OfflineModel())
    finished = spans.get_finished_spans()
    run = next(s for s in finished if s.name == "invoke_agent agentic-rag")
    steps = [s for s in finished if s.name.startswith("agentic_rag.")]
    calls = [s for s in finished if s.name.startswith("chat ")]
    named = [s.name.removeprefix("agentic_rag.") for s in sorted(steps, key=lambda s: s.start_time)]
    traced = iter(e["step"] for e in state["trace"])  # a step's span for each timed step, in the trace's order
    assert all(name in traced for name in named) and {"route", "search", "generate"} <= set(named)
    assert all(s.parent.span_id == run.context.span_id for s in steps)
    step_ids = {s.context.span_id for s in steps}
    assert len(calls) == state["usage"]["model_calls"] and all(c.parent.span_id in step_ids for c in calls)
    attributes = run.attributes
    assert attributes["gen_ai.operation.name"] == "invoke_agent" and attributes["gen_ai.request.model"] == "offline"
    assert attributes["gen_ai.usage.input_tokens"] == state["usage"]["prompt_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == state["usage"]["completion_tokens"]
    assert attributes["agentic_rag.stop_reason"] == state["stop_reason"]
    assert list(attributes["agentic_rag.cited_ids"]) == [c["id"] for c in state["citations"]]
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls) == state["usage"]["prompt_tokens"]
    assert {s.attributes["agentic_rag.round"] for s in steps} >= {1}
    # no text of a document, nor the question, in any attribute
    texts = [e["text"][:30] for e in state["evidence"]] + [QUESTION]
    values = json.dumps([dict(s.attributes) for s in finished], ensure_ascii=False)
    assert not any(text in values for text in texts)


def test_a_failed_run_is_a_failed_span(spans, example_kb):
    from agentic_rag import ScriptedModel

    spans.clear()
    state = run_agentic_rag("Who fixed the login timeout in 2.3.1?", example_kb, ScriptedModel({}))
    run = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent agentic-rag")
    assert state["stop_reason"] == "error" and run.status.status_code == trace.StatusCode.ERROR


class _Receiver(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP traces receiver: keeps each POST /v1/traces body, decoded."""

    received: list = []

    def do_POST(self):  # noqa: N802 (the http.server name)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append((self.path, self.headers.get("Content-Type"), request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_serve_exports_request_run_and_step_spans_over_otlp_http(tmp_path):
    from helpers import start_service, stop_service

    kb = KnowledgeBase()
    kb.add_documents(load_documents(EXAMPLE_DATA).documents)
    kb.save(tmp_path / "kb")
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}", "OTEL_BSP_SCHEDULE_DELAY": "50",
           "OTEL_SERVICE_NAME": "rag-under-test"}
    process, port = start_service(tmp_path / "kb", tmp_path, "otel", env=env)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        parent = "4bf92f3577b34da6a3ce929d0e0e4736"
        connection.request("POST", "/v1/ask", body=json.dumps({"question": QUESTION, "stream": True}).encode(),
                           headers={"Content-Type": "application/json",
                                    "traceparent": f"00-{parent}-00f067aa0ba902b7-01"})
        assert b"event: done" in connection.getresponse().read()
        spans = {}
        for _ in range(200):  # the batch processor sends every 50 ms
            spans = {s.name: s for _, _, request in _Receiver.received for r in request.resource_spans
                     for scope in r.scope_spans for s in scope.spans}
            if "POST /v1/ask" in spans and "invoke_agent agentic-rag" in spans:
                break
            time.sleep(0.05)
        path, kind, request = _Receiver.received[0]
        assert path == "/v1/traces" and kind == "application/x-protobuf"
        resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
        assert resource["service.name"] == "rag-under-test"
        served, run = spans["POST /v1/ask"], spans["invoke_agent agentic-rag"]
        assert served.trace_id.hex() == parent and served.parent_span_id.hex() == "00f067aa0ba902b7"
        assert run.parent_span_id == served.span_id and run.trace_id == served.trace_id  # across the stream's thread
        assert spans["agentic_rag.search"].parent_span_id == run.span_id
        status = {a.key: a.value.int_value for a in served.attributes}["http.response.status_code"]
        assert status == 200
    finally:
        stop_service(process)
        receiver.shutdown()


def test_without_opentelemetry_nothing_is_imported_and_nothing_changes():
    code = """
import json, sys
if sys.argv[1] == "absent":
    sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from agentic_rag import KnowledgeBase, OfflineModel, run_agentic_rag
from agentic_rag.kb import load_documents
kb = KnowledgeBase()
kb.add_documents(load_documents("examples/data").documents)
state = run_agentic_rag(sys.argv[2], kb, OfflineModel())
print(json.dumps({"answer": state["answer"], "trace": [e["summary"] for e in state["trace"]],
                  "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m])}))
"""
    runs = {how: json.loads(subprocess.run([sys.executable, "-c", code, how, QUESTION], cwd=ROOT, check=True,
                                           capture_output=True, text=True).stdout) for how in ("absent", "present")}
    assert runs["absent"]["imported"] == [] and runs["present"]["imported"]
    assert runs["absent"]["answer"] == runs["present"]["answer"] and runs["absent"]["trace"] == runs["present"]["trace"]
