"""The evidence item: a retrieved passage or a tool's result, as steps, tools and the loop pass it on,
and the way a citation names where it is."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict


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
    page: int                   # the page of a PDF its chunk is from (physical, 1-based)
    page_label: str             # that page's printed label, when the PDF has page labels ("xii", "21")
    section: str                # the heading of the Word or HTML section its chunk is from
    media: str                  # "image": the passage is an image's description, its source the image
    carried: bool               # a passage the conversation's previous answer cited, carried into this turn


def new_evidence(id: str, doc_id: str, source: str, text: str, *, title: str = "", kind: str = "passage",
                 ranks: dict[str, int] | None = None, path: list[str] | None = None, query: str | None = None,
                 rank: int | None = None, relevance: float | None = None, page: int | None = None,
                 page_label: str | None = None, section: str | None = None, media: str | None = None) -> Evidence:
    """An evidence item; the optional keys (path, query, rank, relevance, page, page_label, section,
    media) are present only when given."""
    item = Evidence(id=id, doc_id=doc_id, source=source, title=title, text=text, kind=kind, ranks=dict(ranks or {}))
    optional = {"path": path, "query": query, "rank": rank, "relevance": relevance, "page": page,
                "page_label": page_label,
                "section": section, "media": media}  # in the order saved states and traces write them
    # each value's type is its parameter's, which mypy cannot follow through the dict
    item.update({key: value for key, value in optional.items() if value is not None})  # type: ignore[typeddict-item]
    return item


def cited_as(item: Mapping[str, Any]) -> str:
    """Where a cited passage is: "contract-a.pdf, p. 3", "manual.html § Login", or its source; a PDF
    page with a printed label is cited by it ("faq.pdf, p. 21" for physical page 29)."""
    if item.get("page_label"):
        return f"{item['source']}, p. {item['page_label']}"
    if item.get("page") is not None:
        return f"{item['source']}, p. {item['page']}"
    return f"{item['source']} § {item['section']}" if item.get("section") else item["source"]


def source_line(item: Mapping[str, Any]) -> str:
    """A cited passage as a list of sources names it: its title (or document id) and where it is
    (cited_as); the title alone when it has no source to add (a text sent without one)."""
    name, where = item.get("title") or item["doc_id"], cited_as(item)
    return f"{name} ({where})" if where and where != name else name
