"""Patch: the changes one phase makes to the state, written down for the driver to apply.

A handler never writes the state it is given: it reads it, puts what it would change into a Patch
(keys set to new values, trace events to add) and returns the next phase. Only the driver applies
a patch (apply in _driver.py), so the driver is the only code that changes a state."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._state import STATE_KEYS, AgentState


class Event(NamedTuple):
    """One trace event as a phase records it; the driver adds the round when it applies the patch."""

    step: str                   # the step that ran: route, search, verify, ... (its time goes to timings_ms[step])
    summary: str                # its word in the trace line (format_trace)
    detail: dict[str, Any]      # what it found or decided
    ms: float = 0.0             # how long it took; 0 for an event that is a note, not a call
    tokens: int = 0             # tokens its model calls used
    cost_usd: float = 0.0


@dataclass
class Patch:
    """What one phase changes: `values`, the state keys it sets to new values (a new list or dict, never
    one changed in place), and `events`, the trace events it adds. The driver writes the values, then
    appends the events, each with the round and its time added to timings_ms."""

    values: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        _check_keys(self.values)

    def set(self, **values: Any) -> None:
        """Set state keys to new values; a key AgentState does not declare is refused (KeyError)."""
        _check_keys(values)
        self.values.update(values)

    def get(self, state: Mapping[str, Any], key: str) -> Any:
        """What `key` will hold once this patch is applied: the value set here, else the state's."""
        return self.values[key] if key in self.values else state[key]

    def append(self, state: AgentState, key: str, item: Any) -> None:
        """Set the list `key` to its items with `item` added at the end."""
        self.set(**{key: [*self.get(state, key), item]})

    def update_round(self, state: AgentState, **keys: Any) -> None:
        """Set keys of the last round (state["rounds"][-1]), in a new round dict."""
        *before, last = self.get(state, "rounds")
        self.set(rounds=[*before, {**last, **keys}])

    def note(self, step: str, summary: str, detail: dict[str, Any]) -> None:
        """Add a trace event that took no time and no tokens (a decision recorded, not a call)."""
        self.events.append(Event(step, summary, detail))


def _check_keys(values: Mapping[str, Any]) -> None:
    undeclared = sorted(set(values) - STATE_KEYS)
    if undeclared:
        raise KeyError(f"a phase set {', '.join(undeclared)}, which AgentState does not declare; "
                       "declare the key in AgentState (loop/_state.py) or keep the value out of the state")
