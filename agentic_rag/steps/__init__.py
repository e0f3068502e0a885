"""The loop's steps: plain functions with explicit arguments that return values. None changes the
state or its arguments, with one exception: route_query (through ToolRegistry.select) marks on the
run's ToolRegistry a tool whose argument finder failed, so that no later selection tries it again;
the loop takes those failures from the registry (take_failures) into the trace. The loop's own
decisions that ask no model (planning, the bridge, convergence and stalls, refusals) are steps in
_plan, _bridge, _progress, _decisions and _refusal beside these, not exported."""
from ._act import call_tool
from ._answer import generate_answer, verify_citations

# for the package's other folders, not public API (the public names are in __all__)
from ._answer import number_citations as number_citations
from ._bridge import bridge_names as bridge_names
from ._bridge import bridge_search as bridge_search
from ._decisions import after_faithfulness as after_faithfulness
from ._decisions import count_low_rounds as count_low_rounds
from ._decisions import wants_tool_first as wants_tool_first
from ._extract import triple_extractor
from ._faithfulness import check_faithfulness, repair_answer
from ._mentions import unheld_names as unheld_names
from ._plan import first_hop_plan as first_hop_plan
from ._plan import plan_strategy as plan_strategy
from ._progress import detect_convergence as detect_convergence
from ._progress import detect_stall as detect_stall
from ._queries import condense_query, decompose_query, rewrite_query
from ._refusal import hedge_note as hedge_note
from ._refusal import refusal_reason as refusal_reason
from ._refusal import refusal_text as refusal_text
from ._refusal import unmentioned_note as unmentioned_note
from ._route import route_query
from ._search import SearchOutcome, graph_search, pagerank_search, vector_search
from ._search import hit_evidence as hit_evidence
from ._search import merge_into_pool as merge_into_pool
from ._search import usable_filters as usable_filters
from ._verify import folded_grade as folded_grade
from ._verify import question_weights, quick_grade, unseen_terms, verify_sufficiency

__all__ = ["condense_query", "route_query", "rewrite_query", "decompose_query",
           "vector_search", "graph_search", "pagerank_search", "SearchOutcome",
           "call_tool", "verify_sufficiency", "quick_grade", "question_weights", "unseen_terms", "generate_answer",
           "verify_citations", "check_faithfulness", "repair_answer", "triple_extractor"]
