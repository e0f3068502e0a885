"""The knowledge base, in layers (each a folder; the text layer it builds on is agentic_rag.text):

- ingestion: files to Documents (Markdown, HTML, PDF, Word, images, JSON lines), and chunking;
- embedders: text to vectors (hashing, e5, an OpenAI-compatible server);
- indexes: BM25, vectors, the knowledge graph, filters, fusion and rerank;
- the engine, here: the search template and every query written once over a store port (_engine),
  the port itself, a store's snapshot and writes (_port), the plans, fusion and graph ranking the
  engine runs (_search), what a knowledge base promises (_protocol), chunk records and the built-with
  checks (_records), scoped views (_views), an in-memory store for tests (_memory), and open_kb,
  which opens either store by where it lives (_open);
- folder: the embedded KnowledgeBase, saved to a folder of segments;
- postgres: PostgresKnowledgeBase, in PostgreSQL with pgvector.
"""
# Names written `NAME as NAME` are not public (not in __all__ nor the reference docs): what the
# command line, the service and the benchmarks take from here, so that they need no private module.
from ..text import split_sentences, tokenize
from ._hit import Hit
from ._layout import MANIFEST as MANIFEST
from ._layout import check_not_in_segment as check_not_in_segment
from ._memory import MemoryKnowledgeBase as MemoryKnowledgeBase
from ._open import check_address as check_address
from ._open import open_kb
from ._open import saved_embedder as saved_embedder
from ._open import saved_vectors_count as saved_vectors_count
from ._open import writing as writing
from ._protocol import KnowledgeBaseBackend
from ._records import ADD_BATCH as ADD_BATCH
from ._records import AddResult
from ._records import index_text as index_text
from .embedders import (
           EMBEDDERS,
           E5Embedder,
           Embedder,
           HashingEmbedder,
           OpenAIEmbedder,
           SymmetricEmbedder,
           make_embedder,
)
from .folder import FILL_BATCH as FILL_BATCH
from .folder import FORMAT_VERSION as FORMAT_VERSION
from .folder import KnowledgeBase, writer_lock
from .folder import os_cause as os_cause
from .folder import read_generation as read_generation
from .indexes import BM25, LexicalReranker, Reranker, reciprocal_rank_fusion, score_fusion
from .ingestion import Document, LoadResult, chunk_text, load_documents
from .postgres import PostgresKnowledgeBase
from .postgres import safe_url as safe_url

__all__ = ["KnowledgeBase", "PostgresKnowledgeBase", "KnowledgeBaseBackend", "open_kb", "AddResult", "Hit",
           "writer_lock", "Document", "LoadResult", "load_documents", "chunk_text", "split_sentences", "tokenize",
           "BM25", "reciprocal_rank_fusion", "score_fusion", "LexicalReranker", "Reranker",
           "EMBEDDERS", "Embedder", "SymmetricEmbedder", "HashingEmbedder", "E5Embedder",
           "OpenAIEmbedder", "make_embedder"]
