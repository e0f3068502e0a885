"""The `agentic-rag` command: index, fill, search, delete, compact, ask, chat, serve, mcp, keys, bench,
bench-rgb and doctor; its parser is in _parser, its knowledge base helpers in _kb, chat's
prompt in _chat."""
from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from ..core import AgenticRAGError, Config, ConfigurationError, RunConfig
from ..kb import (
    FILL_BATCH,
    MANIFEST,
    KnowledgeBase,
    KnowledgeBaseBackend,
    check_address,
    load_documents,
    os_cause,
    safe_url,
    writing,
)
from ..kb.embedders import EmbeddingCache
from ..kb.folder import segments
from ..loop import Conversation, Hook, run_agentic_rag
from ..models import Model, OfflineModel
from ..tools import OffTool, Tool
from . import _parser
from ._chat import chat
from ._display import counted, discard, os_error_line, print_result, tracked_lines
from ._kb import FILL_LOG, check_kb_path, embedder_line, glibc_memory, open_or_create, skipped
from ._settings import (
    ask_tools,
    embedding_cache,
    load_kb,
    make_cli_embedder,
    make_describer,
    make_model,
    model_settings,
    serve_collections,
    serve_settings,
    tracing_from_environment,
)

LOCK_WAIT_S = 10.0  # how long index or delete waits for another writer on the same --kb before giving up


@contextmanager
def _writing(kb_dir: str, create: bool) -> Iterator[None]:
    """Hold the --kb's writer lock from load to save (a folder's; a database has none to hold), saying
    so while another writer keeps it."""
    def waiting() -> None:
        print(f"waiting for another writer on {Path(kb_dir)} ...", file=sys.stderr, flush=True)

    with writing(kb_dir, create=create, wait_s=LOCK_WAIT_S, on_wait=waiting):
        yield


def cmd_index(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    glibc_memory()
    kb_dir = args.kb
    if args.background and check_address(kb_dir) is None:
        raise ConfigurationError("--background fills a folder's vectors behind it; a database's add is one "
                                 "transaction, embedded before it is committed: drop --background")
    with _writing(kb_dir, create=True):
        kb = open_or_create(kb_dir, args)
        print(embedder_line(kb_dir, args, kb), file=sys.stderr)
        print(f"reading {', '.join(args.paths)} ...", file=sys.stderr)
        describer = make_describer(args.vision_model, model_settings(args), args.vision_cache)
        loaded = load_documents(args.paths, on_skip=lambda where, reason: print(
            f"warning: skipped {where}: {reason}", file=sys.stderr), encoding=args.encoding, describe_image=describer,
            max_file_bytes=args.max_file_size)
        if not loaded.documents and loaded.skipped:
            where, reason = loaded.skipped[0]
            raise ConfigurationError(f"no document in {', '.join(args.paths)} could be read: {skipped(loaded)} "
                                     f"skipped, the first {where}: {reason}")
        if not loaded.documents:
            raise ConfigurationError(f"no documents found in {', '.join(args.paths)}; index .txt, .md, .jsonl, .pdf, "
                                     f".docx, .html or image files")
        read = len(loaded.documents)
        if isinstance(kb, KnowledgeBase):
            # a folder is saved searchable first (BM25 and the graph), then its vectors are filled in
            # batch by batch, each saved: another process can ask from the first save on, and an index
            # killed at any moment keeps what it saved (run again, it embeds only the rest)
            print(f"chunking {counted(read, 'document')} ...", file=sys.stderr)
            result = kb.add_documents(loaded.documents, defer_vectors=True)
            loaded.documents.clear()  # their text is in the chunks now: not held through the save
            glibc_memory(trim=True)
            kb.save(kb_dir)
            print(f"searchable now ({time.perf_counter() - start:.1f} s): {counted(kb.document_count, 'document')}, "
                  f"{counted(len(kb), 'chunk')} by BM25; {counted(kb.pending_vectors, 'chunk')} to embed with "
                  f"{kb.embedder.name}", file=sys.stderr)
            if args.background and kb.pending_vectors:
                log = _fill_behind(kb_dir, args)
                print(f"filling the vectors in behind; its log: {log}", file=sys.stderr)
            else:
                fill_vectors(kb, kb_dir, embedding_cache(kb.embedder))
        else:  # a database's add is one transaction: embedded first, then committed whole
            print(f"chunking and embedding {counted(read, 'document')} with {kb.embedder.name} ...", file=sys.stderr)
            result = kb.add_documents(loaded.documents, progress=True)
            kb.save(kb_dir)
    print(f"indexed {counted(read, 'document')} ({result.added} new, {result.replaced} replaced, "
          f"{result.unchanged} unchanged) into {counted(result.chunks, 'new chunk')}; knowledge base now holds "
          f"{counted(kb.document_count, 'document')}, {counted(len(kb), 'chunk')}; skipped {skipped(loaded)}; "
          f"{time.perf_counter() - start:.1f} s -> {safe_url(kb_dir)}")
    return 0


def cmd_fill(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    with _writing(args.kb, create=False):
        kb = load_kb(args.kb, model_settings(args))
        if not isinstance(kb, KnowledgeBase):
            print("nothing to fill: a PostgreSQL knowledge base's chunks are committed with their vectors")
            return 0
        filled = fill_vectors(kb, args.kb, embedding_cache(kb.embedder))
    print(f"filled {counted(filled, 'vector')}; knowledge base holds {counted(len(kb), 'chunk')}, every one with "
          f"its vector; {time.perf_counter() - start:.1f} s -> {args.kb}" if filled else
          "nothing to fill: every chunk has its vector")
    return 0


def fill_vectors(kb: KnowledgeBase, kb_dir: str, cache: EmbeddingCache | None) -> int:
    """Fill a folder's missing vectors, each batch saved; on a terminal the progress line, else a line
    a batch (when there is more than one). How many it filled."""
    total, started, tty = kb.pending_vectors, time.perf_counter(), sys.stderr.isatty()

    def line(filled: int, left: int) -> None:
        rate = filled / max(time.perf_counter() - started, 1e-9)
        print(f"embedded and saved {filled}/{total} chunks, {rate:.1f} chunks/s, {int(left / rate)} s left",
              file=sys.stderr, flush=True)

    filled = kb.fill_vectors(save_to=kb_dir, embedding_cache=cache, progress=tty and total > 0,
                             on_batch=None if tty or total <= FILL_BATCH else line)
    if cache is not None and cache.reused:
        print(f"took {counted(cache.reused, 'vector')} from the embedding cache {cache.folder}", file=sys.stderr)
    if cache is not None and cache.failed is not None:
        print(f"warning: cannot write the embedding cache in {cache.folder} ({os_cause(cache.failed)}); "
              f"an interrupted index would embed again", file=sys.stderr)
    return filled


def _fill_behind(kb_dir: str, args: argparse.Namespace) -> Path:
    """Start `agentic-rag fill` on the folder in a process of its own that outlives this one (it takes
    the writer lock once index lets it go); its output goes to DIR/fill.log, which it returns."""
    log = Path(kb_dir) / FILL_LOG
    flags = ["--base-url", args.base_url] if args.base_url else []
    with log.open("w", encoding="utf-8") as out:
        subprocess.Popen([sys.executable, "-m", "agentic_rag.cli", "fill", "--kb", kb_dir, *flags],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return log


def cmd_search(args: argparse.Namespace) -> int:
    kb = load_kb(args.kb, model_settings(args))
    mode = args.mode
    if pending := kb.pending_vectors:
        mode = "bm25" if mode == "hybrid" else mode
        print(f"note: {pending} of {len(kb)} chunks still wait for their vectors (an index is filling them in, or "
              f"was stopped: agentic-rag fill --kb {args.kb}); "
              + ("searching with BM25 alone" if mode == "bm25" else "vector search finds only the others"),
              file=sys.stderr)
    hits = kb.search(args.query, k=args.k, mode=mode, filters=args.filters)
    if not hits:  # said on stderr, so that stdout stays what was asked for (--json: [])
        print("no hits: no chunk matches --filters " + json.dumps(args.filters, ensure_ascii=False) if args.filters
              else "no hits: no chunk matches the query", file=sys.stderr)
    if args.json:
        print(json.dumps([hit.model_dump() for hit in hits], ensure_ascii=False, indent=2))
        return 0
    for n, hit in enumerate(hits, 1):
        ranks = ", ".join(f"{name} #{rank}" for name, rank in hit.ranks.items())
        text = " ".join(hit.text.split())
        print(f"{n}. {hit.title or hit.doc_id}  [{hit.id}; score {hit.score:.4f}; {ranks}]\n"
              f"   {text[:240]}{'...' if len(text) > 240 else ''}\n   source: {hit.source}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _writing(args.kb, create=False):
        kb = load_kb(args.kb, model_settings(args))
        wanted = list(dict.fromkeys(args.doc_ids))
        held = kb.held_documents(wanted)
        missing = [doc_id for doc_id in wanted if doc_id not in held]
        # a chunk id (DOC#N, as search prints it) names the document meant: suggested, never guessed
        meant = [doc_id for doc_id in kb.held_documents(d.rpartition("#")[0] for d in missing if "#" in d)
                 if doc_id not in held]
        deleted = 0
        if held:  # one delete, one transaction; with nothing deleted nothing is saved: the folder stays as it was
            deleted = kb.delete_documents(held)
            kb.save(args.kb)
    if deleted:
        print(f"deleted {counted(deleted, 'document')}")
    if missing:
        named = ", ".join(repr(doc_id) for doc_id in missing[:5]) + (f" and {len(missing) - 5} more"
                                                                    if len(missing) > 5 else "")
        hint = f"a chunk id names its document before the #: did you mean {', '.join(meant)}?" if meant else \
            "search --json shows each hit's doc_id"
        raise ConfigurationError(f"not in the knowledge base, so not deleted: {named}; {hint}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    with _writing(args.kb, create=False):
        kb = load_kb(args.kb, model_settings(args))
        if not kb.saves_to_folder:
            print("nothing to compact: a PostgreSQL knowledge base keeps no segments (VACUUM is the server's)")
            return 0
        kb_dir = Path(args.kb)
        before = segments(json.loads((kb_dir / MANIFEST).read_text(encoding="utf-8")))
        kb.save(kb_dir, compact=True)
    print(f"compacted {counted(len(before), 'segment')} into one: {counted(kb.document_count, 'document')}, "
          f"{counted(len(kb), 'chunk')}; {time.perf_counter() - start:.1f} s -> {kb_dir}")
    return 0


def _asking(args: argparse.Namespace, scope: bool = False) -> tuple[Model, KnowledgeBaseBackend,
                                                                     list[Tool | OffTool], Config, dict]:
    """What ask, chat and mcp run with: (model, knowledge base view, tools, config, model settings);
    with `scope`, --filters are the whole scope (term weights counted within them, as a key's)."""
    tools = ask_tools(args)  # first: a bad --db or --now fails before a model or knowledge base is opened
    settings = model_settings(args)
    model = make_model(settings)
    kb = load_kb(args.kb, settings)
    # the run's own settings are the flags given over the defaults; its index and search layers are the
    # knowledge base's, so that a saved state describes the knowledge base it ran on
    run = RunConfig(**{k: v for k, v in (("max_rounds", args.max_rounds), ("token_budget", args.budget))
                       if v is not None})
    config = Config.from_layers(index=kb.config.index, search=kb.config.search, run=run)
    view = kb.restricted(args.filters, scope=scope) if args.filters else kb  # every search keeps to them
    return model, view, tools, config, settings


def cmd_ask(args: argparse.Namespace) -> int:
    model, view, tools, config, settings = _asking(args)
    stream = (lambda piece: print(piece, end="", flush=True)) if args.stream else None
    # a follow-up: the turns --history holds (a question on its own is run exactly as ever)
    follow_up = {"history": args.history["turns"], "instructions": args.history["instructions"]} \
        if args.history else {}
    state = run_agentic_rag(args.question, view, model, tools, config, on_token=stream, **follow_up)
    if args.json:
        from ..service import result_json  # the service's reply shape; the rest of the service is not loaded

        print(json.dumps(result_json(state, settings["name"]), ensure_ascii=False, indent=2))
    else:
        print_result(state, args.trace, streamed=stream is not None)
        if isinstance(model, OfflineModel):
            print(f"({model.note})")
    if state["stop_reason"] == "error":
        print(f"agentic-rag: error: the run failed: {state['error']}", file=sys.stderr)
        return 1
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    model, view, tools, config, _ = _asking(args)
    saved = args.history or {"turns": None, "instructions": ""}
    conversation = Conversation(view, model, tools, config, instructions=saved["instructions"],
                                history=saved["turns"])
    if args.history:
        turns = sum(m["role"] == "user" for m in conversation.history)
        print(f"resumed {counted(turns, 'turn')} from {args.history['path']}", file=sys.stderr)
    if isinstance(model, OfflineModel):
        print(f"({model.note})", file=sys.stderr)
    if sys.stdin.isatty():
        print(f"chatting with {safe_url(args.kb)}: ask a question; /help lists the commands, Ctrl-D ends",
              file=sys.stderr)
    return chat(conversation, trace=args.trace, stream=args.stream, save=args.save)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ..service import ServerLimits, ServiceLimits, create_collections, create_server
    except ImportError:
        raise ConfigurationError("agentic-rag serve needs the serve extra: pip install 'agentic-rag[serve]'") from None
    if args.max_per_address > args.max_connections:  # named as flags here, not as ServerLimits' fields
        raise ConfigurationError(f"--max-per-address {args.max_per_address} must be at most --max-connections "
                                 f"{args.max_connections}; lower --max-per-address or raise "
                                 f"--max-connections")
    guards = ServerLimits(header_timeout_s=args.header_timeout, body_timeout_s=args.body_timeout,
                          send_timeout_s=args.send_timeout,
                          idle_timeout_s=args.idle_timeout, max_connections=args.max_connections,
                          max_per_address=args.max_per_address, reading_share=args.reading_share)
    settings = model_settings(args)
    addresses = serve_collections(args)
    for address in addresses.values():
        check_kb_path("serve", address)
    access = serve_settings(args, list(addresses))  # the keys and the metrics folder: the environment's too
    limits = ServiceLimits(max_concurrent_runs=args.max_runs, max_body_bytes=args.max_body,
                           max_file_bytes=args.max_file_size)
    _access_log(args.access_log)
    if args.state_dir:  # checked now, not at the first conversation (which could only say "retry")
        try:
            Path(args.state_dir).mkdir(parents=True, exist_ok=True)
            if not os.access(args.state_dir, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "permission denied")
        except OSError as exc:
            raise ConfigurationError(f"--state-dir {args.state_dir}: cannot keep conversations there: "
                                     f"{os_cause(exc)}; give a folder this user can write") from None
    model, tools = make_model(settings), ask_tools(args)
    traces = tracing_from_environment()  # OTLP export when the OTEL_* variables ask for it
    # a folder is loaded by its service, watched for other writers' saves and locked to write; a
    # database is opened here and shared already
    collections = {name: check_address(address) or load_kb(address, settings) for name, address in addresses.items()}
    app = create_collections(model, collections, access["keys"], tools=tools, model_name=settings["name"],
                             cache_size=args.cache_size, cache_ttl_s=args.cache_ttl, limits=limits,
                             loader=lambda path: load_kb(str(path), settings), state_dir=args.state_dir,
                             multiprocess_dir=access["multiprocess_dir"])
    try:  # bodies past the limit are refused before they are read; slow clients are cut off (see _server)
        server = create_server(app, args.host, args.port, args.threads, limits.max_body_bytes, guards)
    except OSError as exc:
        fix = "choose another --port (or stop what uses it)" if exc.errno == errno.EADDRINUSE else \
            "check --host (an address of this machine: 127.0.0.1, or 0.0.0.0 for all) and --port"
        raise ConfigurationError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; {fix}") from None
    except ValueError:  # waitress's word for a host it cannot resolve or bind ("Invalid host/port specified")
        raise ConfigurationError(f"--host {args.host}: not an address this machine can listen on; give an IP "
                                 f"address or name of this machine: 127.0.0.1, or 0.0.0.0 for all") from None
    held = access["keys"].scopes()
    writers = sum(1 for scope in held if scope.write)
    keys = f"{counted(len(held) - writers, 'read key')} and {counted(writers, 'write key')}" if held else \
        "no keys (open to anyone who can connect)"
    served = safe_url(addresses["default"]) if list(addresses) == ["default"] else \
        counted(len(addresses), "collection") + f" ({', '.join(addresses)})"
    # chunks still waiting for a vector get theirs behind the answers, a saved batch at a time; a
    # stop ends each fill once the batch under way is saved
    stop_filling = threading.Event()
    fills = [threading.Thread(target=service.parts.served.fill_vectors, args=(stop_filling,), daemon=True,
                              name=f"fill-{name}") for name, service in app.services.items()]
    with _stopping_gracefully(server, args.shutdown_timeout) as signals:  # taken before the line says so
        print(f"serving {served} on http://{args.host}:{server.effective_port} with {args.threads} "
              f"threads, {keys}; Ctrl-C stops", file=sys.stderr, flush=True)
        for fill in fills:
            fill.start()
        try:
            server.run()  # returns once a graceful stop has finished, or at once on a second signal
        finally:
            stop_filling.set()
            for fill in fills:
                fill.join()
            server.close()
            if traces is not None:
                traces.shutdown()  # the spans still queued are sent
    if len(signals) > 1:
        raise KeyboardInterrupt  # main says "stopped", exit code 130
    cut = f"; {counted(server.cut_off, 'request')} still under way after {args.shutdown_timeout:g} s cut off" \
        if server.cut_off else ""
    print(f"stopped: finished the requests under way{cut}", file=sys.stderr)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..mcp import Served, require_sdk, serve_stdio

    require_sdk("agentic-rag mcp")
    model, view, tools, config, settings = _asking(args, scope=True)
    from ..service import result_json  # the reply of ask --json; the rest of the service is not loaded

    def ask(question: str, filters: dict | None, on_step: Hook) -> dict:
        kb = view.restricted(filters) if filters else view
        return result_json(run_agentic_rag(question, kb, model, tools, config, on_step=on_step), settings["name"])

    folder = Path(args.kb)
    serve_stdio(Served(lambda: view, ask, folder.name if folder.is_dir() else "default"))
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Add a key to serve's JSON keys file (the new key printed once, the file keeping its sha256) or
    remove one; a running server reads the file again by itself."""
    import secrets

    from ..service import change_keys_file, digest

    file = Path(args.file)
    if args.action == "remove":
        change_keys_file(file, args.id, None)
        print(f"removed key {args.id!r} from {file}", file=sys.stderr)
        return 0
    names = {need: [n.strip() for n in getattr(args, need).split(",") if n.strip()] for need in ("read", "write")}
    key = secrets.token_urlsafe(32)
    entry = {"id": args.id, "sha256": digest(key), **{n: v for n, v in names.items() if v}}
    if args.filter:
        entry["filter"] = args.filter
    change_keys_file(file, args.id, entry)
    print(key)
    print(f"added key {args.id!r} to {file}; the line above is the key, shown this once", file=sys.stderr)
    return 0


def _access_log(where: str) -> None:
    """serve's access lines (the agentic_rag.access logger, INFO) to stderr ("-"), appended to a file,
    or nowhere ("off": no handler of ours; the root logger's take them only if configured to)."""
    access = logging.getLogger("agentic_rag.access")
    for earlier in [h for h in access.handlers if h.get_name() == "serve"]:  # an earlier serve in this process
        access.removeHandler(earlier)
        earlier.close()
    if where == "off":
        return
    try:
        handler = logging.StreamHandler(sys.stderr) if where == "-" else _AccessFile(where, encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--access-log {where}: cannot write it: {os_cause(exc)}; give a file you can "
                                 f"write, - for stderr or off") from None
    handler.set_name("serve")
    handler.setFormatter(logging.Formatter("%(message)s"))
    access.addHandler(handler)
    access.setLevel(logging.INFO)


class _AccessFile(logging.FileHandler):
    """The access log's file: a line it cannot write (a full disk) is said once on stderr, in one
    line, not as a traceback for every request."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:
        if not self.failed:
            self.failed = True
            cause = sys.exc_info()[1]
            print(f"agentic-rag serve: cannot write the access log {self.baseFilename}: "
                  f"{os_cause(cause) if isinstance(cause, OSError) else cause}; access lines are lost until it "
                  f"can", file=sys.stderr)


class GracefulServer(Protocol):
    def stop_gracefully(self, timeout_s: float) -> None: ...


@contextmanager
def _stopping_gracefully(server: GracefulServer, timeout_s: float) -> Iterator[list[int]]:
    """While the block runs, SIGTERM (what systemd, Docker and Kubernetes send) or SIGINT (Ctrl-C)
    stops the server gracefully; a second one raises KeyboardInterrupt, which stops it at once.
    The list gets each signal that came."""
    signals: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        signals.append(signum)
        if len(signals) > 1:
            raise KeyboardInterrupt
        server.stop_gracefully(timeout_s)

    try:
        previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread: signals are not ours to take
        yield signals
        return
    try:
        yield signals
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def cmd_bench(args: argparse.Namespace) -> int:
    from ..eval import MODES, run_bench

    modes = list(MODES) if args.mode == "both" else [args.mode]
    settings = model_settings(args)
    model = make_model(settings)
    folder = Path(args.data)
    if not (folder / "corpus.jsonl").is_file() and not (folder / "docs").is_dir():
        raise ConfigurationError(f"{folder} holds no corpus.jsonl and no docs/ folder; give a set folder such as "
                                 f"../shared/data/hotpotqa or ../shared/data/realdocs")
    out = Path(args.out or f"reports/bench/{folder.name}" + (f"-half{args.half}" if args.half else ""))
    # the run's defaults and the one run setting bench takes (its knowledge bases are built with the defaults)
    config = Config(sources=tuple(s for s in args.sources.split(",") if s)) if args.sources else Config()
    metrics = run_bench(folder, modes, out, model, config, make_cli_embedder(args.embedder, settings),
                        args.limit,
                        Path(args.cache) if args.cache else None, args.half)
    print((out / "report.md").read_text(encoding="utf-8"))
    return 0 if metrics else 1


def cmd_bench_rgb(args: argparse.Namespace) -> int:
    from ..eval import run_rgb

    model = make_model(model_settings(args))
    report = run_rgb(Path(args.file), args.noise_rate, args.passages, model, args.limit,
                     Path(args.out) if args.out else None)
    print(json.dumps(report, indent=2))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ._doctor import run_doctor

    return run_doctor(model_settings(args), args.kb)


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser (exposed for tests and docs)."""
    return _parser.build_parser({"index": cmd_index, "fill": cmd_fill, "search": cmd_search, "delete": cmd_delete,
                                     "serve": cmd_serve, "mcp": cmd_mcp, "keys": cmd_keys, "compact": cmd_compact,
                                     "ask": cmd_ask, "chat": cmd_chat, "bench": cmd_bench,
                                     "bench-rgb": cmd_bench_rgb, "doctor": cmd_doctor})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentic-rag` command."""
    args = build_parser().parse_args(argv)
    _parser.refuse_clashes(args)  # the same one line as any bad flag
    with tracked_lines() as end_open_lines:
        try:
            if isinstance(kb := getattr(args, "kb", None), str):  # serve's are checked with its collections
                check_kb_path(args.command, kb)
            return args.run(args)
        except AgenticRAGError as exc:
            return _fail(end_open_lines, str(exc))
        except KeyboardInterrupt:
            return _fail(end_open_lines, _INTERRUPTED.get(args.command, "interrupted"), 130, "")
        except BrokenPipeError:  # the reader went away (| head): stop quietly
            discard(sys.stdout)
            return 141
        except OSError as exc:  # a file outside the knowledge base (whose own failures say its folder): one line too
            return _fail(end_open_lines, os_error_line(exc))


_INTERRUPTED = {"serve": "stopped",  # the others only read
                **dict.fromkeys(("delete", "compact"), "interrupted; the saved knowledge base is unchanged"),
                **dict.fromkeys(("index", "fill"), "interrupted; what was saved stays (the documents are searchable "
                                                   "once saved): run the same command again to embed the rest")}


def _fail(end_open_lines: Callable[[], None], message: str, code: int = 1, kind: str = "error: ") -> int:
    """Print `agentic-rag: error: message` on a line of its own (after a progress line or a streamed
    draft left open) and return the exit code."""
    end_open_lines()
    print(f"agentic-rag: {kind}{message}", file=sys.stderr)
    return code

