"""What the MCP server offers: each tool's arguments (pydantic models, whose JSON schemas the tools
list), its description, and the reads that answer search, list_documents and get_document; the text
of an ask reply; the documents' resource URIs. Plain functions over a knowledge base, no SDK."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from ..core import SEARCH_MODES, ConfigurationError
from ..kb import KnowledgeBaseBackend

Reply = tuple[str, dict, bool]  # a tool's text, its structured content, and whether it is an error result


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArguments(_Arguments):
    query: str = Field(min_length=1, max_length=2_000, description="what to search for")
    k: int = Field(5, ge=1, le=50, description="how many hits")
    mode: Literal[SEARCH_MODES] = Field("hybrid", description="which retrievers")  # type: ignore[valid-type]
    filters: dict[str, Any] | None = Field(None, description='metadata filters, e.g. {"type": "manual"}')


class AskArguments(_Arguments):
    question: str = Field(min_length=1, max_length=2_000, description="the question")
    filters: dict[str, Any] | None = Field(None, description="keep every search of the run to these filters")


class ListArguments(_Arguments):
    after: str = Field("", max_length=1_000, pattern=r"^[^\x00]*$",
                       description="the last doc_id of the page before (the next page)")
    limit: int = Field(50, ge=1, le=200, description="documents on this page")


class GetArguments(_Arguments):
    doc_id: str = Field(min_length=1, max_length=1_000, description="a doc_id list_documents gave")


TOOLS: dict[str, tuple[str, type[_Arguments]]] = {
    "search": ("Search the knowledge base (BM25 and vectors, fused): the best chunks with their sources",
               SearchArguments),
    "ask": ("Answer a question from the knowledge base with the agent: a cited answer, or a refusal when the "
            "documents do not hold it; progress is reported step by step", AskArguments),
    "list_documents": ("The documents held, a page at a time by doc_id", ListArguments),
    "get_document": ("One document's whole text, by doc_id", GetArguments),
}


ANSWER_FIELDS = ("answer", "abstained", "abstain_reason", "citations", "stop_reason", "rounds", "trace_line",
                 "usage", "model", "error")


def answer_text(result: Mapping[str, Any]) -> str:
    """The answer and its sources, as text for a client that shows no structured content."""
    if result["stop_reason"] == "error":
        return f"the run failed: {result.get('error')}"
    sources = [f"[{c['n']}] {c['source']}" + (f" (page {c['page']})" if c.get("page") else "")
               for c in result["citations"]]
    return "\n".join([result["answer"], *(["", "Sources:", *sources] if sources else [])])


def search(kb: KnowledgeBaseBackend, arguments: SearchArguments) -> Reply:
    hits = kb.search(arguments.query, k=arguments.k, mode=arguments.mode, filters=arguments.filters)
    shown = [hit.model_dump(include={"id", "doc_id", "source", "title", "text", "score", "ranks"}) for hit in hits]
    text = "\n\n".join(f"[{i}] {h['title'] or h['doc_id']} ({h['source']})\n{h['text']}"
                       for i, h in enumerate(shown, 1))
    return text or "no chunk matches", {"hits": shown}, False


def list_documents(kb: KnowledgeBaseBackend, arguments: ListArguments) -> Reply:
    page = kb.list_documents(arguments.after, arguments.limit)
    after = page[-1]["doc_id"] if len(page) == arguments.limit else None
    text = "\n".join(f"{d['doc_id']}\t{d['title']}\t{d['source']}" for d in page)
    return text or "no documents", {"documents": page, "next_after": after}, False


def get_document(kb: KnowledgeBaseBackend, arguments: GetArguments) -> Reply:
    chunks = kb.document_chunks(arguments.doc_id)
    if not chunks:
        raise ConfigurationError("no such document here; list_documents gives the doc_ids held")
    text = whole_text(chunks)
    return text, {"doc_id": arguments.doc_id, "title": chunks[0].title, "source": chunks[0].source,
                  "metadata": chunks[0].metadata, "chunks": len(chunks), "text": text}, False


READS: dict[str, Callable[[KnowledgeBaseBackend, Any], Reply]] = {
    "search": search, "list_documents": list_documents, "get_document": get_document}


def whole_text(chunks: list) -> str:
    """A document's text from its chunks, in order (overlapping chunks repeat their overlap)."""
    return "\n\n".join(chunk.text for chunk in chunks)


def document_uri(collection: str, doc_id: str) -> str:
    """A document's resource URI: agentic-rag://COLLECTION/documents/DOC_ID (the id percent-encoded)."""
    return f"agentic-rag://{collection}/documents/{quote(doc_id, safe='')}"
