"""The library as an HTTP service: a WSGI application (no framework; mount it in any WSGI stack)
and `agentic-rag serve`, which runs it on waitress. Needs the `serve` extra:
pip install 'agentic-rag[serve]' (but for `result_json`, the reply shape `ask --json` prints too).
The routes are declared once, in _routes.ROUTES. See docs/how-to/service.md."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kb import KnowledgeBaseBackend
from ..models import Model
from ._app import Service
from ._cache import AnswerCache, cache_key
from ._collections import NAME, Collections, create_collections
from ._http import MODEL_ID, ServiceError
from ._keys import KeyRing, Scope, change_keys_file, digest, keys_from, legacy_scopes, write_keys_file
from ._parts import ServiceLimits
from ._reply import result_json
from ._routes import ROUTES, Route, route_listing

if TYPE_CHECKING:  # loaded when first asked for (see __getattr__): they need waitress
    from ._server import ServerLimits as ServerLimits
    from ._server import create_server as create_server


def create_app(model: Model, kb_dir: str | Path | None = None, kb: KnowledgeBaseBackend | None = None,
               **options: Any) -> Service:
    """The WSGI application over one knowledge base (a saved folder, or one in memory); options as
    Service takes them: tools, config, model_name, read_keys, write_keys, limits, cache_size,
    cache_ttl_s, loader, multiprocess_dir, state_dir (where chat conversations are kept)."""
    return Service(model, kb_dir, kb, **options)


def __getattr__(name: str) -> Any:
    """The server (create_server, ServerLimits), loaded when first asked for: it needs waitress, the
    serve extra, which the rest of this package does not (`ask --json` imports result_json here)."""
    if name in ("create_server", "ServerLimits"):
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MODEL_ID", "NAME", "ROUTES", "AnswerCache", "Collections", "KeyRing", "Route", "Scope", "ServerLimits",
           "Service", "ServiceError", "ServiceLimits", "cache_key", "change_keys_file", "create_app",
           "create_collections", "create_server", "digest", "keys_from", "legacy_scopes", "result_json",
           "route_listing", "write_keys_file"]
