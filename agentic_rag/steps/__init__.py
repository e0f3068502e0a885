"""The loop's steps: plain functions with explicit arguments that return values and change nothing."""
from ._act import call_tool
from ._answer import generate_answer, verify_citations
from ._extract import triple_extractor
from ._faithfulness import check_faithfulness, repair_answer
from ._queries import decompose_query, rewrite_query
from ._route import route_query
from ._search import SearchOutcome, graph_search, vector_search
from ._verify import question_weights, quick_grade, unseen_terms, verify_sufficiency

__all__ = ["route_query", "rewrite_query", "decompose_query", "vector_search", "graph_search", "SearchOutcome",
           "call_tool", "verify_sufficiency", "quick_grade", "question_weights", "unseen_terms", "generate_answer",
           "verify_citations", "check_faithfulness", "repair_answer", "triple_extractor"]
