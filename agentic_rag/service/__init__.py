"""The library as an HTTP service: a WSGI application (no framework; mount it in any WSGI stack)
and `agentic-rag serve`, which runs it on waitress. Needs the `serve` extra:
pip install 'agentic-rag[serve]'. See docs/how-to/service.md."""
from ._app import MODEL_ID, Service, ServiceError, ServiceLimits, keys_from
from ._cache import AnswerCache, cache_key
from ._collections import Collections, create_collections
from ._keys import KeyRing, Scope, legacy_scopes


def create_app(model, kb_dir=None, kb=None, **options) -> Service:
    """The WSGI application over one knowledge base (a saved folder, or one in memory); options as
    Service takes them: tools, config, model_name, read_keys, write_keys, limits, cache_size,
    cache_ttl_s, loader, multiprocess_dir, state_dir (where chat conversations are kept)."""
    return Service(model, kb_dir, kb, **options)


__all__ = ["MODEL_ID", "AnswerCache", "Collections", "KeyRing", "Scope", "Service", "ServiceError", "ServiceLimits",
           "cache_key", "create_app", "create_collections", "legacy_scopes",
           "keys_from"]
