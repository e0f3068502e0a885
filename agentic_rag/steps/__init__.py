"""The loop's steps: plain functions with explicit arguments that return values. None changes the
state or its arguments, with one exception: route_query (through ToolRegistry.select) marks on the
run's ToolRegistry a tool whose argument finder failed, so that no later selection tries it again;
the loop takes those failures from the registry (take_failures) into the trace."""
from ._act import call_tool
from ._answer import generate_answer, verify_citations
from ._bridge import bridge_names, bridge_search
from ._extract import triple_extractor
from ._faithfulness import check_faithfulness, repair_answer
from ._plan import first_hop_plan, plan_strategy
from ._progress import detect_convergence, detect_stall
from ._queries import decompose_query, rewrite_query
from ._refusal import refusal_reason, refusal_text
from ._route import route_query
from ._search import SearchOutcome, graph_search, vector_search
from ._verify import question_weights, quick_grade, unseen_terms, verify_sufficiency

__all__ = ["route_query", "plan_strategy", "first_hop_plan", "rewrite_query", "decompose_query", "vector_search",
           "graph_search", "SearchOutcome", "bridge_names", "bridge_search", "detect_convergence", "detect_stall",
           "call_tool", "verify_sufficiency", "quick_grade", "question_weights", "unseen_terms", "generate_answer",
           "verify_citations", "check_faithfulness", "repair_answer", "refusal_reason", "refusal_text",
           "triple_extractor"]
