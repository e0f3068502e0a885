"""OpenTelemetry spans, when opentelemetry-api is installed (the `otel` extra): a run is one span
("invoke_agent agentic-rag"), each step of its trace a child ("agentic_rag.search", ...) and each
model call a grandchild ("chat MODEL"), with the GenAI semantic conventions' attributes (model,
tokens in and out) and ours (round, phase, stop_reason, evidence ids, cost): ids and figures, never
the text of a document, a question or an answer. Spans go to the application's tracer provider;
`agentic-rag serve` sets one up from the standard OTEL_* variables (configure_from_environment).
Without opentelemetry installed nothing is imported and every function here does nothing."""
from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import Token
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

TRACER = "agentic_rag"


@cache
def _trace() -> ModuleType | None:
    """opentelemetry.trace, or None when it is not installed (looked for once)."""
    if importlib.util.find_spec("opentelemetry") is None or importlib.util.find_spec("opentelemetry.trace") is None:
        return None
    from opentelemetry import trace

    return trace


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, kind: str = "internal") -> Iterator[Any]:
    """A span current for the block (None without opentelemetry); an exception marks it failed and goes on."""
    trace = _trace()
    if trace is None:
        yield None
        return
    kinds = {"internal": trace.SpanKind.INTERNAL, "client": trace.SpanKind.CLIENT}
    with trace.get_tracer(TRACER).start_as_current_span(name, kind=kinds[kind],
                                                        attributes=clean(attributes or {})) as current:
        yield current


def set_attributes(current: Span | None, attributes: Mapping[str, Any]) -> None:
    if current is not None:
        current.set_attributes(clean(attributes))


def failed(current: Span | None, message: str) -> None:
    """Mark a span failed (a run that ended with stop_reason "error")."""
    trace = _trace()
    if current is not None and trace is not None:
        current.set_status(trace.Status(trace.StatusCode.ERROR, message[:200]))


def clean(attributes: Mapping[str, Any]) -> dict:
    """Attributes as OpenTelemetry takes them: no None, lists of one plain type."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[key] = [str(v) for v in value] if isinstance(value, (list, tuple)) else value
    return out


# -- the service's request spans, across threads ---------------------------------------------------

def start_request(name: str, headers: Mapping[str, str], attributes: Mapping[str, Any],
                  ) -> tuple[Span, Token[Context]] | tuple[None, None]:
    """A server span for one HTTP request, its parent taken from the request's W3C `traceparent`
    header; (span, token) to end with end_request. (None, None) without opentelemetry."""
    trace = _trace()
    if trace is None:
        return None, None
    from opentelemetry import context, propagate

    parent = propagate.extract({k: v for k, v in headers.items() if v})
    current = trace.get_tracer(TRACER).start_span(name, context=parent, kind=trace.SpanKind.SERVER,
                                                  attributes=clean(attributes))
    return current, context.attach(trace.set_span_in_context(current, parent))


def detach(token: Token[Context] | None) -> None:
    """Make the span before start_request current again in this thread (the request span goes on)."""
    if token is not None:
        from opentelemetry import context

        context.detach(token)


def end_request(current: Span | None, status: int, attributes: Mapping[str, Any]) -> None:
    if current is None:
        return
    current.set_attributes(clean({"http.response.status_code": status, **attributes}))
    if status >= 500:
        failed(current, f"HTTP {status}")
    current.end()


def current_context() -> Context | None:
    """The context to carry into another thread (None without opentelemetry)."""
    if _trace() is None:
        return None
    from opentelemetry import context

    return context.get_current()


@contextmanager
def attached(saved: Context | None) -> Iterator[None]:
    """Run the block in a context current_context saved in another thread."""
    if saved is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(saved)
    try:
        yield
    finally:
        context.detach(token)


# -- the SDK, for `agentic-rag serve` ---------------------------------------------------------------

def configure_from_environment(env: Mapping[str, str], service_name: str = "agentic-rag") -> TracerProvider | None:
    """Set up a tracer provider from the standard variables when they ask for traces
    (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER=otlp or
    console; not with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none); returns it (shut it down
    to flush) or None. The exporter reads its endpoint, headers and timeout from the same variables;
    OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the service (default agentic-rag). `env` is
    the environment (_settings reads it)."""
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    wanted = exporter in ("otlp", "console") or (not exporter and (
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")))
    if not wanted or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or exporter == "none":
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or \
        "http/protobuf"
    if exporter != "console" and protocol != "http/protobuf":
        from ._errors import ConfigurationError

        raise ConfigurationError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: serve exports OTLP over HTTP "
                                 f"(http/protobuf) only; point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP "
                                 f"port (4318)")
    if _trace() is None or importlib.util.find_spec("opentelemetry.sdk") is None:
        from ._errors import ConfigurationError

        raise ConfigurationError("the OTEL_* variables ask for traces, but OpenTelemetry is not installed: "
                                 "pip install 'agentic-rag[otel]' (or unset them)")
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if exporter == "console":
        span_exporter: Any = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, as the SDK reads them
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    return provider
