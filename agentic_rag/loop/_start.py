"""Before a run: the checks that raise on bad input, the settings it runs with, and the state it
starts from with the changes the driver makes to it first."""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import cast

from ..core import Config, ConfigurationError, RetrievalError, RunConfig
from ..kb import KnowledgeBaseBackend
from ..models import Model
from ._history import MAX_TOKENS, MAX_TURNS, history_messages
from ._patch import Event, Patch
from ._state import AgentState, check_state, config_from_saved, new_state, saved_config, upgrade_state


def prepare(question: str, kb: KnowledgeBaseBackend, model: Model, config: Config | RunConfig | None,
            state: dict | None, history: Sequence[Mapping] | None = None,
            instructions: str = "") -> tuple[Config, AgentState, Patch]:
    """The checks before a run (input errors raise here), its settings, the state it starts from and
    what the driver changes in it first: a new state (with its history checked and bounded, what was
    dropped said in the trace), or a copy of the given one in this version's shape (upgrade_state)
    with the settings given now kept and a hook's stop undone."""
    if not isinstance(instructions, str):
        raise ConfigurationError(f"instructions must be text, not {type(instructions).__name__}")
    if state is not None and (history or instructions):
        raise ConfigurationError("a resumed state keeps its own history and instructions; pass them only to a new run")
    messages, dropped = history_messages(history)
    if state is not None:
        check_state(state)
        if question != state["question"]:
            raise ConfigurationError(f"the question {question!r} is not the state's {state['question']!r}; "
                                     "resume a state with the question it was asked")
    settings = _settings(config, state)
    if not callable(getattr(model, "complete", None)):
        raise ConfigurationError(f"{model!r} is not a model: it needs a complete(request) method (see models.Model)")
    opening = Patch()
    if state is None:
        begun = new_state(question, settings, messages, instructions.strip())
        if dropped:
            opening.events.append(Event("history", f"history:-{dropped}", {
                "dropped_messages": dropped, "kept_messages": len(messages),
                "why": f"past {MAX_TURNS} turns or {MAX_TOKENS} tokens of history, the oldest first"}))
    else:
        begun = cast(AgentState, upgrade_state(copy.deepcopy(state)))  # check_state checked its keys and types
        if config is not None:  # the settings given now are the run's: a later resume keeps them
            opening.set(config=saved_config(settings))
    if begun["stop_reason"] == "stopped":
        opening.set(stop_reason=begun["resume_reason"], resume_reason=None)
    if len(kb) == 0:
        raise RetrievalError("the knowledge base is empty; index documents first (agentic-rag index PATH --kb DIR)")
    if pending := kb.pending_vectors:  # said, since what vector search can find is not all it holds yet
        opening.events.append(Event("vectors", f"vectors:-{pending}", {
            "chunks_without_vector": pending, "chunks": len(kb),
            "why": "an index is still filling in the vectors; until then such chunks are found by BM25 alone"}))
    return settings, begun, opening


def _settings(config: Config | RunConfig | None, state: dict | None) -> Config:
    """The run's settings: the given Config, or a RunConfig with the other layers as the state saved
    them (else their defaults); none given, the state's own (a resumed run keeps its settings)."""
    if isinstance(config, Config):
        return config  # given whole: the saved settings are not read
    if config is not None and not isinstance(config, RunConfig):
        raise ConfigurationError(f"config must be an agentic_rag.Config or RunConfig, not {type(config).__name__}")
    saved = config_from_saved(state["config"]) if state is not None else Config()
    return saved if config is None else Config.from_layers(index=saved.index, search=saved.search, run=config)


def grader_is_generator(model: Model) -> bool:
    """Whether grading and generation go to one model, so that an unsure grade can come in the answer's
    reply; a models set that gives grading a model of its own keeps it as the grader."""
    model_for = getattr(model, "model_for", None)
    return model_for is None or model_for("grade") is model_for("generate")
