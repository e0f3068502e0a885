"""One way to open a knowledge base by where it lives: a folder holds the embedded KnowledgeBase,
a postgresql:// URL names a PostgresKnowledgeBase.

    kb = open_kb("kb")                                   # a folder agentic-rag index (or kb.save) wrote
    kb = open_kb("postgresql://rag@db.internal/kb")      # the schema is made if missing
    kb = open_kb("new-kb", create=True); kb.add_documents(docs); kb.save("new-kb")
    with writing("kb"): kb = open_kb("kb"); ...; kb.save("kb")   # no other writer in between

What differs between the two by where they live is decided here, so that the command line asks
these functions (or, once opened, `kb.saves_to_folder`), never which kind of address it holds.
How a folder is laid out (its manifest, the segment folders no other knowledge base may live in)
is kb/_layout's, which the store, ingestion and the command line share.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeGuard

from ..core import Config, ConfigurationError, IndexConfig, RetrievalError, SearchConfig
from ._layout import MANIFEST
from ._protocol import KnowledgeBaseBackend
from .embedders import Embedder
from .folder import KnowledgeBase, check_target, writer_lock
from .indexes import TripleExtractor
from .postgres import PostgresKnowledgeBase, safe_url

DATABASE_SCHEMES = ("postgresql://", "postgres://")  # the two libpq takes
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_WHERE = "give a folder (str or Path) or a postgresql:// URL"


def is_database(kb: object) -> TypeGuard[str]:
    """Whether a knowledge base's path or URL (a --kb value) names a PostgreSQL database, not a folder."""
    return isinstance(kb, str) and kb.startswith(DATABASE_SCHEMES)


def open_kb(path_or_url: str | os.PathLike, embedder: Embedder | None = None,
            config: Config | IndexConfig | SearchConfig | None = None, *, create: bool = False,
            extract_triples: TripleExtractor | None = None, graph_method: str | None = None) -> KnowledgeBaseBackend:
    """The knowledge base saved in a folder or held in a PostgreSQL database (by its URL).

    A folder holding one is loaded (KnowledgeBase.load: the embedder and the config's chunking
    must be the ones it was built with; None takes them from it). A folder holding none (missing
    or empty) is a RetrievalError ("no knowledge base at ...") unless `create`, which gives a new,
    empty KnowledgeBase that `kb.save(folder)` writes there: a mistyped folder is never taken for
    a new one. A database is opened and its schema made if missing, `create` or not: a mistyped
    URL names no database, and connecting fails. `extract_triples` and `graph_method` (its name,
    saved with it) build a new embedded knowledge base's graph with a model; a saved one keeps the
    graph it was built with (`kb.graph_method` says which), and a database offers none (an error).
    A value that is neither a folder nor a postgresql:// or postgres:// URL is a ConfigurationError."""
    if is_database(path_or_url):
        if extract_triples is not None or graph_method not in (None, "names"):
            raise ConfigurationError("a PostgreSQL knowledge base builds its graph from the names that share a "
                                     "sentence; a graph by a model (extract_triples, --graph-model) is not offered "
                                     "for it yet")
        return PostgresKnowledgeBase(path_or_url, embedder, config)
    folder = _folder(path_or_url)
    if create and not (folder / MANIFEST).exists():
        check_target(folder)  # a folder it can be saved in: not under a file, writable
        return KnowledgeBase(embedder, config, extract_triples=extract_triples, graph_method=graph_method)
    return KnowledgeBase.load(folder, embedder, config, extract_triples=extract_triples)


def saved_embedder(path_or_url: str | os.PathLike) -> dict | None:
    """The embedder a folder's knowledge base was saved with ({"name", "dimension"}), read from its
    manifest without loading it; None for a database, or a folder whose manifest is missing or
    unreadable (opening it says what is wrong)."""
    built = _manifest(path_or_url).get("embedder")
    if isinstance(built, dict) and isinstance(built.get("name"), str) and isinstance(built.get("dimension"), int):
        return {"name": built["name"], "dimension": built["dimension"]}
    return None


def saved_vectors_count(path_or_url: str | os.PathLike) -> tuple[int, int] | None:
    """(chunks, of them with a vector) of a folder's knowledge base, read from its manifest as
    saved_embedder reads it; None where saved_embedder gives None, or for a manifest written before
    vectors were counted (then every chunk has one)."""
    counts = _manifest(path_or_url).get("counts")
    if isinstance(counts, dict) and all(isinstance(counts.get(k), int) for k in ("chunks", "vectors")):
        return counts["chunks"], counts["vectors"]
    return None


def _manifest(path_or_url: str | os.PathLike) -> dict:
    """A folder's manifest as JSON, unchecked; {} for a database, or one missing or unreadable."""
    if is_database(path_or_url):
        return {}
    try:
        manifest = json.loads((_folder(path_or_url) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep
        return {}
    return manifest if isinstance(manifest, dict) else {}


@contextmanager
def writing(path_or_url: str | os.PathLike, *, create: bool = False, wait_s: float = 0.0,
            on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of a folder's knowledge base from load to save, so that two writers never
    lose each other's changes; a database has nothing to hold (every write is a transaction of its
    own). Taken before the knowledge base is opened, so decided by its address: a folder is checked
    first (ConfigurationError or StorageError for one that cannot be written), a missing one is a
    RetrievalError unless `create` (it is then made), and another writer is waited for as
    writer_lock waits (`wait_s`, `on_wait`)."""
    folder = check_address(path_or_url)
    if folder is None:
        yield
        return
    check_target(folder)  # before any reading or embedding: a bad folder fails at once
    if not create and not folder.is_dir():
        raise RetrievalError(f"no knowledge base at {folder}; build one with: agentic-rag index PATH --kb {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    with writer_lock(folder, wait_s, on_wait):
        yield


def check_address(path_or_url: str | os.PathLike) -> Path | None:
    """The folder a knowledge base's address names, None when it names a database; what names
    neither (not a str or path, empty, or another URL) is a ConfigurationError."""
    if isinstance(path_or_url, os.PathLike):
        path_or_url = os.fspath(path_or_url)
    if not isinstance(path_or_url, str):
        raise ConfigurationError(f"a knowledge base is opened by where it lives, not by a "
                                 f"{type(path_or_url).__name__}; {_WHERE}")
    if _URL.match(path_or_url) and not is_database(path_or_url):
        raise ConfigurationError(f"{safe_url(path_or_url)}: not a knowledge base's address; {_WHERE} "
                                 f"(or postgres://)")
    if not path_or_url.strip():
        raise ConfigurationError(f"the knowledge base's folder is empty text; {_WHERE}")
    return None if is_database(path_or_url) else Path(path_or_url)


def _folder(path_or_url: str | os.PathLike) -> Path:
    """The folder a str or path names; what check_address refuses, or a file, is refused."""
    check_address(path_or_url)
    folder = Path(path_or_url)
    if folder.exists() and not folder.is_dir():
        held = (folder.parent / MANIFEST).is_file()
        raise ConfigurationError(f"{folder} is a file, not a knowledge base's folder; give "
                                 + (f"the folder holding it: {folder.parent}" if held else
                                    "the folder holding one (or a new folder, with create=True)"))
    return folder
