"""The run state: one plain, JSON-serialisable dict per run, its evidence items, and a one-line trace."""
from __future__ import annotations

from dataclasses import asdict
from typing import TypedDict

from ._accounting import count_tokens, new_usage
from ._config import Config
from ._errors import ConfigurationError

STOP_REASONS = ("sufficient", "direct", "max_rounds", "token_budget", "low_confidence", "converged", "deadline",
                "exhausted", "stopped", "error")


class _EvidenceKeys(TypedDict):
    id: str                     # the chunk id, or the call for a tool's result
    doc_id: str                 # the document (or the tool, or the URL) it comes from
    source: str                 # the file, URL or tool call a citation shows
    title: str
    text: str
    kind: str                   # "passage", or the kind of the tool that produced it
    ranks: dict[str, int]       # 1-based rank in each retriever that found it (bm25, vector, graph)


class Evidence(_EvidenceKeys, total=False):
    """One item of the evidence pool, a retrieved passage or a tool's result; built by new_evidence()."""

    path: list[str]             # graph hits: the names that led here
    query: str                  # the search query or tool call that found it
    rank: int                   # its rank in that search
    relevance: float            # its score against the original question: the pool's order
    page: int                   # the page of a PDF its chunk is from
    section: str                # the heading of the Word or HTML section its chunk is from
    media: str                  # "image": the passage is an image's description, its source the image


def new_evidence(id: str, doc_id: str, source: str, text: str, *, title: str = "", kind: str = "passage",
                 ranks: dict[str, int] | None = None, path: list[str] | None = None, query: str | None = None,
                 rank: int | None = None, relevance: float | None = None, page: int | None = None,
                 section: str | None = None, media: str | None = None) -> Evidence:
    """An evidence item; the optional keys (path, query, rank, relevance, page, section, media) are
    present only when given."""
    item = Evidence(id=id, doc_id=doc_id, source=source, title=title, text=text, kind=kind, ranks=dict(ranks or {}))
    optional = {"path": path, "query": query, "rank": rank, "relevance": relevance, "page": page,
                "section": section, "media": media}
    item.update({key: value for key, value in optional.items() if value is not None})
    return item


class _RoundKeys(TypedDict):
    round: int                  # the round's number (state["round"] when it ran)
    route: str                  # vector, multi_hop or tool


class Round(_RoundKeys, total=False):
    """One entry of state["rounds"]: what a round searched or called and how it went (state.md)."""

    source: str                 # retrieval rounds: vector, graph or web
    queries: list[str]          # the queries it ran
    new: int                    # passages it added to the pool
    converged: bool             # it found nothing new, or its best passages overlap the round before's
    exhausted: bool             # no query was left to try
    stalled: bool               # none of its new passages held what the last grade lacked
    grade: float                # its grade's score, once the grade is taken
    incomplete_answer: bool     # the answer left a part out and asked for another round
    tool: str                   # tool rounds: the tool called
    error: str | None           # tool rounds: why the call failed, or None


class AgentState(TypedDict):
    """What each key holds. The loop is the only code that changes it."""

    question: str               # the question as asked; never overwritten
    config: dict                # the settings of this run
    phase: str                  # the next phase: route, search, tool, verify, generate, grade, check or done
    round: int                  # retrieval rounds run so far
    route: dict | None          # the latest routing decision
    rounds: list[Round]         # one per round (see Round)
    queries_tried: list[str]    # every search query run, so none is repeated
    subqueries: list[dict]      # the latest decomposition (query, depends_on)
    parts: list[str]            # the parts an answer must cover (comparisons, sub-questions)
    used_tools: list[str]
    sources_tried: list[str]    # retrieval sources used so far (vector, graph, web)
    rewrites: int
    repairs: int
    reflections: int            # extra rounds asked for by an incomplete answer
    evidence: list[Evidence]    # the pool, best first (see Evidence)
    grade: dict | None          # the latest sufficiency grade
    grade_pending: bool         # verify was unsure: the grade comes in the answer's reply
    missing: list[str]          # what the latest grade or faithfulness check found missing
    low_rounds: int             # consecutive rounds graded below the low-confidence floor
    last_top: list[str]         # the previous round's best passage ids (convergence)
    draft_answer: str           # the answer as generated, before checks
    draft_reply: dict | None    # the reply that drafted it while its folded grade is still to be taken
    draft_for: list[str]        # the evidence ids a draft kept past its low grade stands for; [] when none
    answer: str                 # the answer as returned
    citations: list[dict]       # evidence the answer cites, each with its number n
    removed_citations: list[int]
    faithfulness: dict | None
    abstained: bool
    abstain_reason: str
    stop_reason: str | None     # one of STOP_REASONS, once retrieval has stopped
    resume_reason: str | None   # the stop reason a hook's stop interrupted, restored on resume
    error: str | None
    trace: list[dict]           # events: round, step, summary, detail, ms, tokens
    timings_ms: dict            # milliseconds per step, and total
    usage: dict                 # model_calls, prompt_tokens, completion_tokens, cost_usd, by_task


def new_state(question: str, config: Config | None = None) -> AgentState:
    """A fresh state for one run; an empty question, or one too long for the budget, is an error."""
    config = config or Config()
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError("the question is empty; ask something")
    tokens = count_tokens(question)
    if tokens > config.token_budget // 4:  # every call carries the question: a quarter of the budget at most
        raise ConfigurationError(f"the question has {tokens} tokens, more than a quarter of the token budget "
                                 f"({config.token_budget}); shorten it or raise the budget (--budget)")
    return AgentState(
        question=question, config={k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        phase="route", round=0, route=None, rounds=[],
        queries_tried=[], subqueries=[], parts=[], used_tools=[], sources_tried=[],
        rewrites=0, repairs=0, reflections=0,
        evidence=[], grade=None, grade_pending=False, missing=[], low_rounds=0, last_top=[], draft_answer="",
        draft_reply=None, draft_for=[], answer="", citations=[],
        removed_citations=[], faithfulness=None, abstained=False, abstain_reason="", stop_reason=None,
        resume_reason=None, error=None, trace=[], timings_ms={}, usage=new_usage())


def upgrade_state(state: dict) -> dict:
    """A saved state in the shape this version runs, changed in place: states saved before the
    typed round keys marked a pending grade as `grade: None` in the last round and a kept draft's
    evidence as `drafted` in the round that kept it (the latest such round counts)."""
    rounds = state["rounds"]
    if "grade_pending" not in state:
        state["grade_pending"] = bool(rounds) and "grade" in rounds[-1] and rounds[-1]["grade"] is None
    if "draft_for" not in state:
        drafted = [r["drafted"] for r in rounds if "drafted" in r]
        state["draft_for"] = list(drafted[-1]) if drafted else []
    state.setdefault("draft_reply", None)
    for entry in rounds:
        entry.pop("drafted", None)
        if "grade" in entry and entry["grade"] is None:
            del entry["grade"]
    return state


def cited_as(item: dict) -> str:
    """Where a cited passage is: "contract-a.pdf, p. 3", "manual.html § Login", or its source."""
    if item.get("page") is not None:
        return f"{item['source']}, p. {item['page']}"
    return f"{item['source']} § {item['section']}" if item.get("section") else item["source"]


def format_trace(state: dict) -> str:
    """The run on one line, e.g. route:vector -> search:d3,d7 -> verify:0.42 -> generate -> faithfulness:0.95."""
    return " -> ".join(event["summary"] for event in state["trace"])
