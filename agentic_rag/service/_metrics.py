"""Health figures in the Prometheus text format, one registry per application (never the global
one), so that two applications in one process keep their own counts. prometheus_client (the serve
extra) is imported when a service is made, so that importing the service's reply shape needs none."""
from __future__ import annotations

from ..core import ConfigurationError
from ..loop import AgentState


class Metrics:
    """What the service counts: requests and latency by endpoint and status, answers by stop reason,
    abstentions, empty retrievals, grades, rounds, failed runs, tokens and cost by model, cache use."""

    def __init__(self, multiprocess_dir: str | None = None):
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError:
            raise ConfigurationError("the service needs the serve extra: pip install 'agentic-rag[serve]'") from None
        self.registry = CollectorRegistry()
        self._multiprocess_dir = multiprocess_dir
        r = self.registry
        self.requests = Counter("agentic_rag_requests", "HTTP requests", ["endpoint", "status"], registry=r)
        self.latency = Histogram("agentic_rag_request_seconds", "HTTP request latency", ["endpoint", "status"],
                                 registry=r, buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.answers = Counter("agentic_rag_answers", "finished runs", ["stop_reason", "abstained"], registry=r)
        self.empty_retrievals = Counter("agentic_rag_empty_retrievals", "runs whose evidence stayed empty",
                                        registry=r)
        self.grades = Counter("agentic_rag_grades", "evidence grades", ["result"], registry=r)
        self.rounds = Histogram("agentic_rag_rounds", "retrieval rounds a run took", registry=r,
                                buckets=(1, 2, 3, 4, 5, 8))
        self.model_errors = Counter("agentic_rag_model_errors", "runs ended by a failure (stop_reason error)",
                                    registry=r)
        self.tokens = Counter("agentic_rag_tokens", "model tokens", ["model", "kind"], registry=r)
        self.cost = Counter("agentic_rag_cost_usd", "model cost in US dollars", ["model"], registry=r)
        self.cache = Counter("agentic_rag_cache", "query cache lookups", ["result"], registry=r)

    def run(self, state: AgentState, model: str) -> None:
        """Count one finished run."""
        self.answers.labels(state["stop_reason"] or "none", str(bool(state["abstained"])).lower()).inc()
        if not state["evidence"] and state["stop_reason"] != "direct":
            self.empty_retrievals.inc()
        for event in state["trace"]:
            if event["step"] == "verify" and "sufficient" in event["detail"]:
                self.grades.labels("pass" if event["detail"]["sufficient"] else "fail").inc()
        self.rounds.observe(state["round"])
        if state["stop_reason"] == "error":
            self.model_errors.inc()
        usage = state["usage"]  # the meter bills no negative count; a counter refuses one, so none is sent
        self.tokens.labels(model, "prompt").inc(max(0, usage["prompt_tokens"]))
        self.tokens.labels(model, "completion").inc(max(0, usage["completion_tokens"]))
        self.cost.labels(model).inc(max(0.0, usage["cost_usd"]))

    def text(self) -> bytes:
        """The figures; with a multiprocess folder (several worker processes), every worker's."""
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess

        if self._multiprocess_dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self._multiprocess_dir)
            return generate_latest(registry)
        return generate_latest(self.registry)
