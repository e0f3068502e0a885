"""Saved knowledge bases: generations of files switched in by one atomic manifest rename.

    DIR/manifest.json        format version, settings, counts, and the sha256 of every file
    DIR/gen-000007/...       the files of the generation the manifest names
    DIR/.lock                held (flock) by the one process allowed to write

A save writes a complete new generation beside the old one, then replaces the manifest with
os.replace, so a crash at any point leaves the previous generation loadable.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from ..errors import RetrievalError

FORMAT_VERSION = 2  # 2: the knowledge graph is saved with every generation
MANIFEST = "manifest.json"
_GENERATION = re.compile(r"^gen-(\d{6})$")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def writer_lock(directory: Path):
    """Hold DIR/.lock for the duration; a second writer fails at once instead of waiting."""
    with open(directory / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RetrievalError(
                f"another process is writing the knowledge base at {directory}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def save_generation(directory: Path, writers: dict[str, Callable[[Path], None]], manifest: dict) -> Path:
    """Write each file with its writer into a new generation, then switch the manifest to it."""
    directory.mkdir(parents=True, exist_ok=True)
    with writer_lock(directory):
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _GENERATION.match(p.name))]
        name = f"gen-{max(numbers, default=0) + 1:06d}"
        staging = directory / f".{name}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            checksums = {}
            for filename, write in writers.items():
                write(staging / filename)
                _fsync(staging / filename)
                checksums[filename] = _sha256(staging / filename)
            os.rename(staging, directory / name)
            body = dict(manifest, format_version=FORMAT_VERSION, generation=name, files=checksums)
            pending = directory / f".{MANIFEST}.tmp"
            pending.write_text(json.dumps(body, indent=2, ensure_ascii=False), encoding="utf-8")
            _fsync(pending)
            os.replace(pending, directory / MANIFEST)
            _fsync(directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        # the previous generation stays, for a reader that opened its manifest a moment ago
        _remove_old_generations(directory, keep={name, f"gen-{max(numbers, default=0):06d}"})
    return directory / name


def _remove_old_generations(directory: Path, keep: set[str]) -> None:
    for path in directory.iterdir():
        stale_tmp = path.name.startswith(".gen-") and path.name.endswith(".tmp")
        if (_GENERATION.match(path.name) and path.name not in keep) or stale_tmp:
            shutil.rmtree(path, ignore_errors=True)


def read_generation(directory: Path) -> tuple[dict, Path]:
    """The manifest and the folder of the current generation, every file's checksum verified."""
    rebuild = f"rebuild it with: agentic-rag index PATH --kb {directory}"
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise RetrievalError(f"no knowledge base at {directory} (no {MANIFEST}); build one with: "
                             f"agentic-rag index PATH --kb {directory}")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        generation = directory / manifest["generation"]
        files = dict(manifest["files"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RetrievalError(f"{manifest_path} is corrupted ({exc}); {rebuild}") from None
    if manifest.get("format_version") != FORMAT_VERSION:
        raise RetrievalError(f"{directory} has format version {manifest.get('format_version')!r}; this "
                             f"agentic-rag reads version {FORMAT_VERSION}: {rebuild}")
    for filename, expected in files.items():
        path = generation / filename
        if not path.is_file():
            raise RetrievalError(f"{path} is missing; {rebuild}")
        if _sha256(path) != expected:
            raise RetrievalError(f"{path} is corrupted (checksum mismatch); {rebuild}")
    return manifest, generation
