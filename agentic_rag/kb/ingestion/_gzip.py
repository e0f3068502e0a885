"""Gzip-compressed documents (guide.pdf.gz, notes.txt.gz): the type is the suffix before .gz, and
the file is decompressed in steps that stop once the output passes the file-size limit, so a small
file that decompresses to gigabytes (a gzip bomb) is refused after reading only as much as the limit."""
from __future__ import annotations

import zlib
from pathlib import PurePath

from ._unreadable import Unreadable, too_large

GZ = ".gz"


def inner_suffix(name: str) -> str:
    """The suffix that says how a file is read: ".pdf" for guide.pdf and for guide.pdf.gz."""
    path = PurePath(name)
    if path.suffix.lower() == GZ:
        path = PurePath(path.stem)
    return path.suffix.lower()


def is_gzip_name(name: str) -> bool:
    return PurePath(name).suffix.lower() == GZ


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """The decompressed bytes of a gzip file (every member of it, as gzip writes them); Unreadable in
    one line when it would decompress past `max_bytes` or is damaged or cut short."""
    out = bytearray()
    rest = data
    try:
        while True:
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: a gzip header and trailer
            pending = rest
            while not member.eof:
                piece = member.decompress(pending, max_bytes + 1 - len(out))
                out += piece
                if len(out) > max_bytes:
                    raise Unreadable(too_large(max_bytes, max_bytes, "decompresses to more than "))
                pending = member.unconsumed_tail
                if not piece and not pending:
                    raise Unreadable("a truncated .gz file: it ends before its compressed data does; compress "
                                     "the original again (gzip -k FILE)")
            rest = member.unused_data
            if not rest.strip(b"\0"):  # the end, or the zero padding some writers leave
                return bytes(out)
    except zlib.error as exc:
        raise Unreadable(f"a damaged .gz file ({exc}): compress the original again (gzip -k FILE)") from None
