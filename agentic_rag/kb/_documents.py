"""Load documents from .txt, .md and .jsonl files and from directories, recursively."""
from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigurationError

log = logging.getLogger("agentic_rag")

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
SUFFIXES = TEXT_SUFFIXES + (".jsonl",)
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.S)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


@dataclass(frozen=True)
class Document:
    """One document: its stable id, text, title, where it came from and its metadata."""

    id: str
    text: str
    title: str = ""
    source: str = ""
    metadata: dict = field(default_factory=dict)

    def content_hash(self) -> str:
        """A hash of everything indexed, so an unchanged document is not indexed twice."""
        payload = json.dumps([self.text, self.title, self.metadata], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclass
class LoadResult:
    """Documents read, and the files (or jsonl lines) skipped with the reason for each."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skipped_lines: int = 0  # how many entries of `skipped` are single lines of a .jsonl file, not files


def _front_matter(text: str) -> tuple[dict, str]:
    """A leading `---` block of `key: value` lines becomes metadata."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    meta = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip()] = value.strip().strip("\"'")
    return meta, text[match.end():]


def _text_document(path: Path, doc_id: str) -> Document:
    meta, body = _front_matter(path.read_text(encoding="utf-8"))
    heading = _HEADING.search(body) if path.suffix.lower() != ".txt" else None
    title = meta.pop("title", "") or (heading.group(1) if heading else path.stem)
    return Document(id=doc_id, text=body.strip(), title=title, source=str(path), metadata=meta)


def _jsonl_documents(path: Path, doc_id: str, result: LoadResult) -> None:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
                text = row["text"]
                if not isinstance(text, str) or not isinstance(row.get("metadata", {}), dict):
                    raise TypeError("'text' must be a string and 'metadata' an object")
            except (ValueError, KeyError, TypeError) as exc:
                result.skipped.append((where, f"bad line ({exc.__class__.__name__}: {exc})"))
                result.skipped_lines += 1
                continue
            result.documents.append(Document(
                id=str(row.get("id") or f"{doc_id}:{number}"), text=text, title=str(row.get("title") or ""),
                source=where, metadata=dict(row.get("metadata") or {})))


def _load_file(path: Path, doc_id: str, result: LoadResult) -> None:
    try:
        if path.suffix.lower() == ".jsonl":
            _jsonl_documents(path, doc_id, result)
        else:
            doc = _text_document(path, doc_id)
            if doc.text:
                result.documents.append(doc)
            else:
                result.skipped.append((str(path), "empty file"))
    except UnicodeDecodeError:
        result.skipped.append((str(path), "not UTF-8 text"))
    except OSError as exc:
        result.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))


def load_documents(paths, on_skip: Callable[[str, str], None] | None = None) -> LoadResult:
    """Read every supported file under the given paths; each bad file or jsonl line is skipped, listed
    in the result and reported once: to `on_skip(where, reason)` when given, else as a logged warning."""
    result = LoadResult()
    for raw in [paths] if isinstance(paths, (str, Path)) else paths:
        root = Path(raw)
        if not root.exists():
            raise ConfigurationError(f"path not found: {raw!s}; give an existing file or directory")
        if root.is_file():
            if root.suffix.lower() in SUFFIXES:
                _load_file(root, root.name, result)
            else:
                result.skipped.append((str(root), f"unsupported file type; use one of {', '.join(SUFFIXES)}"))
            continue
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            hidden = any(part.startswith(".") for part in relative.parts)
            if path.is_file() and path.suffix.lower() in SUFFIXES and not hidden:
                _load_file(path, relative.as_posix(), result)
    for where, reason in result.skipped:
        if on_skip is None:
            log.warning("skipped %s: %s", where, reason)
        else:
            on_skip(where, reason)
    return result
