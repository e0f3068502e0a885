"""The knowledge base: loading, chunking, tokens, BM25, embedders, vectors, fusion, persistence."""
from .bm25 import BM25
from .chunking import chunk_text, split_sentences
from .documents import Document, LoadResult, load_documents
from .embedders import EMBEDDERS, Embedder, HashingEmbedder, USEEmbedder, make_embedder
from .fusion import reciprocal_rank_fusion
from .hit import Hit
from .knowledge_base import AddResult, KnowledgeBase
from .rerank import LexicalReranker, Reranker
from .tokenize import tokenize

__all__ = ["BM25", "chunk_text", "split_sentences", "Document", "LoadResult", "load_documents", "EMBEDDERS",
           "Embedder", "HashingEmbedder", "USEEmbedder", "make_embedder", "reciprocal_rank_fusion", "Hit",
           "AddResult", "KnowledgeBase", "LexicalReranker", "Reranker", "tokenize"]
