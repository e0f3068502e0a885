"""Web search through an HTTP JSON search API in the SearxNG format (`GET URL?q=...&format=json`).
Off unless configured; a timeout and a result limit; each result is cited by its URL and title."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from pydantic import BaseModel

from ..core import ConfigurationError, ToolError
from ._registry import Tool

FRESH = (r"最新|最近|新闻|近期|今天.{0,6}消息|\blatest\b|\brecent(?:ly)?\b|\bnews\b|this (?:week|month)",)


class _Query(BaseModel):
    query: str


def web_search_tool(url: str, timeout: float = 5.0, limit: int = 5, patterns: tuple[str, ...] = FRESH) -> Tool:
    """A `web_search` tool over the search API at `url` (e.g. http://localhost:8888/search)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"web search URL {url!r} must start with http:// or https://")

    def web_search(query: str) -> list[dict]:
        address = f"{url}{'&' if '?' in url else '?'}{urllib.parse.urlencode({'q': query, 'format': 'json'})}"
        try:
            with urllib.request.urlopen(address, timeout=timeout) as response:
                data = json.load(response)
        except (urllib.error.URLError, TimeoutError) as exc:
            raise ToolError(f"web search at {url} failed: {getattr(exc, 'reason', exc)}") from None
        except ValueError:
            raise ToolError(
                f"web search at {url} did not answer JSON; is it a SearxNG-style API with format=json?") from None
        results = [r for r in data.get("results", []) if r.get("url")][:limit]
        if not results:
            raise ToolError(f"web search found nothing for {query!r}")
        return [{"title": r.get("title") or r["url"], "url": r["url"], "text": r.get("content") or r.get("title", "")}
                for r in results]

    return Tool("web_search", "search the web for fresh information; results cite their URL and title",
                web_search, patterns, lambda question, evidence: {"query": question}, _Query, kind="web")
