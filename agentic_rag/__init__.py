"""agentic_rag: framework-free agentic retrieval-augmented question answering, offline by default.

    from agentic_rag import KnowledgeBase, OfflineModel, run_agentic_rag, load_documents
    kb = KnowledgeBase()
    kb.add_documents(load_documents("examples/data").documents)
    state = run_agentic_rag("登录报错的问题在 2.3.1 版本里修复了吗？", kb, OfflineModel())
    print(state["answer"], state["stop_reason"])

Everything public is imported from here (docs/reference/api.md lists it); modules whose names start
with an underscore are internal and may change. The subpackages kb, models, steps, tools, eval and
mcp are public namespaces too.
"""
from typing import Any as _Any

from .core import (
    AccessDenied,
    AgenticRAGError,
    Answer,
    BudgetExceeded,
    Condensed,
    Config,
    ConfigurationError,
    ConnectionLost,
    DeadlineExceeded,
    Decomposition,
    Evidence,
    Faithfulness,
    Grade,
    GradedAnswer,
    IndexConfig,
    ModelError,
    ModelOutputError,
    RetrievalError,
    Rewrite,
    RouteDecision,
    RunConfig,
    SearchConfig,
    StorageError,
    SubQuery,
    ToolError,
    Triple,
    Triples,
    WriteConflict,
    cited_as,
    new_evidence,
)
from .kb import (
    AddResult,
    Document,
    E5Embedder,
    Embedder,
    HashingEmbedder,
    Hit,
    KnowledgeBase,
    KnowledgeBaseBackend,
    LexicalReranker,
    LoadResult,
    OpenAIEmbedder,
    PostgresKnowledgeBase,
    Reranker,
    SymmetricEmbedder,
    chunk_text,
    load_documents,
    make_embedder,
    open_kb,
    tokenize,
    writer_lock,
)
from .loop import (
    STOP_REASONS,
    AgentState,
    Conversation,
    Round,
    RunView,
    format_trace,
    new_state,
    render_html,
    run_agentic_rag,
    show,
)
from .mcp import McpServer, mcp_tools
from .models import (
    Endpoint,
    ImageDescriber,
    Meter,
    Model,
    ModelRequest,
    ModelSet,
    OfflineModel,
    OpenAIChatModel,
    ScriptedModel,
    endpoint_from_env,
)
from .steps import (
    SearchOutcome,
    call_tool,
    check_faithfulness,
    condense_query,
    decompose_query,
    generate_answer,
    graph_search,
    pagerank_search,
    question_weights,
    repair_answer,
    rewrite_query,
    route_query,
    triple_extractor,
    unseen_terms,
    vector_search,
    verify_citations,
    verify_sufficiency,
)
from .tools import (
    CALCULATOR,
    SQLDatabase,
    Tool,
    ToolRegistry,
    date_tools,
    named_query,
    shop_tools,
    sql_tool,
    tool_from_function,
    web_search_tool,
)

__version__ = "0.1.0"  # the one place the version is written; setup.cfg reads it (attr: agentic_rag.__version__)

_SERVICE = ("create_app", "ServiceLimits", "create_collections", "KeyRing", "legacy_scopes")


def __getattr__(name: str) -> _Any:  # Any: what each lazily loaded name is
    """Names loaded when first asked for: the HTTP service's, which need the serve extra (pip install
    'agentic-rag[serve]') that importing agentic_rag does not, and the benchmark runner."""
    if name in _SERVICE:
        from . import service

        return getattr(service, name)
    if name == "run_bench":  # the benchmark runner, loaded only by those who run it
        from .eval import run_bench

        return run_bench
    raise AttributeError(f"module 'agentic_rag' has no attribute {name!r}")


__all__ = [
    "__version__",
    # running the agent
    "run_agentic_rag", "Conversation", "Config", "IndexConfig", "SearchConfig", "RunConfig", "new_state", "AgentState",
    "STOP_REASONS", "format_trace", "show", "render_html", "RunView", "cited_as", "Evidence", "new_evidence", "Round",
    # knowledge bases
    "KnowledgeBase", "PostgresKnowledgeBase", "KnowledgeBaseBackend", "open_kb", "AddResult", "Hit", "Document",
    "LoadResult", "load_documents", "chunk_text", "tokenize",
    "writer_lock", "Embedder", "SymmetricEmbedder", "HashingEmbedder", "E5Embedder", "OpenAIEmbedder",
    "make_embedder", "LexicalReranker", "Reranker",
    # models
    "Model", "ModelRequest", "OfflineModel", "ScriptedModel", "OpenAIChatModel", "Endpoint", "endpoint_from_env",
    "ModelSet", "ImageDescriber", "Meter",
    # steps and the values they return
    "condense_query", "route_query", "rewrite_query", "decompose_query", "vector_search", "graph_search",
    "pagerank_search", "call_tool",
    "verify_sufficiency", "question_weights", "unseen_terms", "generate_answer", "verify_citations",
    "check_faithfulness", "repair_answer", "triple_extractor", "SearchOutcome", "RouteDecision", "Condensed", "Rewrite",
    "SubQuery", "Decomposition", "Grade", "Answer", "GradedAnswer",
    "Faithfulness", "Triple", "Triples",
    # tools
    "Tool", "ToolRegistry", "tool_from_function", "CALCULATOR", "date_tools", "shop_tools", "SQLDatabase",
    "named_query", "sql_tool", "web_search_tool",
    # MCP servers' tools (the mcp extra, imported when a server is listed)
    "mcp_tools", "McpServer",
    # errors
    "AgenticRAGError", "ConfigurationError", "AccessDenied", "RetrievalError", "ModelError", "ModelOutputError",
    "BudgetExceeded", "DeadlineExceeded", "StorageError", "WriteConflict", "ConnectionLost", "ToolError",
    # evaluation
    "run_bench",
    # the HTTP service (the serve extra)
    "create_app", "ServiceLimits", "create_collections", "KeyRing", "legacy_scopes",
]
