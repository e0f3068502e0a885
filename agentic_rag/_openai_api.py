"""Where and how to reach an OpenAI-compatible endpoint: the endpoint settings, the SDK client and
one clear error per failed call. Shared by the chat models (models/_openai_client.py) and the
embedder (kb/_openai_embedder.py), so neither imports the other. The `openai` SDK is imported
inside the functions that use it: `import agentic_rag` does not load it (it more than doubled the
import time)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import ModelError

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call: base URL (None = OpenAI), key (None is fine for local servers),
    timeout in seconds, and retries (the SDK's: 408, 409, 429 and 5xx, honouring retry-after)."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2


def endpoint_from_env(environ: Mapping[str, str], base_url: str | None = None, api_key: str | None = None,
                      timeout: float = 60.0, max_retries: int = 2) -> Endpoint:
    """Explicit values first, then AGENTIC_RAG_BASE_URL / AGENTIC_RAG_API_KEY, then OPENAI_BASE_URL /
    OPENAI_API_KEY. Called by the command line, once, with os.environ: nothing reads it at import."""
    return Endpoint(base_url=base_url or environ.get("AGENTIC_RAG_BASE_URL") or environ.get("OPENAI_BASE_URL"),
                    api_key=api_key or environ.get("AGENTIC_RAG_API_KEY") or environ.get("OPENAI_API_KEY"),
                    timeout=timeout, max_retries=max_retries)


def make_client(endpoint: Endpoint) -> openai.OpenAI:
    """An SDK client for the endpoint (one per model or embedder object: no global client)."""
    import openai

    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "no-key-needed",
                         timeout=endpoint.timeout, max_retries=endpoint.max_retries)


def call_error(exc: Exception, what: str, endpoint: Endpoint) -> ModelError:
    """One clear line for a failed call, naming the call and the fix where there is one."""
    import openai

    where = endpoint.base_url or "the OpenAI API"
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"{what} timed out after {endpoint.timeout:g} s at {where} "
                          f"(and {endpoint.max_retries} retries)")
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"{what} could not reach {where}: check the base URL (--base-url or AGENTIC_RAG_BASE_URL)")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError(f"{what} was refused by {where} (HTTP 401): set AGENTIC_RAG_API_KEY or OPENAI_API_KEY")
    if isinstance(exc, openai.APIStatusError):
        message = str(getattr(exc, "message", exc)).splitlines()[0][:200]
        return ModelError(f"{what} failed at {where} with HTTP {exc.status_code}: {message}")
    return ModelError(f"{what} failed: {exc.__class__.__name__}: {exc}")
