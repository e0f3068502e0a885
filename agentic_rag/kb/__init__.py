"""The knowledge base, in layers (each a folder; the text layer it builds on is agentic_rag.text):

- ingestion: files to Documents (Markdown, HTML, PDF, Word, images, JSON lines), and chunking;
- embedders: text to vectors (hashing, e5, an OpenAI-compatible server);
- indexes: BM25, vectors, the knowledge graph, filters, fusion and rerank;
- backends: what a knowledge base promises (the protocol), the embedded one with its segment
  persistence, PostgreSQL, and open_kb, which opens either by where it lives.
"""
from ..text._sentences import split_sentences
from ..text._tokenize import tokenize
from ._hit import Hit
from .backends._core import AddResult
from .backends._embedded import KnowledgeBase
from .backends._open import open_kb
from .backends._postgres import PostgresKnowledgeBase
from .backends._protocol import KnowledgeBaseBackend
from .backends._store import writer_lock
from .embedders._embedders import EMBEDDERS, E5Embedder, Embedder, HashingEmbedder, SymmetricEmbedder, make_embedder
from .embedders._openai import OpenAIEmbedder
from .indexes._bm25 import BM25
from .indexes._fusion import reciprocal_rank_fusion, score_fusion
from .indexes._rerank import LexicalReranker, Reranker
from .ingestion._chunking import chunk_text
from .ingestion._documents import Document, LoadResult, load_documents

__all__ = ["KnowledgeBase", "PostgresKnowledgeBase", "KnowledgeBaseBackend", "open_kb", "AddResult", "Hit",
           "writer_lock", "Document", "LoadResult", "load_documents", "chunk_text", "split_sentences", "tokenize",
           "BM25", "reciprocal_rank_fusion", "score_fusion", "LexicalReranker", "Reranker",
           "EMBEDDERS", "Embedder", "SymmetricEmbedder", "HashingEmbedder", "E5Embedder",
           "OpenAIEmbedder", "make_embedder"]
