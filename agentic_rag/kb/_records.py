"""What every backend shares: the chunk records and how documents become them, what an add did,
the text both retrievers index, and the check that a saved knowledge base is opened with the
embedder, tokenizer and chunking it was built with. The search template is in _search."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..core import Config, ConfigurationError, IndexConfig, RetrievalError, SearchConfig, as_config
from ..text import TOKENIZER_SETTINGS
from .embedders import REMOVED, Embedder, make_embedder
from .ingestion import Document, document_chunks

ADD_BATCH = 2048  # chunks tokenized and embedded at a time by an add: its scratch memory is bounded by it


@dataclass
class AddResult:
    """What an add did: documents new, replaced and unchanged (skipped), and chunks written."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    chunks: int = 0


def chunk_records(documents: Iterable[Document], index: IndexConfig) -> Iterator[dict]:
    """The chunk records of the documents, one at a time: {id, doc_id, text, title, source, metadata},
    the id being `DOC_ID#N`; a chunk never crosses a page or section."""
    for doc in documents:
        for i, (text, metadata) in enumerate(document_chunks(doc, index.chunk_size, index.chunk_overlap)):
            yield dict(id=f"{doc.id}#{i}", doc_id=doc.id, text=text, title=doc.title, source=doc.source,
                       metadata=metadata)


def batches(items: Iterable, size: int) -> Iterator[list]:
    """Lists of `size` items (the last may be shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def index_text(chunk: dict) -> str:
    """What both retrievers see: the title (often the entity's name) above the chunk."""
    return f"{chunk['title']}\n{chunk['text']}" if chunk["title"] else chunk["text"]


def check_built_with(where: str, built: dict, embedder: Embedder | None,
                     config: Config | IndexConfig | SearchConfig | None, new: str) -> tuple[Embedder, Config]:
    """The embedder and settings to open a saved knowledge base with, given what it records (`built`:
    its embedder, tokenizer and chunking) and what the caller gave (None: what it was built with).
    Anything else is an error naming `where` and the fix: the same settings, or a rebuild into `new`."""
    embedder = built_embedder(where, built, embedder, new)
    config = saved_chunking(config, built["chunking"], where,
                            f"keep its settings or build a new knowledge base: agentic-rag index PATH --kb {new}")
    check_tokenizer(where, built, new)
    return embedder, config


def built_embedder(where: str, built: dict, embedder: Embedder | None, new: str) -> Embedder:
    """The given embedder if it is the one `built` records (by name and dimension), else that one made."""
    name, dimension = built["embedder"]["name"], built["embedder"]["dimension"]
    if name in REMOVED:
        raise ConfigurationError(f"{where} was built with {REMOVED[name]}; rebuild it with e5: "
                                 f"agentic-rag index PATH --kb {new} --embedder e5")
    try:
        embedder = embedder or make_embedder(name, dimension)
    except ConfigurationError as exc:  # a name this version does not know: say which knowledge base asked for it
        raise ConfigurationError(f"{where} was built with embedder {name!r} ({dimension}-dim), which cannot "
                                 f"be made here: {exc}") from None
    if (embedder.name, embedder.dimension) != (name, dimension):
        raise ConfigurationError(f"{where} was built with embedder {name!r} ({dimension}-dim) but "
                                 f"{embedder.name!r} ({embedder.dimension}-dim) was given; use --embedder {name} "
                                 f"or rebuild it into a new knowledge base: agentic-rag index PATH --kb {new}")
    return embedder


def check_tokenizer(where: str, built: dict, new: str) -> None:
    """Refuse a knowledge base tokenized by other settings than this version's: its BM25 postings would not match."""
    if built["tokenizer"] != TOKENIZER_SETTINGS:
        raise RetrievalError(f"{where} was tokenized with {built['tokenizer']}; rebuild it with this version: "
                             f"agentic-rag index PATH --kb {new}")


def saved_chunking(config: Config | IndexConfig | SearchConfig | None, chunking: dict, where: str,
                   fix: str) -> Config:
    """The settings a saved knowledge base opens with: the given ones (a Config, a layer or None, as
    KnowledgeBase takes them), with its saved chunking (`chunking`, as the manifest has it) when they
    give none (no index layer), or after checking that theirs is the same (else an error)."""
    front = as_config(config)
    if not isinstance(config, (Config, IndexConfig)):
        saved = IndexConfig(chunk_size=chunking["size"], chunk_overlap=chunking["overlap"])
        return Config.from_layers(saved, front.search, front.run)
    if (front.chunk_size, front.chunk_overlap) != (chunking["size"], chunking["overlap"]):
        raise ConfigurationError(f"{where} was chunked with size {chunking['size']} and overlap {chunking['overlap']}, "
                                 f"not {front.chunk_size} and {front.chunk_overlap}; {fix}")
    return front
