"""The conversations the chat endpoint keeps: a small SQLite file every worker process shares, each
conversation's turns (with the passages each answer cited, carried into the next turn) under a
random id, bound to the API key that opened it, bounded in count, idle age and size, and answered
one turn at a time: a turn claims its conversation (a busy flag set in a `BEGIN IMMEDIATE`
transaction, so across threads and processes) and the next one waits for it, then gets 409."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..loop import history_messages

log = logging.getLogger("agentic_rag.service")
FILE = "conversations.sqlite"
_POLL_S = 0.05  # how often a turn waiting for a busy conversation looks again
_SCHEMA = """CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,      -- conv_ + secrets.token_urlsafe: unguessable
    owner TEXT NOT NULL,      -- sha256 of the API key that opened it ("no key" when the service has none)
    updated REAL NOT NULL,    -- time.time() of its last turn: idle past max_idle_s, it has expired
    claim TEXT,               -- the token of the turn being answered, NULL when none is
    busy_until REAL NOT NULL, -- that turn's claim lapses then (a worker that died mid-turn frees it)
    turns TEXT NOT NULL       -- JSON: the bounded history, as _history.history_messages gives it
)"""


class ConversationError(Exception):
    """Why a conversation cannot take a turn: status 404 (unknown, another key's, expired) or 409 (busy)."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass
class Claim:
    """A conversation held for one turn: its id, the history before the turn, and the claim's token
    (None for a conversation this turn opens, which no one else can know of yet)."""

    id: str
    owner: str
    turns: list[dict] = field(default_factory=list)
    token: str | None = None


def owner_of(key: str | None) -> str:
    """What a conversation is bound to: a digest of the API key (never the key), or "no key"."""
    return hashlib.sha256(f"agentic-rag key:{key}".encode()).hexdigest() if key else "no key"


class ConversationStore:
    """Conversations in `folder`/conversations.sqlite (made on first use, readable by its owner only)."""

    def __init__(self, folder: str | Path, max_conversations: int = 10_000, max_idle_s: float = 86_400.0,
                 wait_s: float = 30.0):
        self.path = Path(folder) / FILE
        self.max_conversations, self.max_idle_s, self.wait_s = max_conversations, max_idle_s, wait_s
        self._ready = False

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, begun IMMEDIATE (it holds the file's write lock from its start, so
        a read and the write it decides are one step for every process); committed or rolled back."""
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = sqlite3.connect(self.path, timeout=self.wait_s, isolation_level=None)
        except OSError as exc:  # as sqlite3's own failures are: the store cannot be used
            raise sqlite3.OperationalError(f"cannot open {self.path}: {exc.strerror}") from None
        try:
            if not self._ready:
                try:
                    os.chmod(self.path, 0o600)  # users' questions: the service's owner only
                except OSError as exc:
                    raise sqlite3.OperationalError(f"cannot make {self.path} private: {exc.strerror}") from None
                db.execute(_SCHEMA)
                self._ready = True
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def new(self, key: str | None, history: list[dict]) -> Claim:
        """A conversation for `key` that will start with `history`; it is stored by `save`."""
        return Claim(f"conv_{secrets.token_urlsafe(24)}", owner_of(key), history)

    def claim(self, conversation_id: str, key: str | None, hold_s: float) -> Claim:
        """Hold the conversation for one turn of at most `hold_s` seconds, waiting up to wait_s for a
        turn already under way; ConversationError when it is not this key's, has expired, or stays busy."""
        gave_up = time.monotonic() + self.wait_s
        while True:
            with self._transaction() as db:
                outcome = self._try_claim(db, conversation_id, owner_of(key), hold_s)
            if isinstance(outcome, Claim):
                return outcome
            if outcome is not None:  # committed first: an expired conversation is deleted
                raise outcome
            if time.monotonic() >= gave_up:
                raise ConversationError(409, "conversation_busy", (
                    f"conversation {conversation_id} has been answering another turn for {self.wait_s:g} s; "
                    f"retry when it is done (one turn at a time)"))
            time.sleep(_POLL_S)

    def _try_claim(self, db: sqlite3.Connection, conversation_id: str, owner: str,
                   hold_s: float) -> Claim | ConversationError | None:
        """The claim, the error to reply with, or None while another turn holds the conversation."""
        row = db.execute("SELECT owner, updated, claim, busy_until, turns FROM conversations WHERE id = ?",
                         (conversation_id,)).fetchone()
        now = time.time()
        if row is None or not hmac.compare_digest(row[0], owner):  # another key's: as if it did not exist
            return ConversationError(404, "conversation_not_found", _unknown(conversation_id, self))
        busy = bool(row[2]) and row[3] > now  # a claim that lapsed (its worker died) holds nothing
        if busy:
            return None
        if now - row[1] > self.max_idle_s:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            return ConversationError(404, "conversation_not_found", (
                f"conversation {conversation_id} has expired: no turn for {_hours(self.max_idle_s)}; "
                f"start a new one (send the whole conversation, with \"conversation\": true)"))
        token = secrets.token_hex(8)
        db.execute("UPDATE conversations SET claim = ?, busy_until = ? WHERE id = ?",
                   (token, now + hold_s, conversation_id))
        return Claim(conversation_id, owner, json.loads(row[4]), token)

    def save(self, claim: Claim, turn: dict) -> None:
        """Add the turn (a state, or `ask --json`'s object: question, answer, abstained, citations) to
        the conversation, bounded as a run bounds its history, and free it."""
        turns, _ = history_messages([*claim.turns, turn])
        data = json.dumps(turns, ensure_ascii=False)
        with self._transaction() as db:
            now = time.time()
            if claim.token is None:
                self._make_room(db, now)
                db.execute("INSERT INTO conversations VALUES (?, ?, ?, NULL, 0, ?)", (claim.id, claim.owner, now, data))
                return
            done = db.execute("UPDATE conversations SET turns = ?, updated = ?, claim = NULL, busy_until = 0 "
                              "WHERE id = ? AND claim = ?", (data, now, claim.id, claim.token)).rowcount
        if not done:  # evicted meanwhile, or the turn outlived its claim and another took it
            log.warning("conversation %s: a turn was answered after its claim lapsed; it was not kept", claim.id)

    def release(self, claim: Claim) -> None:
        """Free the conversation without a turn (the turn failed)."""
        if claim.token is not None:
            with self._transaction() as db:
                db.execute("UPDATE conversations SET claim = NULL, busy_until = 0 WHERE id = ? AND claim = ?",
                           (claim.id, claim.token))

    def _make_room(self, db: sqlite3.Connection, now: float) -> None:
        """Before a new conversation: the expired ones go, then the longest idle while there are
        max_conversations (never one whose turn is under way)."""
        db.execute("DELETE FROM conversations WHERE updated < ? AND busy_until < ?", (now - self.max_idle_s, now))
        count = db.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        if count >= self.max_conversations:
            db.execute("DELETE FROM conversations WHERE id IN (SELECT id FROM conversations WHERE busy_until < ? "
                       "ORDER BY updated LIMIT ?)", (now, count - self.max_conversations + 1))

    def turns(self, conversation_id: str) -> list[dict]:
        """The stored turns of a conversation ([] when there is none): for tests and operators."""
        with self._transaction() as db:
            row = db.execute("SELECT turns FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return json.loads(row[0]) if row else []


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds:g} s"


def _unknown(conversation_id: str, store: ConversationStore) -> str:
    return (f"no such conversation {conversation_id[:64]!r}: it may have expired (no turn for "
            f"{_hours(store.max_idle_s)}) or been evicted (past {store.max_conversations:,} conversations); "
            f"start a new one (send the whole conversation, with \"conversation\": true)")
