"""Conversation: the turns of one conversation kept for a notebook or a service, each question asked
with the turns before it as its history."""
from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import Config, ConfigurationError, RunConfig
from ..kb import KnowledgeBaseBackend
from ..models import Model
from ..tools import OffTool, Tool
from ._driver import run_agentic_rag
from ._history import history_messages
from ._state import AgentState

FORMAT = 1  # the version of to_json's object


class Conversation:
    """Ask follow-ups: `conv.ask("...")` runs one turn (run_agentic_rag with the turns so far as its
    history) and returns its state; the turn's question, answer and cited passages join `history`
    (bounded as a run bounds it: the oldest turns are dropped; a question as the condense step read
    it). A turn a hook stopped is not kept; one that failed is, with no answer, so that a follow-up
    still knows what was asked.
    One conversation serves one question at a time: turns asked from two threads run one after the
    other. `to_json` and `from_json` save and resume it."""

    def __init__(self, kb: KnowledgeBaseBackend, model: Model, tools: Iterable[Tool | OffTool] = (),
                 config: Config | RunConfig | None = None, *, instructions: str = "",
                 history: Sequence[Mapping] | None = None) -> None:
        self.kb, self.model, self.tools, self.config = kb, model, list(tools), config
        self.instructions = instructions
        self._turns, _ = history_messages(history)
        self._lock = threading.Lock()

    @property
    def history(self) -> list[dict]:
        """The turns so far as messages (user, then assistant with the "evidence" its answer cited)."""
        with self._lock:
            return copy.deepcopy(self._turns)

    def ask(self, question: str, **options: Any) -> AgentState:
        """One turn; `options` go to run_agentic_rag (on_step, on_token). Returns the turn's state."""
        with self._lock:
            state = run_agentic_rag(question, self.kb, self.model, self.tools, self.config,
                                    history=self._turns, instructions=self.instructions, **options)
            if state["stop_reason"] != "stopped":
                self._turns, _ = history_messages([*self._turns, state])
            return state

    def reset(self) -> None:
        """Forget the turns: the next question starts a new conversation."""
        with self._lock:
            self._turns = []

    def to_json(self) -> str:
        """The conversation as JSON: its turns and instructions (not the knowledge base or the model)."""
        with self._lock:
            return json.dumps({"format": FORMAT, "instructions": self.instructions, "turns": self._turns},
                              ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, kb: KnowledgeBaseBackend, model: Model, tools: Iterable[Tool | OffTool] = (),
                  config: Config | RunConfig | None = None) -> Conversation:
        """A conversation to_json saved, resumed over `kb` with `model`."""
        try:
            saved = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"the saved conversation is not JSON ({exc}); pass what to_json wrote") from None
        if not isinstance(saved, dict) or saved.get("format") != FORMAT or not isinstance(saved.get("turns"), list):
            raise ConfigurationError(f"the saved conversation is not one to_json wrote (format {FORMAT} with turns)")
        instructions = saved.get("instructions") or ""
        if not isinstance(instructions, str):
            raise ConfigurationError("the saved conversation's instructions are not text; pass what to_json wrote")
        return cls(kb, model, tools, config, instructions=instructions, history=saved["turns"])
