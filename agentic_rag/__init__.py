"""agentic_rag: framework-free agentic retrieval-augmented question answering, offline by default.

    from agentic_rag import KnowledgeBase, OfflineModel, run_agentic_rag, load_documents
    kb = KnowledgeBase()
    kb.add_documents(load_documents("examples/data").documents)
    state = run_agentic_rag("登录报错的问题在 2.3.1 版本里修复了吗？", kb, OfflineModel())
    print(state["answer"], state["stop_reason"])
"""
from .config import Config
from .errors import (AgenticRAGError, BudgetExceeded, ConfigurationError, ModelError, ModelOutputError,
                     RetrievalError, ToolError)
from .kb import Document, Hit, KnowledgeBase, load_documents, make_embedder
from .loop import run_agentic_rag
from .models import Meter, Model, ModelRequest, ModelSet, OfflineModel, ScriptedModel
from .state import AgentState, format_trace, new_state
from .steps import (call_tool, check_faithfulness, decompose_query, generate_answer, repair_answer, rewrite_query,
                    route_query, vector_search, verify_citations, verify_sufficiency)
from .tools import CALCULATOR, Tool, ToolRegistry, shop_tools

__version__ = "0.1.0"
__all__ = ["Config", "AgenticRAGError", "BudgetExceeded", "ConfigurationError", "ModelError", "ModelOutputError",
           "RetrievalError", "ToolError", "Document", "Hit", "KnowledgeBase", "load_documents", "make_embedder",
           "run_agentic_rag", "Meter", "Model", "ModelRequest", "ModelSet", "OfflineModel", "ScriptedModel", "AgentState",
           "format_trace", "new_state", "call_tool", "check_faithfulness", "decompose_query", "generate_answer",
           "repair_answer", "rewrite_query", "route_query", "vector_search", "verify_citations",
           "verify_sufficiency", "CALCULATOR", "Tool", "ToolRegistry", "shop_tools"]
