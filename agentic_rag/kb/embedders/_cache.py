"""An embedding cache written as vectors are made, so that an index interrupted (Ctrl-C, kill -9, a
crash) and run again embeds only what it had not embedded yet, and a text embedded for one knowledge
base is not embedded again for another, or when a folder is indexed anew.

A folder of files `batch-T-P.npz` (T: when it was written, in nanoseconds; P: the writing process),
one per embedded batch, each holding the batch's content keys (content_key of the text embedded),
its vectors and the embedder's name and dimension (a file of another embedder is never read). Each
is written to a temporary name and renamed into place (os.replace), so a kill mid-write leaves the
earlier files as they were and no torn file under a final name, and two processes writing to one
folder never take each other's names; a file that cannot be read is skipped. Bounded: once the
files hold more than `max_bytes` of vectors (256 MB unless told: about 170,000 vectors of 384
dimensions) the oldest files are deleted.
"""
from __future__ import annotations

import os
import re
import time
import zipfile
from pathlib import Path

import numpy as np

from ._embedders import Embedder

MAX_BYTES = 256 * 1024 * 1024
_BATCH = re.compile(r"^batch-(\d+)(?:-\d+)?\.npz$")


class EmbeddingCache:
    """Vectors of one embedder by content key, read from and appended to a folder of batch files."""

    def __init__(self, folder: str | os.PathLike, embedder: Embedder, max_bytes: int = MAX_BYTES):
        self.folder, self.max_bytes = Path(folder), max_bytes
        self.name, self.dimension = str(embedder.name), int(embedder.dimension)
        self.reused = 0  # vectors taken from the cache by lookup
        self.failed: OSError | None = None  # why writing stopped (a full disk): the add goes on without it
        self._files = self._batch_files()
        self._known: dict[bytes, np.ndarray] = {}
        for _, path in self._files:
            self._known.update(self._read(path))

    @property
    def held(self) -> int:
        """How many distinct vectors the cache holds."""
        return len(self._known)

    def _batch_files(self) -> list[tuple[int, Path]]:
        if not self.folder.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if (m := _BATCH.match(p.name))]
        return sorted(found)

    def _read(self, path: Path) -> dict[bytes, np.ndarray]:
        try:
            with np.load(path, allow_pickle=False) as saved:
                if str(saved["name"]) != self.name or int(saved["dimension"]) != self.dimension:
                    return {}
                keys, vectors = saved["keys"], saved["vectors"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # unreadable: skipped, embedded again
            return {}
        if vectors.shape != (len(keys), self.dimension):
            return {}
        return {bytes(k): v for k, v in zip(keys, vectors, strict=True)}

    def lookup(self, wanted: set[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors of the wanted keys (counted in `reused`)."""
        found = {key: self._known[key] for key in wanted if key in self._known}
        self.reused += len(found)
        return found

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Write one embedded batch as a file of its own (atomically), then drop the oldest files past the bound."""
        if not keys or self.failed is not None:
            return
        stamp = time.time_ns()
        path = self.folder / f"batch-{stamp}-{os.getpid()}.npz"
        temp = self.folder / f".batch-{stamp}-{os.getpid()}.tmp.npz"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(temp, "wb") as out:
                np.savez(out, keys=np.frombuffer(b"".join(keys), np.uint8).reshape(len(keys), -1),
                         vectors=np.asarray(vectors, np.float32), name=np.array(self.name),
                         dimension=np.array(self.dimension))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except OSError as exc:  # a cache is a help, not a need: the add goes on (its save says what is wrong)
            self.failed = exc
            temp.unlink(missing_ok=True)
            if not self._files:
                self.remove()
            return
        self._files.append((stamp, path))
        self._known.update(zip(keys, np.asarray(vectors, np.float32), strict=True))
        self._trim()

    def _trim(self) -> None:
        sizes = [(n, p, p.stat().st_size) for n, p in self._files if p.exists()]
        total = sum(size for _, _, size in sizes)
        while total > self.max_bytes and len(sizes) > 1:
            _, oldest, size = sizes.pop(0)
            for key in self._read(oldest):
                self._known.pop(key, None)
            oldest.unlink(missing_ok=True)
            total -= size
        self._files = [(n, p) for n, p, _ in sizes]

    def remove(self) -> None:
        """Delete the cache's files and its folder (once the add they served is saved)."""
        for path in self.folder.glob("*batch-*.npz"):
            path.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:  # missing, or holding something not ours: left
            pass
