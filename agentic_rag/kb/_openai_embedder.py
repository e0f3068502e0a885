"""OpenAI-compatible embeddings (/v1/embeddings) behind the embedder protocol."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np

from .._errors import ConfigurationError, ModelError
from .._openai_api import Endpoint, call_error, make_client
from ._embedders import SymmetricEmbedder, _l2_normalize


class OpenAIEmbedder(SymmetricEmbedder):
    """Batched calls with the SDK's retries; vectors cached by content hash, so re-embedding an
    unchanged chunk costs no call. The dimension is asked of the server once, at construction."""

    def __init__(self, model: str, endpoint: Endpoint = Endpoint(), dimension: int | None = None,
                 batch_size: int = 64):
        if not model:
            raise ConfigurationError("the openai embedder needs a model name: --embedding-model NAME")
        self.model, self.endpoint, self.batch_size = model, endpoint, batch_size
        self.name = f"openai:{model}"
        self._client = make_client(endpoint)
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.calls = 0
        probe = self._call(["dimension probe"])
        if dimension is not None and probe.shape[1] != dimension:
            raise ConfigurationError(f"embedding model {model} returns {probe.shape[1]} dimensions, not {dimension}")
        self.dimension = probe.shape[1]

    def _call(self, texts: list[str]) -> np.ndarray:
        try:
            response = self._client.embeddings.create(model=self.model, input=texts)
        except Exception as exc:  # the SDK's errors, after its retries
            raise call_error(exc, f"the embeddings call to {self.model}", self.endpoint) from None
        with self._lock:
            self.calls += 1
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise ModelError(f"{self.model} returned {len(rows)} embeddings for {len(texts)} texts")
        return _l2_normalize(np.asarray([r.embedding for r in rows], np.float32))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed, calling the server only for texts not embedded before."""
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        with self._lock:
            todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items())
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            vectors = self._call([t for _, t in batch])
            with self._lock:
                self._cache.update(zip((k for k, _ in batch), vectors, strict=True))
        with self._lock:
            return np.stack([self._cache[k] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32)
