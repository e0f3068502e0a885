"""agentic_rag: framework-free agentic retrieval-augmented question answering, offline by default."""
from .config import Config
from .errors import (AgenticRAGError, ConfigurationError, ModelError, ModelOutputError, RetrievalError,
                     ToolError)
from .kb import Document, Hit, KnowledgeBase, load_documents, make_embedder

__version__ = "0.1.0"
__all__ = ["Config", "AgenticRAGError", "ConfigurationError", "ModelError", "ModelOutputError",
           "RetrievalError", "ToolError", "Document", "Hit", "KnowledgeBase", "load_documents",
           "make_embedder"]
