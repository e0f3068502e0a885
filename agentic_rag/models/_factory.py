"""Build the model a run uses from names: `offline`, or OpenAI-compatible models, one per task if asked."""
from __future__ import annotations

import json
from pathlib import Path

from ..core import ConfigurationError, Endpoint
from ._model_set import ModelSet
from ._offline import OfflineModel
from ._openai_client import OpenAIChatModel
from ._protocol import TASKS, Model


def build_model(name: str, endpoint: Endpoint = Endpoint(), per_task: dict[str, str] | None = None,
                temperature: dict[str, float] | None = None, prices: dict[str, list] | None = None) -> Model:
    """`offline` or a model name for the endpoint; `per_task` sends tasks to other models (a small
    one to judge, a large one to answer); prices are USD per million (input, output) tokens."""
    def one(model: str) -> Model:
        if model == "offline":
            return OfflineModel()
        price = tuple((prices or {}).get(model, (0.0, 0.0)))
        if len(price) != 2:
            raise ConfigurationError(f"price for {model} must be [input, output] USD per million tokens")
        return OpenAIChatModel(model, endpoint, temperature=dict(temperature or {}), price=price)

    unknown = set(per_task or {}) - set(TASKS)
    if unknown:
        raise ConfigurationError(f"unknown task {sorted(unknown)[0]!r} in per-task models; tasks: {', '.join(TASKS)}")
    built = {model: one(model) for model in {name, *(per_task or {}).values()}}
    if not per_task:
        return built[name]
    return ModelSet(built[name], **{task: built[model] for task, model in per_task.items()})


MODELS_FILE_KEYS = ("model", "per_task", "temperature", "prices", "base_url", "embedding_model",
                    "embedding_query_model", "embedding_input_type")


def read_models_file(path: str | Path) -> dict:
    """A JSON settings file: {"model": ..., "per_task": {task: model}, "temperature": {task: t},
    "prices": {model: [in, out]}, "base_url": ..., "embedding_model": ..., "embedding_query_model": ...,
    "embedding_input_type": true}; every key optional."""
    try:
        settings = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the models file {path}: {exc}") from None
    unknown = set(settings) - set(MODELS_FILE_KEYS)
    if unknown:
        raise ConfigurationError(f"unknown key {sorted(unknown)[0]!r} in {path}; keys: {', '.join(MODELS_FILE_KEYS)}")
    if not isinstance(settings.get("embedding_input_type", False), bool):
        raise ConfigurationError(f"embedding_input_type in {path} must be true or false, "
                                 f"not {settings['embedding_input_type']!r}")
    return settings
