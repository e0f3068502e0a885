"""Who may call a service: its plain read and write keys, or, under a collections app, the scope the
app checked and put in the request's environ (SCOPE)."""
from __future__ import annotations

import hmac
from collections.abc import Iterable

from ._http import SCOPE, ServiceError, given_key
from ._keys import Scope
from ._routes import Need


class Access:
    """A service's keys (a write key may read too) and the collection it serves, by `name`."""

    def __init__(self, read_keys: Iterable[str] = (), write_keys: Iterable[str] = (), name: str = "default"):
        self.write_keys = tuple(write_keys)
        self.read_keys = tuple(read_keys) + self.write_keys  # a write key may read too
        self.name = name

    def authorize(self, environ: dict, need: Need) -> None:
        """Keys, when any are configured: a read key for reads, a write key for writes, compared in
        constant time (every key is compared, so the time does not say which one is near). A request
        a collections app passes on carries its caller's Scope, checked there."""
        if need is None or SCOPE in environ or not self.read_keys:
            return
        given = given_key(environ)
        if not given:
            raise ServiceError(401, "unauthorized", "an API key is needed: send 'Authorization: Bearer KEY'",
                               [("WWW-Authenticate", "Bearer")])
        reads = [hmac.compare_digest(given.encode(), key.encode()) for key in self.read_keys]
        writes = [hmac.compare_digest(given.encode(), key.encode()) for key in self.write_keys]
        if not any(reads):
            raise ServiceError(401, "unauthorized", "the API key is not valid", [("WWW-Authenticate", "Bearer")])
        if need == "write" and not any(writes):
            raise ServiceError(403, "forbidden", "this key may read but not write; use a write key")

    @staticmethod
    def scope_filter(environ: dict) -> dict:
        """The filter the caller's key keeps every search to ({}: none)."""
        scope: Scope | None = environ.get(SCOPE)
        return scope.filter if scope is not None else {}

    def owner_key(self, environ: dict) -> str | None:
        """What the caller's conversations are bound to: its key (None when the service has none), or
        under a collections app this collection and the key's scope (its digest and filter)."""
        scope: Scope | None = environ.get(SCOPE)
        if scope is not None:
            return f"{self.name}|{scope.owner}"
        return given_key(environ) if self.read_keys else None
