"""The knowledge base: loading, chunking, tokens, BM25, embedders, vectors, fusion, persistence."""
from ._backend import KnowledgeBaseBackend
from ._bm25 import BM25
from ._chunking import chunk_text, split_sentences
from ._documents import Document, LoadResult, load_documents
from ._embedders import EMBEDDERS, E5Embedder, Embedder, HashingEmbedder, SymmetricEmbedder, make_embedder
from ._fusion import reciprocal_rank_fusion, score_fusion
from ._hit import Hit
from ._knowledge_base import AddResult, KnowledgeBase
from ._openai_embedder import OpenAIEmbedder
from ._postgres import PostgresKnowledgeBase
from ._rerank import LexicalReranker, Reranker
from ._store import writer_lock
from ._tokenize import tokenize

__all__ = ["KnowledgeBase", "PostgresKnowledgeBase", "KnowledgeBaseBackend", "AddResult", "Hit", "writer_lock",
           "Document", "LoadResult", "load_documents", "chunk_text", "split_sentences", "tokenize",
           "BM25", "reciprocal_rank_fusion", "score_fusion", "LexicalReranker", "Reranker",
           "EMBEDDERS", "Embedder", "SymmetricEmbedder", "HashingEmbedder", "E5Embedder",
           "OpenAIEmbedder", "make_embedder"]
