"""The `agentic-rag` command's parser: its commands and their flags (the shared ones and the checks
of a value are in _flags), and the one-line errors that name a mistyped command or option with
the one that was meant."""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeAlias

from .. import __version__
from ..core import SEARCH_MODES
from ..kb import EMBEDDERS
from ..kb.ingestion import MAX_FILE_BYTES, MAX_UPLOAD_BYTES
from ._flags import (
    at_least,
    connection_flags,
    filter_flag,
    filters_json,
    history_file,
    model_flags,
    port,
    positive,
    rate,
    seconds,
    tool_flags,
)


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, which takes no abbreviation of an option, and
    which names the command or option a mistyped one was meant to be."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # an abbreviation would hide a typo, or change meaning later
        super().__init__(*args, **kwargs)
        self.siblings: dict[str, _Parser] = {}  # the other commands' parsers, for "ask has no --mode"

    def error(self, message: str) -> NoReturn:  # one clear line instead of argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Iterable[str] | None = None,  # Any: argparse fills any namespace given
                         namespace: Any = None) -> tuple[Any, list[str]]:
        """argparse's, after refusing an unknown long option or command with the likely one named."""
        args = sys.argv[1:] if args is None else list(args)
        commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        self._check_words(args, commands)
        return super().parse_known_args(args, namespace)

    def _check_words(self, args: list[str], commands: dict | None) -> None:
        for word in args:
            if word == "--":
                return
            option = word.split("=", 1)[0]
            if (word.startswith("--") or _SHORT.fullmatch(word)) and option not in self._option_string_actions:
                if commands and any(option in parser._option_string_actions for parser in commands.values()):
                    self.error(f"{option} comes after the command: agentic-rag COMMAND {option} ...")
                self.error(self._unknown_option(option))
            if commands is not None and not word.startswith("-"):  # the command: the rest is its parser's
                if word not in commands:
                    meant = _did_you_mean(word, commands, quote=True)
                    self.error(f"{word!r} is not a command" + (f"{meant} The commands: " if meant else
                                                               "; the commands: ") + ", ".join(commands))
                return

    # argparse's check of a flag's choices, with the one meant named
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices and isinstance(value, str):
            choices = [str(choice) for choice in action.choices]
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{_did_you_mean(value, choices, True)} "
                                                 f"(choose from {', '.join(choices)})")
        super()._check_value(action, value)

    def _unknown_option(self, option: str) -> str:
        """'unrecognized option --x' with the option meant, and where another command has it by that name."""
        name = self.prog.split()[-1]
        elsewhere = [f"{command} {option}: {_first_clause(parser, option)}"
                     for command, parser in self.siblings.items()
                     if command != name and option in parser._option_string_actions]
        if elsewhere:  # the option exists, for another command: a look-alike of this one's would mislead
            return f"{name} has no option {option} ({'; '.join(elsewhere)})"
        return f"{name} has no option {option}{_did_you_mean(option, self._option_string_actions)}"


_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"  # what add_subparsers returns: one parser a command

_SHORT = re.compile(r"-[A-Za-z][\w-]*")  # a short option such as -k (not a negative number)
_NEVER_MEANT = {"--help", "--version"}  # a typo of a setting is not a request for help
NEAR_TIE = 0.12  # look-alikes this close to the best are named too, the ones as long as the typo first,
SECOND_AT_LEAST = 0.75  # when they are this like the typo


def _did_you_mean(word: str, known: Iterable[str], quote: bool = False) -> str:
    """'; did you mean --x?' (or '--x or --y?' for a near tie), or '' when nothing is close."""
    candidates = [k for k in known if (k.startswith("--") or quote) and k not in _NEVER_MEANT]
    scored = sorted(((difflib.SequenceMatcher(None, word, k).ratio(), k) for k in candidates), reverse=True)
    scored = [(ratio, k) for ratio, k in scored if ratio >= 0.6]
    best = max((difflib.SequenceMatcher(None, word, k).ratio() for k in _NEVER_MEANT), default=0.0)
    if not scored or best >= scored[0][0]:  # --hepl: help was meant, not whatever comes next
        return ""
    near = [k for ratio, k in scored if ratio >= max(scored[0][0] - NEAR_TIE, SECOND_AT_LEAST)] or [scored[0][1]]
    near = sorted(near, key=lambda k: len(k) != len(word))[:2]  # stable: by ratio within each length group
    return f"; did you mean {' or '.join(repr(k) if quote else k for k in near)}?"


def _first_clause(parser: argparse.ArgumentParser, option: str) -> str:
    """An option's help up to its default, e.g. 'retrievers to use'."""
    action = parser._option_string_actions[option]
    return re.split(r" \(|; ", (action.help or "") % {"default": action.default})[0]


def build_parser(run: dict[str, Callable]) -> argparse.ArgumentParser:
    """The command-line parser; `run` maps each command's name to the function that runs it."""
    parser = _Parser(prog="agentic-rag", description="Agentic retrieval-augmented question answering.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in (_index, _fill, _search, _delete, _serve, _mcp, _keys, _compact, _ask, _chat, _bench, _bench_rgb,
                _doctor):
        name, command = add(commands)
        command.set_defaults(run=run[name])
    for command in commands.choices.values():
        command.siblings = commands.choices
    return parser


def _index(commands: _Commands) -> tuple[str, _Parser]:
    index = commands.add_parser("index", help="index files or folders into a knowledge base")
    index.add_argument("paths", nargs="+", metavar="PATH", help=".txt, .md, .jsonl, .pdf, .docx, .html or image "
                                                                "files, or folders of them")
    index.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder (created, or added to)")
    index.add_argument("--embedder", choices=sorted(EMBEDDERS) + ["openai"],
                       help="a new knowledge base's default: e5 with the local extra installed, else hashing; "
                            "a saved one keeps its own")
    index.add_argument("--chunk-size", type=at_least(50), metavar="N", help="characters per chunk (default 800)")
    index.add_argument("--chunk-overlap", type=at_least(0), metavar="N", help="characters repeated (default 100)")
    index.add_argument("--encoding", metavar="NAME", help="read text files that are not UTF-8 in this encoding, "
                                                         "e.g. gb18030 or cp1252")
    index.add_argument("--vision-model", metavar="NAME", help="describe images that come with no description "
                                                             "with this vision model (at --base-url)")
    index.add_argument("--vision-cache", metavar="DIR", help="where descriptions are kept by image hash (default "
                                                            "~/.cache/agentic-rag/image-descriptions)")
    index.add_argument("--max-file-size", type=positive, default=MAX_FILE_BYTES, metavar="BYTES",
                       help="skip files larger than this, before reading them (default %(default)s)")
    index.add_argument("--graph-model", metavar="NAME", help="build the knowledge graph from a model's triples "
                                                             "(default: names that share a sentence)")
    index.add_argument("--background", action="store_true",
                       help="return once the documents are searchable (BM25) and fill the vectors in behind, "
                            "in a process of its own (its log: DIR/fill.log)")
    model_flags(index, chat=False, embedding=True)
    return "index", index


def _fill(commands: _Commands) -> tuple[str, _Parser]:
    fill = commands.add_parser("fill", help="embed the chunks a knowledge base holds without a vector (what an "
                                            "interrupted or --background index left)")
    fill.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    model_flags(fill, chat=False)
    return "fill", fill


def _search(commands: _Commands) -> tuple[str, _Parser]:
    search = commands.add_parser("search", help="search a knowledge base")
    search.add_argument("query", help="what to search for")
    search.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    search.add_argument("-k", "--k", type=positive, default=5, metavar="N", help="hits to return (default %(default)s)")
    search.add_argument("--mode", choices=SEARCH_MODES, default="hybrid",
                        help="retrievers to use (default %(default)s)")
    filter_flag(search)
    search.add_argument("--json", action="store_true", help="print a JSON list of hits")
    model_flags(search, chat=False)
    return "search", search


def _delete(commands: _Commands) -> tuple[str, _Parser]:
    delete = commands.add_parser("delete", help="delete documents by id from a knowledge base")
    delete.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="document ids, as search shows them")
    delete.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    model_flags(delete, chat=False)
    return "delete", delete


def _serve(commands: _Commands) -> tuple[str, _Parser]:
    serve = commands.add_parser("serve", help="answer over HTTP: JSON API and OpenAI-compatible chat (waitress)")
    serve.add_argument("--kb", action="append", metavar="[NAME=]DIR", help="knowledge base folder or database URL; "
                       "repeat as NAME=DIR (or NAME=postgresql://...) to serve several collections by name")
    serve.add_argument("--collections", metavar="FILE", help='JSON {"collections": {"NAME": "DIR or URL", ...}} '
                       "(folders relative to the file); with or instead of --kb")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default %(default)s; TLS belongs to a proxy in front)")
    serve.add_argument("--port", type=port, default=8000, help="port; 0 picks a free one (default %(default)s)")
    serve.add_argument("--threads", type=positive, default=8, metavar="N", help="worker threads (default %(default)s)")
    serve.add_argument("--max-runs", type=positive, default=4, metavar="N",
                       help="questions answered at once; more get 429 (default %(default)s)")
    serve.add_argument("--max-body", type=positive, default=1_000_000, metavar="BYTES",
                       help="largest request body; files come base64 in POST /v1/documents, a third larger "
                            "(default %(default)s)")
    serve.add_argument("--max-file-size", type=positive, default=MAX_UPLOAD_BYTES, metavar="BYTES",
                       help="largest uploaded file, decoded, and what a .docx may unpack to; more is refused "
                            "(default %(default)s)")
    serve.add_argument("--cache-size", type=at_least(0), default=1024, metavar="N",
                       help="answers kept in memory; 0 turns the cache off (default %(default)s)")
    serve.add_argument("--cache-ttl", type=seconds, default=300.0, metavar="S",
                       help="seconds an answer is kept (default %(default)g)")
    serve.add_argument("--state-dir", metavar="DIR", help="the service's own state: chat conversations "
                                                          "(conversations.sqlite); give every server process the "
                                                          "same one (default: a temporary folder, gone at exit)")
    serve.add_argument("--keys-file", metavar="FILE", help="JSON keys with scopes, read again when it changes "
                                                           "(agentic-rag keys add makes them); or lines 'read KEY' "
                                                           "or 'write KEY' (also AGENTIC_RAG_READ_KEYS, "
                                                           "AGENTIC_RAG_WRITE_KEYS)")
    serve.add_argument("--access-log", default="-", metavar="FILE|-|off",
                       help="one line per request, in the Common Log Format plus its collection, key id and "
                            "milliseconds: to FILE (appended), to stderr (-) or nowhere (off) (default %(default)s)")
    serve.add_argument("--shutdown-timeout", type=seconds, default=10.0, metavar="S",
                       help="on SIGTERM or SIGINT, seconds to finish the requests under way (uploads and "
                            "conversation turns too) before cutting them off; a second signal stops at once "
                            "(default %(default)g)")
    connection_flags(serve)
    model_flags(serve)
    tool_flags(serve)
    return "serve", serve


def _mcp(commands: _Commands) -> tuple[str, _Parser]:
    mcp = commands.add_parser("mcp", help="answer MCP requests on stdin and stdout (an editor's or agent's MCP "
                                          "server): tools search, ask, list_documents, get_document")
    mcp.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder or database URL (read once, "
                                                                "at start)")
    mcp.add_argument("--max-rounds", type=positive, metavar="N", help="retrieval rounds at most in ask (default 3)")
    mcp.add_argument("--budget", type=positive, metavar="TOKENS", help="token budget of each ask")
    filter_flag(mcp)
    tool_flags(mcp)
    model_flags(mcp)
    return "mcp", mcp


def _keys(commands: _Commands) -> tuple[str, _Parser]:
    keys = commands.add_parser("keys", help="add or remove an API key of serve's JSON keys file (kept as sha256)")
    keys.add_argument("action", choices=("add", "remove"), help="add prints the new key once; remove takes it away")
    keys.add_argument("--file", required=True, metavar="FILE", help="the keys file (created by the first add)")
    keys.add_argument("--id", required=True, metavar="ID", help="the key's name in logs and access lines")
    keys.add_argument("--read", default="", metavar="NAMES", help="collections it reads, comma-separated (* for all)")
    keys.add_argument("--write", default="", metavar="NAMES",
                      help="collections it writes (and reads), comma-separated (* for all)")
    keys.add_argument("--filter", type=filters_json, metavar="JSON",
                      help="every search of the key keeps to chunks matching it, e.g. '{\"tenant\": \"acme\"}'; "
                           "its writes must match it")
    return "keys", keys


def _compact(commands: _Commands) -> tuple[str, _Parser]:
    compact = commands.add_parser("compact", help="merge a knowledge base's saved segments into one, "
                                                  "dropping what was deleted")
    compact.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    model_flags(compact, chat=False)
    return "compact", compact


def _ask(commands: _Commands) -> tuple[str, _Parser]:
    ask = commands.add_parser("ask", help="ask a question of a knowledge base")
    ask.add_argument("question", help="the question")
    ask.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    _run_flags(ask, "the run")
    ask.add_argument("--history", type=history_file, metavar="FILE",
                     help="the conversation before the question: a JSON list of messages or states, or a file "
                          "chat --save wrote")
    filter_flag(ask)
    tool_flags(ask)
    model_flags(ask)
    return "ask", ask


def _chat(commands: _Commands) -> tuple[str, _Parser]:
    chat = commands.add_parser("chat", help="ask a knowledge base questions and follow-ups, one a line")
    chat.add_argument("--kb", required=True, metavar="DIR", help="knowledge base folder")
    _run_flags(chat, "each turn")
    chat.add_argument("--history", type=history_file, metavar="FILE",
                      help="resume this conversation: a file --save wrote, or a JSON list of messages or states")
    chat.add_argument("--save", metavar="FILE", help="write the conversation to FILE after each turn (replaced "
                                                     "whole; --history FILE resumes it)")
    filter_flag(chat)
    tool_flags(chat)
    model_flags(chat)
    return "chat", chat


def _run_flags(parser: argparse.ArgumentParser, run: str) -> None:
    """The flags of one run that ask and chat share: what is printed of it, and its bounds."""
    parser.add_argument("--trace", action="store_true", help="print every trace event")
    parser.add_argument("--max-rounds", type=positive, metavar="N", help="retrieval rounds at most (default 3)")
    parser.add_argument("--budget", type=positive, metavar="TOKENS", help=f"token budget of {run}")
    parser.add_argument("--stream", action="store_true", help="print the draft answer as it is generated")


def _bench(commands: _Commands) -> tuple[str, _Parser]:
    bench = commands.add_parser("bench", help="linear against agentic on an evaluation set")
    bench.add_argument("--data", required=True, metavar="DIR",
                       help="a set folder: corpus.jsonl (or docs/, real files) and questions.jsonl")
    bench.add_argument("--mode", choices=("linear", "agentic", "both"), default="both",
                       help="linear, agentic or both (default %(default)s); on a conversation set (rows with "
                            "turns) agentic or both runs the last turn four ways, all agentic: conversation, "
                            "conversation_gold, no_history, standalone")
    bench.add_argument("--limit", type=positive, metavar="N", help="only the first N questions")
    bench.add_argument("--half", type=int, choices=(1, 2), help="only the questions in this half (a stable hash "
                                                               "of the id): choose settings on 1, check them on 2")
    bench.add_argument("--out", metavar="DIR", help="report folder (default reports/bench/SET)")
    bench.add_argument("--embedder", choices=sorted(EMBEDDERS) + ["openai"], default="hashing",
                       help="default %(default)s; openai embeds through the endpoint once, then the cached "
                            "knowledge base is reused")
    model_flags(bench, embedding=True)
    bench.add_argument("--cache", metavar="DIR", help="where built knowledge bases are kept (default OUT/kb-cache)")
    bench.add_argument("--sources", metavar="LIST", help="retrieval sources in re-routing order, e.g. vector,graph")
    return "bench", bench


def _bench_rgb(commands: _Commands) -> tuple[str, _Parser]:
    rgb = commands.add_parser("bench-rgb", help="the RGB paper's protocol: passages at a noise rate")
    rgb.add_argument("--file", required=True, help="an RGB .jsonl file, e.g. ../shared/data/rgb/zh_refine.dev.jsonl")
    rgb.add_argument("--noise-rate", type=rate, default=0.4, metavar="RATE",
                     help="share of negative passages (default %(default)s)")
    rgb.add_argument("--passages", type=positive, default=5, metavar="N",
                     help="passages per question (default %(default)s)")
    rgb.add_argument("--limit", type=positive, metavar="N", help="only the first N questions")
    rgb.add_argument("--out", metavar="DIR", help="where to write rgb.json and rgb_results.jsonl")
    model_flags(rgb)
    return "bench-rgb", rgb


def _doctor(commands: _Commands) -> tuple[str, _Parser]:
    doctor = commands.add_parser("doctor", help="check the model configuration and say what to fix")
    doctor.add_argument("--kb", metavar="DIR", help="also check this knowledge base's embedding dimension")
    model_flags(doctor, embedding=True)
    return "doctor", doctor


REFUSED_PAIRS = (  # flags that cannot both be honoured: refused, never one dropped in silence
    ("json", "stream", "--json prints one object when the run ends, --stream prints text as it comes; use one of them"),
    ("json", "trace", "the JSON object already holds every trace event (its \"trace\" list); drop --trace"),
)


def refuse_clashes(args: argparse.Namespace) -> None:
    """Exit with the one-line error of a bad flag when two given flags cannot both be honoured."""
    clash = next((f"--{a} with --{b}: {fix}" for a, b, fix in REFUSED_PAIRS
                  if getattr(args, a, False) and getattr(args, b, False)), None)
    if clash:
        _Parser(prog=f"agentic-rag {args.command}").error(clash)
