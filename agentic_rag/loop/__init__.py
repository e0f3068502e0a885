"""The agent loop: run_agentic_rag's driver, the phase graph (one literal: each phase's handler and the
phases it may return) with one module per phase, the Patch a handler returns its changes in, the run
state and its trace, conversation history and the Conversation helper. Other parts of the package
import the loop from here."""
# for the package's other folders, not public API (the public names are in __all__)
from ._conversation import FORMAT as FORMAT
from ._conversation import Conversation
from ._drawing import RunView, render_html, show
from ._driver import Hook as Hook
from ._driver import run_agentic_rag, stop_condition
from ._endings import answer_notes
from ._graph import GRAPH, Phase, TransitionError
from ._history import MAX_TOKENS, MAX_TURNS, history_messages
from ._patch import Event, Patch
from ._run import Run
from ._state import STATE_KEYS, STOP_REASONS, AgentState, Round, format_trace, new_state

__all__ = ["run_agentic_rag", "Conversation", "show", "render_html", "RunView", "new_state", "AgentState", "Round",
           "STOP_REASONS", "STATE_KEYS", "format_trace", "history_messages", "MAX_TURNS", "MAX_TOKENS", "answer_notes",
           "GRAPH", "Phase", "TransitionError", "Patch", "Event", "Run", "stop_condition"]
