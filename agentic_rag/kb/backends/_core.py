"""What every backend shares: the chunk records, the text both retrievers index, and the check
that a saved knowledge base is opened with the settings it was built with."""
from __future__ import annotations

from ..._config import Config, IndexConfig, as_config
from ..._errors import ConfigurationError


def index_text(chunk: dict) -> str:
    """What both retrievers see: the title (often the entity's name) above the chunk."""
    return f"{chunk['title']}\n{chunk['text']}" if chunk["title"] else chunk["text"]


def saved_chunking(config, chunking: dict, where: str, fix: str) -> Config:
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
