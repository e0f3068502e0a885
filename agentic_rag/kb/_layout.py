"""How a saved knowledge base's folder is laid out, as far as anyone outside the store must know:

    DIR/manifest.json       names the segments to read (see folder/_store for the rest of it)
    DIR/gen-000007/         a segment folder; DIR/.gen-000008.tmp/ is one being written

A save makes and deletes folders of those two names inside DIR, so nothing of anyone else's may
live in one: no knowledge base is made there (check_not_in_segment), and a knowledge base kept
among the documents being indexed is not read as documents (is_segment_folder). Only a manifest
an agentic-rag save wrote makes DIR a knowledge base: another program's manifest.json (a web
app's) beside a folder named gen-000001 makes it no segment folder.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from ..core import ConfigurationError

MANIFEST = "manifest.json"
GENERATION = re.compile(r"^gen-(\d{6})$")
# a segment, or one being written (a save deletes every .gen-*.tmp it finds, not just its own)
SEGMENT_LIKE = re.compile(r"^(gen-\d{6}|\.gen-.*\.tmp)$", re.DOTALL)


def segment_names(directory: Path) -> set[str]:
    """The segment folders the knowledge base manifest in `directory` lists; empty when there is no
    manifest, or one that no agentic-rag save wrote (unreadable, or another program's)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested past Python's stack
        return set()
    # every manifest a save writes has a whole-number format version and names its newest segment
    if not isinstance(manifest, dict) or type(manifest.get("format_version")) is not int:
        return set()
    newest, earlier = manifest.get("generation"), manifest.get("earlier", [])
    if not isinstance(newest, str) or not GENERATION.match(newest):
        return set()
    named = [s.get("generation") for s in earlier if isinstance(s, dict)] if isinstance(earlier, list) else []
    return {newest, *(name for name in named if isinstance(name, str) and GENERATION.match(name))}


def is_segment_folder(path: Path) -> bool:
    """Whether `path` is a segment folder (gen-NNNNNN) that the knowledge base manifest beside it lists."""
    return bool(GENERATION.match(path.name)) and path.name in segment_names(path.parent)


def segment_parent(path: Path | str) -> Path | None:
    """The knowledge base folder whose segment folder (gen-NNNNNN or .gen-*.tmp, listed in its
    manifest or not) holds `path` or is `path`: its saves delete such folders. None if there is none."""
    segment = _segment_holding(path)
    return None if segment is None else segment.parent


def _segment_holding(path: Path | str) -> Path | None:
    # the path as written ("..", and a relative path's folders above it, count too) and the path its
    # links lead to: a link into a segment folder is no way to keep a folder there
    for route in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
        for folder in (Path(route), *Path(route).parents):
            if SEGMENT_LIKE.match(folder.name) and segment_names(folder.parent):
                return folder
    return None


def check_not_in_segment(path: Path | str, flag: str = "") -> None:
    """Refuse (ConfigurationError) a folder to make a knowledge base in, or open one from, that is or
    lies in a knowledge base's segment folder, existing or not; `flag` ("--kb") names how it was given."""
    segment = _segment_holding(path)
    if segment is None:
        return
    parent = segment.parent
    given, fix = (f"{flag} {path}", f"{flag} {shlex.quote(str(parent))}") if flag else (str(path), str(parent))
    raise ConfigurationError(f"{given} is inside the knowledge base in {parent}, whose saves make and delete "
                             f"the folders named like {segment.name}; give a folder outside it or the knowledge "
                             f"base's folder: {fix}")
