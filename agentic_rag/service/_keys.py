"""API keys and their scopes: which collections a key may read and write, and the filter over chunk
metadata that every search made with it keeps to. Keys are kept hashed (sha256), in a JSON file
that is read again when it changes:

    {"keys": [
      {"id": "acme-reader", "sha256": "<hex digest of the key>", "read": ["docs"], "filter": {"tenant": "acme"}},
      {"id": "hr-writer", "sha256": "...", "write": ["hr"], "filter": {"groups": ["hr", "all"]}},
      {"id": "operator", "sha256": "...", "read": ["*"], "write": ["*"]}
    ]}

A write grant is a read grant too; "*" names every collection. A key with no filter sees its
collections whole. Keys given the older way (AGENTIC_RAG_READ_KEYS, or a keys file of lines
`read KEY` / `write KEY`) read, or read and write, every collection with no filter."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..core import ConfigurationError, write_text_atomic
from ..kb.indexes import check_filters

log = logging.getLogger("agentic_rag.service")
ALL = "*"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def digest(key: str) -> str:
    """The sha256 hex digest a keys file keeps of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Scope:
    """What one key may do: read and write these collections (ALL: every one), every search keeping
    to `filter`. `key_id` names it in logs and access lines; `digest` is its key's sha256."""

    key_id: str
    digest: str
    read: frozenset[str] = frozenset()
    write: frozenset[str] = frozenset()
    filter: dict = field(default_factory=dict, hash=False, compare=False)

    def may(self, need: str, collection: str) -> bool:
        """Whether the key may `need` ("read" or "write") on `collection`; a writer may read."""
        granted = self.write if need == "write" else self.read | self.write
        return ALL in granted or collection in granted

    def collections(self, names: Iterable[str]) -> list[str]:
        """Those of `names` the key may read."""
        return [name for name in names if self.may("read", name)]

    @property
    def owner(self) -> str:
        """What the key's conversations are bound to: its digest and its filter, so that a key whose
        filter changed does not carry evidence of the old scope into a new turn."""
        return f"{self.digest}:{json.dumps(self.filter, sort_keys=True, ensure_ascii=False)}"


class KeyRing:
    """The keys a service accepts, looked up in constant time (every digest is compared, so the time
    says nothing of which key is near); `file` is read again whenever it changes on disk."""

    def __init__(self, scopes: Iterable[Scope] = (), file: str | Path | None = None,
                 collections: Iterable[str] | None = None):
        self._fixed = list(scopes)
        self._collections = None if collections is None else frozenset(collections)
        self.file = Path(file) if file is not None else None
        self._stamp: tuple | None = None
        self._from_file: list[Scope] = []
        self._lock = threading.Lock()
        if self.file is not None:
            self._stamp = _stamp(self.file)  # before reading: a change meanwhile is read at the next look
            self._from_file = read_keys_file(self.file, self._collections)

    def __bool__(self) -> bool:
        """Whether keys are asked for: keys were given, or a keys file. A keys file emptied while the
        server runs lets no one in; it never opens the server."""
        return bool(self._fixed) or self.file is not None

    def scopes(self) -> list[Scope]:
        """The keys in force: those given, and the file's as it now stands. Read again, a grant of a
        collection this server does not serve grants nothing (logged), so that one key's typo does not
        keep every other change out; a file that cannot be read at all keeps the keys it last held
        (logged), so that a broken file neither opens nor closes the service."""
        if self.file is not None and _stamp(self.file) != self._stamp:
            with self._lock:
                stamp = _stamp(self.file)
                if stamp != self._stamp:
                    try:
                        self._from_file = read_keys_file(self.file, self._collections, strict=False)
                        log.info("keys file %s read again: %d keys", self.file, len(self._from_file))
                    except ConfigurationError as exc:
                        log.error("keys file not read again, the keys it last held stay in force: %s", exc)
                    self._stamp = stamp
        return self._fixed + self._from_file

    def lookup(self, key: str) -> Scope | None:
        """The scope of `key`, or None when it is no key of the ring."""
        given = digest(key).encode()
        found = None
        for scope in self.scopes():
            if hmac.compare_digest(given, scope.digest.encode()) and found is None:
                found = scope
        return found


def _stamp(path: Path) -> tuple | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size, s.st_ino


def legacy_scopes(read_keys: Iterable[str], write_keys: Iterable[str]) -> list[Scope]:
    """Plain keys given the older way: a read key reads every collection, a write key writes too."""
    keys = [(k, False) for k in read_keys] + [(k, True) for k in write_keys]
    return [Scope(key_id=f"key-{digest(k)[:8]}", digest=digest(k), read=frozenset({ALL}),
                  write=frozenset({ALL}) if writes else frozenset()) for k, writes in keys]


def read_keys_file(path: Path, collections: frozenset[str] | None = None, strict: bool = True) -> list[Scope]:
    """The scopes of a JSON keys file (see the module's text); a bad one raises naming the entry and
    the fix. With `collections`, a grant must name one of them (or ALL); not `strict`, a grant of
    another is dropped with a warning in the log."""
    return _scopes_of(_entries(path), path, collections, strict)


def _scopes_of(entries: list, path: Path, collections: frozenset[str] | None = None,
               strict: bool = True) -> list[Scope]:
    scopes: list[Scope] = []
    seen: set[str] = set()
    for number, entry in enumerate(entries, 1):
        where = f"{path} key {number}"
        scope = _scope(entry, where, collections, strict)
        if scope.key_id in seen or scope.digest in {s.digest for s in scopes}:
            raise ConfigurationError(f"{where}: id {scope.key_id!r} or its sha256 is given twice; give each key once")
        seen.add(scope.key_id)
        scopes.append(scope)
    return scopes


def _scope(entry: object, where: str, collections: frozenset[str] | None, strict: bool = True) -> Scope:
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where}: an entry is an object {{\"id\", \"sha256\", \"read\", \"write\", "
                                 f"\"filter\"}}")
    unknown = set(entry) - {"id", "sha256", "read", "write", "filter"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown fields {sorted(map(str, unknown))[:5]}; use id, sha256, read, "
                                 f"write, filter")
    key_id, hashed = entry.get("id"), entry.get("sha256")
    if not isinstance(key_id, str) or not _ID.fullmatch(key_id):
        raise ConfigurationError(f"{where}: 'id' must be 1-64 letters, digits or _.:- (it names the key in logs)")
    if not isinstance(hashed, str) or not _DIGEST.fullmatch(hashed):
        raise ConfigurationError(f"{where} ({key_id}): 'sha256' must be the key's sha256 as 64 lowercase hex digits "
                                 f"(agentic-rag keys add makes a key and its entry)")
    grants: dict[str, frozenset[str]] = {}
    if not entry.get("read") and not entry.get("write"):
        raise ConfigurationError(f"{where} ({key_id}): the key grants nothing; give 'read' or 'write' collections")
    for need in ("read", "write"):
        names = entry.get(need, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError(f"{where} ({key_id}): {need!r} must be a list of collection names (or \"*\")")
        missing = [n for n in names if collections is not None and n != ALL and n not in collections]
        if missing and strict:
            raise ConfigurationError(f"{where} ({key_id}): no collection {missing[0]!r}; the collections are "
                                     f"{', '.join(sorted(collections or ())) or 'none'}")
        if missing:
            log.warning("%s (%s): no collection %r here; that grant grants nothing", where, key_id, missing[0])
        grants[need] = frozenset(n for n in names if n not in missing)
    try:
        conditions = check_filters(entry.get("filter") or {})
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where} ({key_id}): {exc}") from None
    return Scope(key_id, hashed, grants["read"], grants["write"], dict(conditions))


def keys_lock(path: Path) -> Path:
    """The lock file beside a keys file: hidden, one dot however the keys file is named
    (keys.json and .keys.json both lock .keys.json.lock), so one ignore pattern covers it."""
    return path.with_name(f".{path.name.lstrip('.')}.lock")


def change_keys_file(path: Path, key_id: str, entry: dict | None) -> None:
    """Add `entry` (a keys file entry, id `key_id`) to the keys file, or with None remove `key_id`,
    one writer at a time (an flock on keys_lock(path)), so that two changes at once both land."""
    import fcntl

    with open(keys_lock(path), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = _entries(path) if path.exists() else []
        held = [e for e in entries if e.get("id") == key_id]
        if entry is not None and held:
            raise ConfigurationError(f"{path} already has a key {key_id!r}; remove it first, or choose another id")
        if entry is None and not held:
            raise ConfigurationError(f"{path} has no key {key_id!r}")
        entries = [e for e in entries if e.get("id") != key_id] + ([entry] if entry is not None else [])
        _scopes_of(entries, path)  # every entry checked before the file changes
        write_keys_file(path, entries)


def _entries(path: Path) -> list:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read the keys file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"the keys file {path} is not UTF-8 JSON ({exc}); write "
                                 f'{{"keys": [{{"id", "sha256", "read", "write", "filter"}}]}}') from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigurationError(f'the keys file {path} holds no "keys" list; write {{"keys": [...]}}')
    return entries


def write_keys_file(path: Path, scopes: list[dict]) -> None:
    """Write a keys file whole (write_text_atomic: a reader sees the old file or the new, never half)."""
    write_text_atomic(path, json.dumps({"keys": scopes}, indent=2, ensure_ascii=False) + "\n")


def keys_from(environ: Mapping[str, str], file: str | None = None) -> tuple[list[str], list[str]]:
    """(read keys, write keys): AGENTIC_RAG_READ_KEYS and AGENTIC_RAG_WRITE_KEYS (comma-separated),
    and a keys file of lines `read KEY` or `write KEY` (# starts a comment)."""
    reads = [k.strip() for k in environ.get("AGENTIC_RAG_READ_KEYS", "").split(",") if k.strip()]
    writes = [k.strip() for k in environ.get("AGENTIC_RAG_WRITE_KEYS", "").split(",") if k.strip()]
    if file:
        try:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the keys file {file}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            kind, _, key = line.partition(" ")
            if kind not in ("read", "write") or not key.strip():
                raise ConfigurationError(f"{file} line {number}: write 'read KEY' or 'write KEY'")
            (reads if kind == "read" else writes).append(key.strip())
    if any(len(k) < 16 for k in reads + writes):
        raise ConfigurationError("an API key is shorter than 16 characters; use long random keys "
                                 "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return reads, writes
