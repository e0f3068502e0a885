"""Load documents from files and folders, recursively: text (.txt, .md), .jsonl, PDF, Word .docx,
HTML, any of these gzipped (guide.pdf.gz), and images (indexed by their description). A file reached
twice (through a link, or a copy of the same bytes) is indexed once. A page or a section of a
document is a part of it: its chunks never cross a part and carry its page or section in their
metadata."""
from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import unquote

from ...core import ConfigurationError
from ._files import MAX_FILE_BYTES, inside, listed, read_inside, too_large
from ._gzip import gunzip, inner_suffix, is_gzip_name
from ._html import decode_html, read_html
from ._loaders import IMAGE_SUFFIXES, markdown_images, read_docx, read_pdf
from ._unreadable import Unreadable

log = logging.getLogger("agentic_rag")

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
FILE_SUFFIXES = (".pdf", ".docx", ".html", ".htm")
SUFFIXES = TEXT_SUFFIXES + (".jsonl",) + FILE_SUFFIXES + IMAGE_SUFFIXES
COMPRESSED = TEXT_SUFFIXES + (".jsonl",) + FILE_SUFFIXES  # read when gzipped too: NAME.pdf.gz
_SHOWN_NAMES = 5  # images named in the one line that reports those skipped for want of a description
Reader = Callable[[Path], bytes]  # a file's bytes, read only as _files allows
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.S)
_HEADING = re.compile(r"^#{1,6}[ \t]+(\S[^\n]*)", re.M)  # no nested quantifiers: linear in the text


@dataclass(frozen=True)
class Document:
    """One document: its stable id, text, title, where it came from and its metadata. `parts` marks
    where each page or section starts in the text and the metadata its chunks get ({"page": 3},
    {"section": "Login"}); chunks never cross a part."""

    id: str
    text: str
    title: str = ""
    source: str = ""
    metadata: dict = field(default_factory=dict)
    parts: tuple[tuple[int, dict], ...] = ()

    def __post_init__(self) -> None:
        starts = [start for start, _ in self.parts]
        if starts != sorted(starts) or any(not isinstance(s, int) or not 0 <= s <= len(self.text) for s in starts):
            raise ConfigurationError(f"document {self.id!r}: parts must start at ascending offsets within its "
                                     f"text (0 to {len(self.text)}), got {starts[:10]}")

    def content_hash(self) -> str:
        """A hash of everything indexed, so an unchanged document is not indexed twice."""
        indexed = [self.text, self.title, self.metadata] + ([list(self.parts)] if self.parts else [])
        payload = json.dumps(indexed, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def from_pieces(doc_id: str, pieces: list[tuple[str, dict]], title: str = "", source: str = "",
                metadata: dict | None = None) -> Document:
    """A document of pieces in reading order, each (text, the metadata of its chunks), joined by blank lines."""
    texts, parts, offset = [], [], 0
    for text, meta in pieces:
        parts.append((offset, meta))
        texts.append(text)
        offset += len(text) + 2
    return Document(doc_id, "\n\n".join(texts), title, source, dict(metadata or {}), tuple(parts))


def read_file(name: str, data: bytes, doc_id: str, source: str = "", encoding: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> Document:
    """A document from a file's bytes, read by the suffix of its name: text, PDF, .docx or HTML, or
    one of these gzipped (NAME.pdf.gz: decompressed to `max_bytes` at most). Raises Unreadable with
    the reason in one line (an empty file, one past `max_bytes`, too)."""
    if len(data) > max_bytes:
        raise Unreadable(too_large(len(data), max_bytes))
    source = source or name  # the name given (spec.html.gz), though read as what it holds
    if is_gzip_name(name):
        data, name = gunzip(data, max_bytes), name[:-len(".gz")]
    document = _read(name, data, doc_id, source, encoding, max_bytes)[0]
    if document is None:
        raise Unreadable("no text in it, only images")
    return document


def _read(name: str, data: bytes, doc_id: str, source: str, encoding: str | None,
          max_bytes: int) -> tuple[Document | None, list]:
    """The document (None for a page that shows images and holds no text), and (src, description) of
    each image it shows (Markdown and HTML). A .docx may unpack to `max_bytes` at most."""
    suffix = Path(name).suffix.lower()
    images: list[tuple[str, str]] = []
    if suffix == ".pdf":
        title, pieces = read_pdf(data, name)
    elif suffix == ".docx":
        title, pieces = read_docx(data, max_bytes)
    elif suffix in (".html", ".htm"):
        title, pieces, images = read_html(decode_html(data, encoding))
    elif suffix in TEXT_SUFFIXES:
        doc = _text_document(decode_text(data, encoding), suffix, doc_id, source, name)
        if not doc.text:
            raise Unreadable("empty file")
        return doc, markdown_images(doc.text) if suffix != ".txt" else []
    elif suffix in IMAGE_SUFFIXES:
        raise Unreadable("an image: it is indexed by its description (a file beside it, alt text or a vision model)")
    else:
        raise Unreadable(f"unsupported file type; use one of {', '.join(SUFFIXES)}")
    if not pieces and not images:
        raise Unreadable("empty file")
    return from_pieces(doc_id, pieces, title or Path(name).stem, source) if pieces else None, images


def decode_text(data: bytes, encoding: str | None = None) -> str:
    """Text bytes as a string, line ends made \\n: UTF-16 by its byte-order mark, else UTF-8, else (for
    a file that is not UTF-8) `encoding` when given."""
    return _decode(data, encoding).replace("\r\n", "\n").replace("\r", "\n")


def _decode(data: bytes, encoding: str | None) -> str:
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if encoding:
            try:
                return data.decode(encoding)
            except LookupError:
                raise ConfigurationError(f"unknown encoding {encoding!r}; use a Python codec name such as "
                                         f"gb18030, latin-1 or cp1252") from None
            except UnicodeDecodeError as again:
                raise Unreadable(f"neither UTF-8 (byte {exc.start}) nor {encoding} (byte {again.start}) text: give "
                                 f"its encoding (--encoding NAME)") from None
        raise Unreadable(f"not UTF-8 text (byte {exc.start}; tried UTF-8, and UTF-16 by a byte-order mark): "
                         f"give its encoding (--encoding gb18030 for Chinese, cp1252 for Western European text) "
                         f"or convert it (iconv)") from None


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


def _text_document(text: str, suffix: str, doc_id: str, source: str, name: str = "") -> Document:
    """A text file's document; with no title in it, its title is the stem of `name` (of `source`
    when not given): "notes" for notes.txt and for notes.txt.gz, read as notes.txt."""
    meta, body = _front_matter(text)
    heading = _HEADING.search(body) if suffix != ".txt" else None
    title = meta.pop("title", "") or (_heading_text(heading.group(1)) if heading else Path(name or source).stem)
    return Document(id=doc_id, text=body.strip(), title=title, source=source, metadata=meta)


def _heading_text(line: str) -> str:
    """A Markdown heading's text without its closing #s ("Setup ##" -> "Setup"; "C#" stays)."""
    text = line.strip()
    bare = text.rstrip("#").rstrip()
    return bare if bare != text and (text[len(bare):len(bare) + 1] in " \t") and bare else text


def _jsonl_documents(path: Path, data: bytes, doc_id: str, result: LoadResult, encoding: str | None) -> None:
    # UTF-16: decoded whole; else only \n ends a line, and each line is decoded alone, so one bad line is one skip
    utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
    lines: Sequence[str | bytes] = decode_text(data).split("\n") if utf16 else data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(raw if isinstance(raw, str) else decode_text(raw, encoding))
            text = row["text"]
            if not isinstance(text, str) or not isinstance(row.get("metadata", {}), dict):
                raise TypeError("'text' must be a string and 'metadata' an object")
        except Unreadable as exc:
            result.skipped.append((where, str(exc)))
            result.skipped_lines += 1
            continue
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
            result.skipped.append((where, f"bad line ({exc.__class__.__name__}: {exc})"))
            result.skipped_lines += 1
            continue
        result.documents.append(Document(
            id=str(row.get("id") or f"{doc_id}:{number}"), text=text, title=str(row.get("title") or ""),
            source=where, metadata=dict(row.get("metadata") or {})))


def _load_file(path: Path, doc_id: str, result: LoadResult, encoding: str | None, shown: dict, read: Reader,
               max_bytes: int, contents: dict[str, str]) -> None:
    """Read one document file (or the documents of a .jsonl file) into `result`. `contents` maps the
    hash of the bytes (decompressed) of each file read so far to its path: a copy is skipped, so
    that no passage is indexed twice and a search never finds the same chunk twice."""
    data, name = read(path), path.name
    if is_gzip_name(name):
        data, name = gunzip(data, max_bytes), name[:-len(".gz")]
    digest = hashlib.sha256(data).hexdigest()
    if data and digest in contents:  # empty files are each skipped for being empty
        raise Unreadable(f"the same content as {contents[digest]}")
    contents.setdefault(digest, str(path))
    if inner_suffix(name) == ".jsonl":
        _jsonl_documents(path, data, doc_id, result, encoding)
        return
    doc, images = _read(name, data, doc_id, str(path), encoding, max_bytes)
    if doc is not None:
        result.documents.append(doc)
    root = path.parents[len(Path(doc_id).parts) - 1]  # the folder loaded (doc_id is the path from it)
    for src, description in images:  # only noted: an image is read when it is itself a listed file
        target = _local(path.parent, src, root)
        if target is not None and description:
            shown.setdefault(target, description)


def _or_skipped(path: Path, result: LoadResult, read: Callable[..., None], *args: object) -> None:
    """Run `read(*args)`; a file it cannot read is skipped, with the reason in one line."""
    try:
        read(*args)
    except Unreadable as exc:
        result.skipped.append((str(path), str(exc)))
    except OSError as exc:
        result.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))


def _local(folder: Path, src: str, root: Path) -> Path | None:
    """The file an image reference names, when it is a local path (not a URL); a path from "/" is
    taken from the folder being loaded, as a site's root."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", src, re.I) or src.startswith("//"):
        return None
    path = unquote(src.split("#")[0].split("?")[0])
    return ((root / path.lstrip("/")) if path.startswith("/") else (folder / path)).resolve()


def _sidecar(image: Path) -> Path | None:
    """The description beside an image: photo.jpg.md or photo.jpg.txt (a link or a FIFO too, so that
    reading it is refused, not passed over)."""
    return next((p for p in (Path(f"{image}.md"), Path(f"{image}.txt")) if os.path.lexists(p) and not p.is_dir()),
                None)


def _image_document(path: Path, doc_id: str, shown: dict,
                    describe: Callable[[Path, bytes], str] | None, encoding: str | None, read: Reader) -> Document:
    """An image as a document whose text is its description: its sidecar, else the alt text and
    caption a document showing it gives, else the vision model's (`describe(path, data)`)."""
    sidecar = _sidecar(path)
    metadata, title, text = {}, path.name, ""
    if sidecar is not None:
        try:
            data = read(sidecar)
        except Unreadable as exc:
            raise Unreadable(f"its description {sidecar.name}: {exc}") from None
        described = _text_document(decode_text(data, encoding), sidecar.suffix, doc_id, str(path))
        metadata, text = described.metadata, described.text
        title = described.title if described.title != path.stem else path.name
    text = text or shown.get(path.resolve(), "")
    if not text and describe is not None:
        text = describe(path, read(path)).strip()
    if not text:
        raise _Undescribed(f"an image with no description: write one beside it ({path.name}.md) or describe "
                           f"images with a vision model (--vision-model NAME)")
    return Document(doc_id, text, title, str(path), {**metadata, "media": "image"})


class _Undescribed(Unreadable):
    """An image skipped for want of a description: many of them are reported in one line."""


def _once(files: list[tuple[Path, str, str]], skipped: list) -> list[tuple[Path, str, str]]:
    """The files without a second way to the same file: of a link and the file it leads to, the file
    is kept; of hard links, the first in order. Each other way is skipped, saying which file it is."""
    ways: dict[object, list[tuple[Path, str, str]]] = {}
    for entry in files:
        path, _, root = entry
        key: object = str(path)  # one that leads out, is gone or dangles: reading it says so
        real = os.path.realpath(path)
        if real.startswith(root.rstrip(os.sep) + os.sep):
            try:
                info = os.stat(real)
                key = (info.st_dev, info.st_ino)
            except OSError:
                pass
        ways.setdefault(key, []).append(entry)
    dropped = set()
    for entries in ways.values():
        if len(entries) > 1:
            kept = next((e for e in entries if not e[0].is_symlink()), entries[0])
            for path, _, _ in entries:
                if path is not kept[0]:
                    skipped.append((str(path), f"the same file as {kept[0]}"))
                    dropped.add(path)
    return [entry for entry in files if entry[0] not in dropped]


def _report_undescribed(undescribed: list[str], skipped: list,
                        on_skip: Callable[[str, str], None]) -> None:
    """Images skipped for want of a description, in one line when there are several (each is still
    listed in `skipped`)."""
    if len(undescribed) == 1:
        where = undescribed[0]
        on_skip(where, next(reason for w, reason in skipped if w == where))
    elif undescribed:
        names = ", ".join(undescribed[:_SHOWN_NAMES]) + (f" and {len(undescribed) - _SHOWN_NAMES} more"
                                                          if len(undescribed) > _SHOWN_NAMES else "")
        on_skip(f"{len(undescribed)} images without a description",
                f"{names} (write a description beside each, as photo.png.md, or describe images with a vision model, "
                f"--vision-model NAME)")


def load_documents(paths: str | Path | Iterable[str | os.PathLike],
                   on_skip: Callable[[str, str], None] | None = None, encoding: str | None = None,
                   describe_image: Callable[[Path, bytes], str] | None = None,
                   max_file_bytes: int = MAX_FILE_BYTES) -> LoadResult:
    """Read every supported file under the given paths; each bad file or jsonl line is skipped, listed
    in the result and reported once: to `on_skip(where, reason)` when given, else as a logged warning.
    Text files are read as UTF-8 unless `encoding` is given. An image is indexed by its description
    (see _image_document); `describe_image(path, data)` describes the others, e.g. an ImageDescriber.
    Only regular files inside the folders given are read (see _files), none past `max_file_bytes`."""
    _check_options(encoding, max_file_bytes)
    result = LoadResult()
    files = _once(listed(paths, SUFFIXES, result.skipped, COMPRESSED), result.skipped)
    contents: dict[str, str] = {}
    images = [(p, i, r) for p, i, r in files if p.suffix.lower() in IMAGE_SUFFIXES]
    sidecars = {s for s in map(_sidecar, (p for p, _, _ in images)) if s is not None}
    shown: dict[Path, str] = {}
    for path, doc_id, root in files:
        if path.suffix.lower() not in IMAGE_SUFFIXES and path not in sidecars:
            read = partial(read_inside, root=root, max_bytes=max_file_bytes)
            _or_skipped(path, result, _load_file, path, doc_id, result, encoding, shown, read, max_file_bytes,
                        contents)

    def add_image(path: Path, doc_id: str, root: str) -> None:
        inside(path, root)  # an image linked in from outside is refused even when its bytes are not needed
        read = partial(read_inside, root=root, max_bytes=max_file_bytes)
        result.documents.append(_image_document(path, doc_id, shown, describe_image, encoding, read))

    undescribed: list[str] = []
    for path, doc_id, root in images:
        try:
            add_image(path, doc_id, root)
        except _Undescribed as exc:
            undescribed.append(str(path))
            result.skipped.append((str(path), str(exc)))
        except Unreadable as exc:
            result.skipped.append((str(path), str(exc)))
        except OSError as exc:
            result.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
    report = on_skip or (lambda where, reason: log.warning("skipped %s: %s", where, reason))
    quiet = set(undescribed)
    for where, reason in result.skipped:
        if where not in quiet:
            report(where, reason)
    _report_undescribed(undescribed, result.skipped, report)
    return result


def _check_options(encoding: str | None, max_file_bytes: int) -> None:
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigurationError(f"unknown encoding {encoding!r}; use a Python codec name such as gb18030, "
                                     f"latin-1 or cp1252") from None
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
        raise ConfigurationError(f"max_file_bytes must be a whole number of bytes of at least 1, got "
                                 f"{max_file_bytes!r}")
