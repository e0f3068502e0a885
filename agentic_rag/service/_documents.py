"""POST /v1/documents and DELETE /v1/documents/{id}: writes within the caller's scope, and the
uploaded files they carry, read from their bytes alone as `index` reads a folder's files."""
from __future__ import annotations

import base64
import threading
import zipfile
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ..kb import Document, KnowledgeBaseBackend
from ..kb.indexes import matches
from ..kb.ingestion import IMAGE_SUFFIXES, Unreadable, gunzip, read_file, unpacked_size
from ._http import Reply, ServiceError, read_json
from ._parts import Parts
from ._schemas import DocumentIn, DocumentsRequest, WriteReply


class Documents:
    """The writes of one service; uploaded files are read one request at a time (see `uploads`)."""

    def __init__(self, parts: Parts):
        self.parts = parts
        self.reading = threading.Lock()

    def add(self, environ: dict) -> Reply:
        """POST /v1/documents: add the documents, or replace those whose id is known; saved before the reply."""
        limits = self.parts.limits
        request = DocumentsRequest.model_validate(read_json(environ, limits.max_body_bytes))
        if len(request.documents) > limits.max_batch:
            raise ServiceError(400, "invalid_request", f"{len(request.documents)} documents in one request; the "
                                                       f"limit is {limits.max_batch}")
        scope = self.parts.access.scope_filter(environ)
        documents = [within_scope(d, scope) for d in self.uploads(request.documents)]

        def change(kb: KnowledgeBaseBackend) -> dict:
            if scope:  # an id held outside the scope, or shared with another, is not this key's to replace
                ids = [d.id for d in documents]
                if taken := set(kb.held_documents(ids)) - set(kb.held_documents(ids, scope, every_member=True)):
                    raise ServiceError(403, "forbidden", f"document {min(taken)!r} cannot be written with this "
                                                         f"key: its id is taken outside the key's scope; choose "
                                                         f"another id")
            added = kb.add_documents(documents)
            return {"added": added.added, "replaced": added.replaced, "unchanged": added.unchanged,
                    "chunks": added.chunks}

        return 200, WriteReply(**self.parts.served.write(change, limits.write_wait_s)).model_dump(), []

    def uploads(self, given: list[DocumentIn]) -> list[Document]:
        """The request's documents. Its files are read one request at a time in the process, and
        together may hold (or a .docx unpack to) max_file_bytes: python-docx takes about 25 times a
        .docx's unpacked size in memory and seconds for every few MB, so neither parallel uploads nor
        many files in one request may multiply that."""
        limits = self.parts.limits
        if not any(d.file for d in given):
            return [read_document(d, limits.max_file_bytes) for d in given]
        if not self.reading.acquire(timeout=limits.write_wait_s):
            raise ServiceError(503, "unavailable", f"other uploads have been read for {limits.write_wait_s:g} "
                                                   f"s; retry", [("Retry-After", "5")])
        try:
            left, documents = limits.max_file_bytes, []
            for d in given:
                cost = _upload_size(d, limits.max_file_bytes)
                if cost > left and left < limits.max_file_bytes:  # alone it would be within the limit
                    raise ServiceError(413, "too_large", f"the request's files pass {limits.max_file_bytes:,} "
                                                         f"bytes together (a .docx as unpacked, a .gz as "
                                                         f"decompressed); send them in several requests")
                documents.append(read_document(d, left))
                left -= cost
            return documents
        finally:
            self.reading.release()

    def delete(self, environ: dict) -> Reply:
        """DELETE /v1/documents/{id}: delete one document (404 if the key's scope holds no such one)."""
        try:  # PATH_INFO is already percent-decoded, its bytes as latin-1 (PEP 3333): UTF-8 again, once
            doc_id = environ["PATH_INFO"][len("/v1/documents/"):].encode("latin-1").decode("utf-8")
        except UnicodeError:
            raise ServiceError(400, "invalid_request", "the document id is not UTF-8") from None
        if not doc_id:
            raise ServiceError(400, "invalid_request", "give the document id: DELETE /v1/documents/{id}")
        scope = self.parts.access.scope_filter(environ)  # a document not wholly inside the scope is as unknown
        reply = self.parts.served.write(lambda kb: {"deleted": kb.delete_documents(
            kb.held_documents([doc_id], scope, every_member=True) if scope else [doc_id])},
            self.parts.limits.write_wait_s)
        if not reply["deleted"]:
            raise ServiceError(404, "not_found", f"no document {doc_id!r} in the knowledge base")
        return 200, WriteReply(**reply).model_dump(), []


def _decoded_size(file: str) -> int:
    """The bytes a base64 text decodes to, from its length alone."""
    return len(file) * 3 // 4 - file.endswith("=") - file.endswith("==")


def _upload_size(given: DocumentIn, max_bytes: int) -> int:
    """What an uploaded file costs to read: its size, for a .docx (a zip) what it unpacks to, and for
    a .gz what it decompresses to (up to just past `max_bytes`)."""
    if not given.file:
        return 0
    name = (given.filename or given.id).lower()
    try:
        if name.endswith(".docx"):
            return unpacked_size(base64.b64decode(given.file, validate=True))
        if name.endswith(".gz"):
            return len(gunzip(base64.b64decode(given.file, validate=True), max_bytes))
    except Unreadable:  # decompresses past the limit (or is damaged: read_document says which)
        return max_bytes + 1
    except (ValueError, zipfile.BadZipFile, OSError):  # not base64, or not a zip: read_document says so
        pass
    return _decoded_size(given.file)


def read_document(given: DocumentIn, max_file_bytes: int) -> Document:
    """A document of a write request: its text, or its file read from its bytes alone as `index`
    reads it. A filename is a name, never a path: only its last part's suffix chooses the reader, and
    nothing it names or shows (a Markdown image, an HTML <img>) is opened on this server."""
    if not given.file:
        return Document(given.id, given.text, given.title, given.source, given.metadata)
    size = _decoded_size(given.file)  # before decoding
    if size > max_file_bytes:
        raise ServiceError(413, "too_large", f"document {given.id!r}: its file has {size:,} bytes; the limit is "
                                             f"{max_file_bytes:,}")
    try:
        data = base64.b64decode(given.file, validate=True)
    except ValueError:
        raise ServiceError(400, "invalid_request", f"document {given.id!r}: 'file' is not base64") from None
    label = given.filename or given.id
    name = PurePosixPath(label.replace("\\", "/")).name or "file"  # "../../etc/passwd.md" is read as passwd.md
    if Path(name).suffix.lower() == ".jsonl":
        raise ServiceError(400, "invalid_request", f"document {given.id!r} ({name}): a .jsonl file holds many "
                                                   f"documents; send each line as a document of its own")
    if Path(name).suffix.lower() in IMAGE_SUFFIXES:
        if not given.text.strip():
            raise ServiceError(400, "invalid_request", f"document {given.id!r} is an image: give its description "
                                                       f"in 'text'")
        return Document(given.id, given.text, given.title or name, given.source or label,
                        {**given.metadata, "media": "image"})
    if given.text:
        raise ServiceError(400, "invalid_request", f"document {given.id!r}: give 'text' or 'file', not both (only "
                                                   f"an image file takes its description in 'text')")
    try:
        document = read_file(name, data, given.id, given.source or label, max_bytes=max_file_bytes)
    except Unreadable as exc:
        raise ServiceError(400, "invalid_request", f"document {given.id!r} ({name}): {exc}") from None
    return replace(document, title=given.title or document.title, metadata={**document.metadata, **given.metadata})


def within_scope(document: Document, scope: dict) -> Document:
    """`document` as a key whose scope is `scope` may write it: an equality the document's metadata
    leaves out is written into it; otherwise the document must lie wholly inside the scope (a list
    value with every member matching: it may not reach another scope too), or the write is refused
    (403) naming the field and what it must hold."""
    if not scope:
        return document
    metadata = dict(document.metadata)
    for field, condition in scope.items():
        if field not in metadata and field not in ("doc_id", "source", "title") \
                and not isinstance(condition, (dict, list, tuple, set, frozenset)):
            metadata[field] = condition
    fields = {**metadata, "doc_id": document.id, "source": document.source, "title": document.title}
    for field, condition in scope.items():
        if not matches(fields, {field: condition}, every_member=True):
            wanted = f"one of {list(condition)}" if isinstance(condition, (list, tuple, set, frozenset)) else \
                f"a value {condition}" if isinstance(condition, dict) else repr(condition)
            raise ServiceError(403, "forbidden", f"document {document.id!r}: this key writes only documents whose "
                                                 f"{field!r} is {wanted}; give its metadata that")
    return replace(document, metadata=metadata)
