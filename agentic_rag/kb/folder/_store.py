"""Saved knowledge bases: generations of files switched in by one atomic manifest rename.

    DIR/manifest.json        format version, settings, counts, the segments to read in order,
                             and the sha256 of every file of each
    DIR/gen-000007/...       one segment: the files one save wrote
    DIR/.lock                held (flock, so POSIX only) by the one process allowed to write (_lock)

A knowledge base is a full segment (every live chunk, the BM25 arrays, the vectors, the graph)
followed by zero or more delta segments, each holding what one save changed: the chunks it
added, the documents it added, replaced or removed, their vectors and graph edges. A save
writes one new segment beside the others, then replaces the manifest with os.replace, so a crash
at any point leaves the previous state loadable. A save names the generation it expects to
replace (the newest segment when its knowledge base was loaded or last saved there), so a writer
never silently overwrites what another writer saved after it loaded.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ...core import ConfigurationError, RetrievalError, StorageError, WriteConflict
from .._layout import GENERATION, MANIFEST, SEGMENT_LIKE, check_not_in_segment, segment_names, segment_parent
from . import _lock

FORMAT_VERSION = 4  # 3: delta segments, vectors.npz (float16 or sparse); 4: .npz compressed, BM25 rows as gaps
READABLE = (2, 3, 4)   # a version 2 knowledge base is one full segment
FULL_FILES = ("chunks.jsonl", "documents.json", "bm25.npz", "vocab.json", "vectors.npz", "graph.json")
DELTA_FILES = ("chunks.jsonl", "changes.json", "vectors.npz", "graph.json")
_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# what a loader reads from the manifest: a missing key is a damaged manifest, not a KeyError
_SHAPE: dict[str, type | dict[str, type]] = {
    "generation": str, "files": dict, "tokenizer": dict, "embedder": {"name": str, "dimension": int},
    "chunking": {"size": int, "overlap": int}, "counts": {"rows": int, "documents": int, "chunks": int}}
MAX_ROWS = 2**31 - 1  # BM25 keeps rows as 32-bit integers: a larger count is a damaged manifest
MAX_DIMENSION = 1 << 16


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


def check_target(directory: Path) -> None:
    """Raise ConfigurationError unless `directory` is a folder or can be created as one, outside any
    knowledge base's segment folders, and StorageError unless it can be written."""
    check_not_in_segment(directory)
    for path in (directory, *directory.parents):
        if not os.path.lexists(path):
            continue
        if not path.is_dir():
            where = "is not a folder" if path == directory else f"is under {path}, which is not a folder"
            raise ConfigurationError(f"{directory} {where}; give a new or existing folder for the knowledge base")
        if not os.access(path, os.W_OK | os.X_OK):
            read_only = os.statvfs(path).f_flag & os.ST_RDONLY
            code = errno.EROFS if read_only else errno.EACCES
            raise storage_error(OSError(code, os.strerror(code), str(path)), directory)
        return


# looked up by an OSError's errno, which may be None
_FIXES: dict[int | None, str] = {
    errno.ENOSPC: "free space on its disk or choose another --kb",
    errno.EDQUOT: "free space within the disk quota or choose another --kb",
    errno.EFBIG: "a file size limit stops it (ulimit -f): raise the limit or choose another --kb",
    errno.EROFS: "its file system is mounted read-only: remount it read-write or choose another --kb",
    errno.EACCES: "make it writable for this user or choose another --kb"}


def os_cause(exc: OSError) -> str:
    """An OSError's cause in words, with its errno's name: 'no space left on device (ENOSPC)'."""
    name = errno.errorcode.get(exc.errno, "no errno") if exc.errno is not None else "no errno"
    return f"{(exc.strerror or str(exc)).lower()} ({name})"


def storage_error(exc: OSError, directory: Path) -> StorageError:
    """A write of the knowledge base in `directory` that failed, as one line: the folder, the cause
    and the fix."""
    code = exc.errno
    cause = os_cause(exc)
    fix = _FIXES.get(errno.EACCES if code == errno.EPERM else code, "check the folder and its disk, then retry")
    error = StorageError(f"cannot write knowledge base {directory}: {cause}; {fix}")
    error.errno, error.folder, error.cause = code, str(directory), cause
    return error


@contextmanager
def _writing(directory: Path) -> Iterator[None]:
    """Turn an OSError of a write into the folder's StorageError."""
    try:
        yield
    except OSError as exc:
        raise storage_error(exc, directory) from None


def _open_lock(path: Path, directory: Path) -> IO[Any]:
    with _writing(directory):
        return open(path, "a+")  # noqa: SIM115 (the caller's with closes it)


@contextmanager
def writer_lock(directory: Path, wait_s: float = 0.0, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold DIR/.lock for the duration (re-entrant in one thread); another writer waits its turn
    (see _lock) up to `wait_s` seconds, calling `on_wait` once, and is then refused; a lock file
    that cannot be opened (a read-only folder) is a StorageError."""
    with _lock.writer_lock(directory, wait_s, on_wait, opened=lambda path: _open_lock(path, directory)):
        yield


def current_generation(directory: Path) -> str | None:
    """The generation DIR/manifest.json names now; None when there is no manifest."""
    path = directory / MANIFEST
    if not os.path.lexists(path):
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["generation"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return "an unreadable manifest"


def manifest_id(directory: Path) -> str | None:
    """What identifies the state a folder holds: the sha256 of its manifest (which names every file's
    checksum); None when there is no manifest. Unlike a generation's name it never comes back: a
    folder emptied and built again restarts at gen-000001, with other files."""
    try:
        return hashlib.sha256((directory / MANIFEST).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return "an unreadable manifest"


def _check_expected(directory: Path, expected: dict | None) -> None:
    """Refuse unless the folder holds what `expected` says ({"generation", "manifest": its id}; None:
    no knowledge base at all)."""
    current = manifest_id(directory)
    if expected is None and current is None or expected is not None and current == expected["manifest"]:
        return
    now = current_generation(directory)
    if expected is None:
        raise RetrievalError(f"{directory} already holds a knowledge base ({now}) that this one was not "
                             f"loaded from; load it (KnowledgeBase.load) to change it, or save into a new folder")
    now = now if now != expected["generation"] else f"{now}, another knowledge base built there since"
    raise WriteConflict(f"{directory} changed since this knowledge base was loaded ({expected['generation']}, "
                        f"now {now}): another writer saved it; reload it and retry")


def save_generation(directory: Path, writers: dict[str, Callable[[Path], None]], manifest: dict,
                    expected: dict | None = None) -> tuple[Path, dict]:
    """Write each file with its writer into a new segment, then switch the manifest to it (the
    segments before it are `manifest["earlier"]`); refused unless the folder holds what `expected`
    says (_check_expected). Returns the segment's folder and the manifest written, with its id
    (`manifest_sha256`). A write that fails (a full disk, a read-only folder) is a StorageError
    and leaves the folder as it was: no new segment, no temporary file."""
    check_target(directory)
    with _writing(directory):
        directory.mkdir(parents=True, exist_ok=True)
    with writer_lock(directory):
        _check_expected(directory, expected)
        previous = segment_names(directory)  # kept below, for a reader that opened its manifest a moment ago
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := GENERATION.match(p.name))]
        name = f"gen-{max(numbers, default=0) + 1:06d}"
        staging, pending = directory / f".{name}.tmp", directory / f".{MANIFEST}.tmp"
        try:
            with _writing(directory):
                body, data = _write_segment(directory, staging, name, writers, manifest)
        except BaseException:  # what this save wrote goes, unless the manifest names it already
            shutil.rmtree(staging, ignore_errors=True)
            if current_generation(directory) != name:
                shutil.rmtree(directory / name, ignore_errors=True)
            with contextlib.suppress(OSError):
                pending.unlink(missing_ok=True)
            raise
        with contextlib.suppress(OSError):  # the save is done; some filesystems cannot sync a folder
            _fsync(directory)
        _remove_old_generations(directory, keep={name, *previous, *(s["generation"] for s in body.get("earlier", []))})
    return directory / name, dict(body, manifest_sha256=hashlib.sha256(data).hexdigest())


def _write_segment(directory: Path, staging: Path, name: str, writers: dict, manifest: dict) -> tuple[dict, bytes]:
    """Write the files into `staging`, rename it to `name`, then write the manifest that names it
    (a temporary file, renamed over the old one); returns the manifest and its bytes."""
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    checksums = {}
    for filename, write in writers.items():
        write(staging / filename)
        _fsync(staging / filename)
        checksums[filename] = _sha256(staging / filename)
    os.rename(staging, directory / name)
    body = dict(manifest, format_version=FORMAT_VERSION, generation=name, files=checksums)
    pending = directory / f".{MANIFEST}.tmp"
    data = json.dumps(body, indent=2, ensure_ascii=False).encode("utf-8")
    pending.write_bytes(data)
    _fsync(pending)
    os.replace(pending, directory / MANIFEST)
    return body, data


def segments(manifest: dict) -> list[dict]:
    """The segments a manifest lists, in the order they are read: {"generation", "files", "delta"}."""
    newest = {"generation": manifest["generation"], "files": manifest["files"], "delta": manifest.get("delta", False),
              "rows": manifest["counts"]["rows"]}
    return [*manifest.get("earlier", []), newest]


def _remove_old_generations(directory: Path, keep: set[str]) -> None:
    for path in directory.iterdir():
        if SEGMENT_LIKE.match(path.name) and path.name not in keep:  # `keep` holds segments: a .tmp goes
            shutil.rmtree(path, ignore_errors=True)


def read_generation(directory: Path) -> tuple[dict, list[Path]]:
    """The manifest (with its id, `manifest_sha256`, see manifest_id) and the folders of its
    segments in the order they are read, every file's checksum verified."""
    rebuild = "rebuild it into a new folder with: agentic-rag index PATH --kb NEW_DIR"  # DIR itself would load it
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file() and (parent := segment_parent(directory)) is not None:
        raise RetrievalError(f"{directory} is part of the knowledge base in {parent}, not one of its own; "
                             f"open {parent}")
    if not manifest_path.is_file():
        raise RetrievalError(f"no knowledge base at {directory} (no {MANIFEST}); build one with: "
                             f"agentic-rag index PATH --kb {directory}")
    try:
        data = manifest_path.read_bytes()
        manifest = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested past Python's stack
        why = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise RetrievalError(f"{manifest_path} is corrupted ({why}); {rebuild}") from None
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if version not in READABLE:
        raise RetrievalError(f"{directory} has format version {version!r}; this "
                             f"agentic-rag reads versions {', '.join(map(str, READABLE))}: {rebuild}")
    problem = _manifest_problem(manifest)
    if problem:
        raise RetrievalError(f"{manifest_path} is corrupted ({problem}); {rebuild}")
    folders = []
    for segment in segments(manifest):
        folder = directory / segment["generation"]
        for filename, expected in segment["files"].items():
            path = folder / filename
            if not path.is_file():
                raise RetrievalError(f"{path} is missing; {rebuild}")
            if _sha256(path) != expected:
                raise RetrievalError(f"{path} is corrupted (checksum mismatch); {rebuild}")
        folders.append(folder)
    return dict(manifest, manifest_sha256=hashlib.sha256(data).hexdigest()), folders


def _manifest_problem(manifest: dict) -> str | None:
    """What is wrong with a manifest's shape, or None; every file a segment needs must be listed."""
    for key, shape in _SHAPE.items():
        value = manifest.get(key)
        if not isinstance(value, dict if isinstance(shape, dict) else shape):
            return f"{key!r} is missing or not a {'dict' if isinstance(shape, dict) else shape.__name__}"
        for inner, kind in shape.items() if isinstance(shape, dict) else ():
            found = manifest[key].get(inner)  # manifest[key] is the dict just checked
            if not isinstance(found, kind) or isinstance(found, bool):
                return f"'{key}.{inner}' is missing or not {'an' if kind is int else 'a'} {kind.__name__}"
    problem = _value_problem(manifest)
    if problem:
        return problem
    earlier = manifest.get("earlier", [])
    if not isinstance(earlier, list) or not all(isinstance(s, dict) and isinstance(s.get("generation"), str)
                                                and isinstance(s.get("files"), dict) for s in earlier):
        return "'earlier' is not a list of segments"
    for i, segment in enumerate(segments(manifest)):
        if not GENERATION.match(segment["generation"]):
            return f"generation {segment['generation']!r} is not gen-NNNNNN"
        if any(not _PLAIN.match(name) for name in segment["files"]):  # no ../ or absolute paths out of the folder
            return f"'files' names a path, not a file of the generation: {sorted(segment['files'])}"
        if bool(segment.get("delta")) != (i > 0) or not _count(segment.get("rows"), MAX_ROWS):
            return "a knowledge base is one full segment followed by delta segments, each with its rows"
        vectors = "vectors.npy" if "vectors.npy" in segment["files"] else "vectors.npz"  # .npy: format 2
        needed = DELTA_FILES if i else [vectors if f == "vectors.npz" else f for f in FULL_FILES]
        unlisted = [name for name in needed if name not in segment["files"]]
        if unlisted:
            return f"'files' of {segment['generation']} does not list {', '.join(unlisted)}"
    return None


def _count(value: object, most: int) -> bool:
    return type(value) is int and 0 <= value <= most


def _value_problem(manifest: dict) -> str | None:
    """What is out of range among the manifest's numbers (their types are checked already), or None."""
    counts, chunking = manifest["counts"], manifest["chunking"]
    for name in ("rows", "documents", "chunks"):
        if not _count(counts[name], MAX_ROWS):
            return f"'counts.{name}' = {counts[name]} is not a count from 0 to {MAX_ROWS}"
    if counts["chunks"] > counts["rows"]:
        return f"'counts.chunks' = {counts['chunks']} is more than 'counts.rows' = {counts['rows']}"
    if not 1 <= manifest["embedder"]["dimension"] <= MAX_DIMENSION:
        return f"'embedder.dimension' = {manifest['embedder']['dimension']} is not from 1 to {MAX_DIMENSION}"
    if not 0 <= chunking["overlap"] < chunking["size"]:
        return f"'chunking' = {chunking} is not a size above an overlap of 0 or more"
    if not isinstance(manifest.get("graph", "names"), str) or not isinstance(manifest.get("delta", False), bool):
        return "'graph' is not a name or 'delta' not true or false"
    return None
