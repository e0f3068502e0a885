"""The loop's steps: plain functions with explicit arguments that return values. None changes the
state or its arguments, with one exception: route_query (through ToolRegistry.select) marks on the
run's ToolRegistry a tool whose argument finder failed, so that no later selection tries it again;
the loop takes those failures from the registry (take_failures) into the trace. The loop's own
decisions that ask no model (planning, the bridge, convergence and stalls, refusals) are steps in
_plan, _bridge, _progress, _decisions and _refusal beside these, not exported."""
from ._act import call_tool
from ._answer import generate_answer, verify_citations
from ._extract import triple_extractor
from ._faithfulness import check_faithfulness, repair_answer
from ._queries import condense_query, decompose_query, rewrite_query
from ._route import route_query
from ._search import SearchOutcome, graph_search, pagerank_search, vector_search
from ._verify import question_weights, quick_grade, unseen_terms, verify_sufficiency

__all__ = ["condense_query", "route_query", "rewrite_query", "decompose_query",
           "vector_search", "graph_search", "pagerank_search", "SearchOutcome",
           "call_tool", "verify_sufficiency", "quick_grade", "question_weights", "unseen_terms", "generate_answer",
           "verify_citations", "check_faithfulness", "repair_answer", "triple_extractor"]
