"""The query cache: answers in memory, least recently used first out, each for at most `ttl_s`."""
from __future__ import annotations

import json
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


def cache_key(question: str, *parts: Any) -> str:
    """The normalised question (Unicode NFC, spaces collapsed: only what cannot change the answer;
    not NFKC or case-folding, which make "3²" "32") and everything else an answer depends on
    (filters, settings, model names, the knowledge base's generation)."""
    normal = " ".join(unicodedata.normalize("NFC", question).split())
    return json.dumps([normal, *parts], sort_keys=True, ensure_ascii=False, default=str)


class AnswerCache:
    """A thread-safe LRU map with a time to live; size 0 keeps nothing."""

    def __init__(self, size: int = 1024, ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl_s, self._clock = size, ttl_s, clock
        self._items: OrderedDict[str, tuple[float, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        """The answer kept under `key`, unless there is none or it is older than ttl_s."""
        with self._lock:
            found = self._items.get(key)
            if found is None or self._clock() - found[0] > self.ttl_s:
                self._items.pop(key, None)
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(self, key: str, value: dict) -> None:
        """Keep `value` under `key`; past `size` answers, the least recently used goes."""
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = (self._clock(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
