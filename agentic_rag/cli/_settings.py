"""Settings for the command line: models, embedders, knowledge bases, tools and the server's keys
from flags, a models file and the environment. The only module that reads environment variables."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import ConfigurationError, endpoint_from_env
from ..kb import Embedder, KnowledgeBaseBackend, make_embedder, open_kb, saved_embedder
from ..kb.embedders import EmbeddingCache, embedder_trait
from ..models import build_model, read_models_file
from ..tools import CALCULATOR, OffTool, Tool, shop_tools

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ..models import ImageDescriber, Model


def model_settings(args: argparse.Namespace) -> dict:
    """Model settings from flags, then a --models-config file, then the environment (read here,
    and only here): AGENTIC_RAG_MODEL, AGENTIC_RAG_EMBEDDING_MODEL, *_BASE_URL, *_API_KEY."""
    environ = os.environ
    file = read_models_file(args.models_config) if getattr(args, "models_config", None) else {}
    per_task = dict(file.get("per_task", {}))
    for item in getattr(args, "model_for", None) or []:
        task, sep, name = item.partition("=")
        if not sep or not name:
            raise ConfigurationError(f"--model-for {item!r}: write TASK=MODEL, e.g. --model-for grade=small-model")
        per_task[task] = name
    return {"name": getattr(args, "model", None) or file.get("model") or environ.get("AGENTIC_RAG_MODEL") or "offline",
            "per_task": per_task, "temperature": file.get("temperature"), "prices": file.get("prices"),
            "endpoint": endpoint_from_env(environ, base_url=getattr(args, "base_url", None) or file.get("base_url")),
            "embedding_model": getattr(args, "embedding_model", None) or file.get("embedding_model")
            or environ.get("AGENTIC_RAG_EMBEDDING_MODEL"),
            "embedding_query_model": getattr(args, "embedding_query_model", None) or file.get("embedding_query_model"),
            "embedding_input_type": bool(getattr(args, "embedding_input_type", False)
                                         or file.get("embedding_input_type", False))}


def make_describer(model: str | None, settings: dict, cache_dir: str | None = None) -> ImageDescriber | None:
    """The vision model that describes images at index time, or None when none is named; its
    descriptions are cached in cache_dir, by default under XDG_CACHE_HOME (~/.cache)."""
    if not model:
        return None
    from ..models import ImageDescriber

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentic-rag" / "image-descriptions"
    return ImageDescriber(model, settings["endpoint"], cache_dir or cache)


def embedding_cache(embedder: Embedder) -> EmbeddingCache | None:
    """Where index and fill keep every vector they make, for any knowledge base: AGENTIC_RAG_EMBEDDING_CACHE
    (a folder; "off" for none), by default under XDG_CACHE_HOME (~/.cache). None for an embedder whose
    vectors are sparse (hashing: made faster than they are read back, and large written dense)."""
    chosen = os.environ.get("AGENTIC_RAG_EMBEDDING_CACHE", "")
    if chosen.strip().lower() == "off" or embedder_trait(embedder, "sparse"):
        return None
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentic-rag" / "embeddings"
    return EmbeddingCache(chosen or default, embedder)


def make_model(settings: dict) -> Model:
    """The model the command line runs: offline unless a model is named; nothing switches silently."""
    return build_model(settings["name"], settings["endpoint"], settings["per_task"], settings["temperature"],
                       settings["prices"])


def make_cli_embedder(name: str, settings: dict) -> Embedder:
    """An embedder by name; `openai` calls the configured endpoint with the embedding settings, and a
    saved `openai:MODEL[+input_type][+query=NAME]` with the options it was built with."""
    if name == "openai" or name.startswith("openai:"):
        from ..kb.embedders import OpenAIEmbedder, parse_openai_embedder_name

        options = parse_openai_embedder_name(name) if name.startswith("openai:") else {
            "model": settings["embedding_model"], "query_model": settings.get("embedding_query_model"),
            "input_type": settings.get("embedding_input_type", False)}
        if not options["model"]:
            raise ConfigurationError("--embedder openai needs --embedding-model NAME (or AGENTIC_RAG_EMBEDDING_MODEL)")
        return OpenAIEmbedder(options.pop("model"), settings["endpoint"], **options)
    return make_embedder(name)


def load_kb(path: str, settings: dict) -> KnowledgeBaseBackend:
    """Open a saved knowledge base with the embedder it was built with: a folder, or a PostgreSQL
    database named by its URL (postgresql://...)."""
    return open_kb(path, saved_cli_embedder(path, settings))


def saved_cli_embedder(path: str, settings: dict) -> Embedder | None:
    """The embedder to open a folder built with `openai:...` with (its endpoint is the settings');
    None for any other, which the knowledge base makes from the name it saved."""
    built = (saved_embedder(path) or {}).get("name", "")
    return make_cli_embedder(built, settings) if built.startswith("openai:") else None


def ask_tools(args: argparse.Namespace) -> list[Tool | OffTool]:
    """Calculator and dates always; shop lookups and SQL with --db (without it, the shop lookups off:
    a question that wants one is told how to turn them on); web search only with --web-search; the
    tools of each --mcp server."""
    from datetime import datetime

    from ..tools import SQLDatabase, date_tools, shop_tools_off, sql_tool, web_search_tool

    if args.now:
        try:
            moment = datetime.fromisoformat(args.now)
        except ValueError:
            raise ConfigurationError(f"--now {args.now!r}: write YYYY-MM-DDTHH:MM") from None
    clock = (lambda: moment) if args.now else datetime.now
    tools: list[Tool | OffTool] = [CALCULATOR, *date_tools(clock)]  # OffTools for those not given
    if args.db:
        try:
            db = SQLDatabase(args.db)  # opened now: a missing, empty or non-SQLite file fails before the run
        except ConfigurationError as exc:
            raise ConfigurationError(f"--db: {exc}") from None
        tools += shop_tools(args.db) + [sql_tool(db)]
    else:
        tools += shop_tools_off()
    if args.web_search:
        tools.append(web_search_tool(args.web_search))
    return tools + _mcp_tools(args.mcp or [], args.mcp_route or [])


def _mcp_tools(servers: list[str], routes: list[tuple[str, str]]) -> list[Tool | OffTool]:
    """The tools of each --mcp server, each with the --mcp-route patterns given for its name."""
    if not servers:
        if routes:
            raise ConfigurationError("--mcp-route needs --mcp: the MCP server whose tool it routes to")
        return []
    from dataclasses import replace

    from ..mcp import mcp_tools

    tools = [tool for server in servers for tool in mcp_tools(server)]
    named = {tool.name for tool in tools}
    for name, _ in routes:
        if name not in named:
            raise ConfigurationError(f"--mcp-route {name}=...: no --mcp server has a tool {name!r}; they have "
                                     f"{', '.join(sorted(named)) or 'none'}")
    routed = {name: tuple(p for n, p in routes if n == name) for name, _ in routes}
    return [replace(tool, patterns=routed[tool.name], model_routed=False) if tool.name in routed else tool
            for tool in tools]


def tracing_from_environment() -> TracerProvider | None:
    """`serve`'s OpenTelemetry tracer provider, set up from the standard OTEL_* variables when they
    ask for traces (tracing.configure_from_environment), else None."""
    from ..core import configure_from_environment

    return configure_from_environment(os.environ)


def serve_collections(args: argparse.Namespace) -> dict[str, str]:
    """`serve`'s collections, name -> folder or database URL: `--kb DIR` alone is the one collection
    "default"; `--kb NAME=DIR` (repeated) and `--collections FILE` name them."""
    import json

    from ..service import NAME

    given: dict[str, str] = {}

    def add(name: str, address: str, where: str) -> None:
        if not NAME.fullmatch(name):
            raise ConfigurationError(f"{where}: collection name {name[:70]!r}: use 1-64 letters, digits and _.-")
        if name in given:
            raise ConfigurationError(f"{where}: collection {name!r} is named twice; give each name once")
        given[name] = address

    for value in args.kb or []:
        name, equals, address = value.partition("=")
        if equals and NAME.fullmatch(name):
            add(name, address, f"--kb {value}")
        elif len(args.kb) > 1 or args.collections:
            raise ConfigurationError(f"--kb {value}: with several collections name each, --kb NAME=DIR")
        else:
            add("default", value, f"--kb {value}")
    if args.collections:
        file = Path(args.collections)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"cannot read --collections {file}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigurationError(f"--collections {file} is not UTF-8 JSON ({exc})") from None
        listed = data.get("collections") if isinstance(data, dict) else None
        if not isinstance(listed, dict) or not all(isinstance(v, str) and v for v in listed.values()):
            raise ConfigurationError(f'--collections {file}: write {{"collections": {{"NAME": "DIR or URL"}}}}')
        for name, address in listed.items():
            local = "://" not in address and not Path(address).is_absolute()
            add(name, str(file.parent / address) if local else address, f"--collections {file}")
    if not given:
        raise ConfigurationError("give the knowledge base to serve: --kb DIR, --kb NAME=DIR (repeated) or "
                                 "--collections FILE")
    return given


def serve_settings(args: argparse.Namespace, collections: list[str]) -> dict:
    """`serve`'s keys (--keys-file: JSON keys with scopes, read again when it changes, or lines of plain
    keys; AGENTIC_RAG_READ_KEYS, AGENTIC_RAG_WRITE_KEYS) as a KeyRing over `collections`, and the folder
    prometheus_client shares between worker processes (PROMETHEUS_MULTIPROC_DIR), checked."""
    from ..service import KeyRing, keys_from, legacy_scopes

    scoped = bool(args.keys_file) and _is_json(args.keys_file)
    reads, writes = keys_from(os.environ, None if scoped else args.keys_file)
    keys = KeyRing(legacy_scopes(reads, writes), file=args.keys_file if scoped else None, collections=collections)
    metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if metrics_dir and not Path(metrics_dir).is_dir():
        raise ConfigurationError(f"PROMETHEUS_MULTIPROC_DIR={metrics_dir} is not a folder; create it (empty) first")
    return {"keys": keys, "multiprocess_dir": metrics_dir}


def _is_json(file: str) -> bool:
    """Whether a keys file is the JSON kind (its first character that is not a space is "{")."""
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            return handle.read(4096).lstrip().startswith("{")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the keys file {file}: {exc.strerror}") from None
