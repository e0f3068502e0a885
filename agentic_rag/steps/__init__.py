"""The loop's steps: plain functions with explicit arguments that return values and change nothing."""
from .act import call_tool
from .answer import generate_answer, verify_citations
from .extract import triple_extractor
from .faithfulness import check_faithfulness, repair_answer
from .queries import decompose_query, rewrite_query
from .route import route_query
from .search import SearchOutcome, graph_search, vector_search
from .verify import quick_grade, verify_sufficiency

__all__ = ["call_tool", "generate_answer", "verify_citations", "check_faithfulness", "repair_answer",
           "decompose_query", "rewrite_query", "route_query", "SearchOutcome", "graph_search", "vector_search", "quick_grade",
           "verify_sufficiency", "triple_extractor"]
