"""The knowledge base a service serves: read from its folder and read again whenever another process
saved a new generation there, or served from memory (or a database); its writes, one at a time
and saved before the reply."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import AgenticRAGError, ConfigurationError, StorageError, WriteConflict
from ..kb import KnowledgeBase, KnowledgeBaseBackend, writer_lock
from ._cache import AnswerCache
from ._http import FULL, RETRY, ServiceError, log, public_message

Change = Callable[[KnowledgeBaseBackend], dict]
SERVED_FILL_BATCH = 64  # chunks a served folder fills per write: a few seconds of e5, which other writes wait for


class ServedKnowledgeBase:
    """With `kb_dir`, the knowledge base is read from that folder, reloaded before a request whenever
    another process saved a new generation there, and every write is saved there (a delta segment)
    before the reply. Without it, `kb` is served from memory and writes stay in memory. `cache` is
    emptied when a write fails, since it may hold answers that saw the dropped change."""

    def __init__(self, kb_dir: str | Path | None, kb: KnowledgeBaseBackend | None, cache: AnswerCache,
                 loader: Callable[[Path], KnowledgeBase] | None = None):
        if kb_dir is not None and kb is not None and not kb.saves_to_folder:
            raise ConfigurationError(f"kb_dir {kb_dir} is a saved folder, but kb ({type(kb).__name__}) does not "
                                     f"save to one: give such a knowledge base (a database) without kb_dir")
        self.kb_dir = Path(kb_dir) if kb_dir is not None else None
        self.cache = cache
        self._load: Callable[[Path], KnowledgeBase] = loader or KnowledgeBase.load
        # what self._load last read from kb_dir, None until it has: a kb given beside kb_dir was
        # loaded by someone else, so the first request reads the folder again rather than trust it
        self._saved: KnowledgeBase | None = None
        if kb is None:
            if self.kb_dir is None:
                raise ConfigurationError("give the service a knowledge base: kb_dir (a saved folder) or kb")
            kb = self._saved = self._load(self.kb_dir)
        self.kb: KnowledgeBaseBackend = kb  # the one served: self._saved with kb_dir
        self._memory_generation = 0
        self._reload = threading.Lock()
        self._writing = threading.Lock()

    def current(self) -> tuple[KnowledgeBaseBackend, str | None]:
        """The knowledge base and its generation, taken together; reloaded first if the folder no
        longer holds what it was loaded from (another process saved, or it was built again)."""
        if self.kb_dir is None:  # in memory, or a database (which names its own generation)
            kb = self.kb
            return kb, f"memory-{self._memory_generation}" if kb.saves_to_folder else kb.generation(None)
        kb = self.kb
        if not _holds_saved(self._saved, self.kb_dir):
            with self._reload:
                kb = self.kb
                if not _holds_saved(self._saved, self.kb_dir):
                    try:
                        kb = self.kb = self._saved = self._load(self.kb_dir)
                    except AgenticRAGError as exc:
                        log.error("the knowledge base cannot be loaded: %s", exc)
                        raise ServiceError(503, "unavailable", f"the knowledge base cannot be loaded: "
                                                               f"{self.public(str(exc))}", RETRY) from None
        return kb, kb.generation(self.kb_dir)

    def write(self, change: Change, wait_s: float) -> dict:
        """Apply one change with no other writer (thread or process) at work, waiting `wait_s` for
        one (then 409), save it, and reply; a change that fails, or fails to save, is dropped (the
        saved knowledge base is read again, and the cache emptied)."""
        started = time.monotonic()
        if not self._writing.acquire(timeout=wait_s):
            raise ServiceError(409, "conflict", f"another write has been going on for {wait_s:g} s; retry")
        try:
            if self.kb_dir is None:
                result = change(self.kb)
                self._memory_generation += 1
                return dict(result, generation=self.current()[1])
            with writer_lock(self.kb_dir, wait_s=max(0.0, wait_s - (time.monotonic() - started))):
                kb, result = self._saved_change(change, self.kb_dir)
            return dict(result, generation=kb.generation(self.kb_dir))
        except WriteConflict:
            raise ServiceError(409, "conflict", "another writer is at work or saved meanwhile; retry") from None
        except StorageError as exc:  # the server's disk, not the request: nothing was saved, nothing is lost
            log.error("a write was not saved: %s", exc)
            status, kind = (507, "insufficient_storage") if exc.errno in FULL else (503, "unavailable")
            raise ServiceError(status, kind, f"{self.public(str(exc))}; nothing was saved") from None
        finally:
            self._writing.release()

    def _saved_change(self, change: Change, folder: Path) -> tuple[KnowledgeBaseBackend, dict]:
        """`change` applied to the folder's knowledge base and saved there, under its writer lock."""
        kb = self.current()[0]
        try:
            result = change(kb)
            if any(result.get(k) for k in ("added", "replaced", "deleted", "filled")):  # else nothing to save
                kb.save(folder)
        except ServiceError:  # a refusal, raised before the change: nothing changed, nothing to read again
            raise
        except BaseException:
            self.cache.clear()
            self.kb = self._saved = self._load(folder)
            raise
        return kb, result

    def fill_vectors(self, stop: threading.Event, batch: int = SERVED_FILL_BATCH, retry_s: float = 30.0) -> int:
        """Give the chunks still waiting for a vector (an `index --background`, or one stopped) theirs,
        `batch` at a time, each batch a write like any other (saved before the next, between other
        writes), until none waits or `stop` is set: what is filled stays filled. A batch that finds
        another writer at work (an index filling the same folder) gives way at once and tries again
        `retry_s` later, so that it never holds up the service's own writes. For a thread beside the
        server (serve starts one per collection); how many it filled."""
        def one_batch(kb: KnowledgeBaseBackend) -> dict:
            return {"filled": kb.fill_vectors(batch, limit=batch) if isinstance(kb, KnowledgeBase) else 0}

        filled = 0
        while not stop.is_set():
            kb = self.current()[0]
            if not isinstance(kb, KnowledgeBase) or not kb.pending_vectors:
                break
            try:
                filled += self.write(one_batch, 0.5)["filled"]
            except ServiceError as exc:  # another writer, or a disk that refused the save: later
                log.warning("filling vectors waits: %s", exc)
                stop.wait(retry_s)
            except Exception:  # the embedder failed: said in the log; the chunks stay searchable by BM25
                log.exception("filling vectors stopped")
                break
        return filled

    def public(self, message: str) -> str:
        """`message` as a client may read it (see public_message): the folder by its name."""
        return public_message(message, self.kb_dir)


def scoped(kb: Any, scope: dict) -> Any:
    """The knowledge base as a key whose filter is `scope` sees it: a restricted view whose searches and
    term weights keep to the scope ({}: the knowledge base itself)."""
    return kb.restricted(scope, scope=True) if scope else kb


def _holds_saved(saved: KnowledgeBase | None, folder: Path) -> bool:
    """Whether what the service read from `folder` (None: nothing yet) still holds exactly what it holds."""
    return saved is not None and saved.holds_saved(folder)
