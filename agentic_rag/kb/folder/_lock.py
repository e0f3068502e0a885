"""The writer lock of a knowledge base's folder, fair between processes.

    DIR/.lock         held (flock) by the one writer at work
    DIR/.lock-queue   held by the one writer next in line, while it waits for .lock

flock wakes no waiter in order, and a writer that lets .lock go and asks for it again at once gets
it before a waiter has woken: two services writing one folder took 95 turns against 14. So a
writer first takes the queue lock and keeps it until it holds .lock: the writer that just let
.lock go must queue behind the waiter, which takes its turn first. Both waits poll (a non-blocking
flock every POLL_S): only the queue's holder asks for .lock, so nobody can overtake it between two
polls, and a writer that gives up at its deadline leaves nothing behind (a blocking flock cannot
time out: a thread left waiting in it held a thread and a descriptor until the lock came free).
flock is POSIX only; fcntl is imported where it is used, so that reading a knowledge base works
everywhere.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ...core import WriteConflict

LOCK, QUEUE = ".lock", ".lock-queue"
POLL_S = 0.02  # how often a waiting writer asks again: a small delay per turn, no busy loop
_held = threading.local()  # folders whose lock this thread holds, so a save inside a held lock goes on


@contextmanager
def writer_lock(directory: Path, wait_s: float = 0.0, on_wait: Callable[[], None] | None = None,
                opened: Callable[[Path], IO[Any]] | None = None) -> Iterator[None]:
    """Hold DIR/.lock for the duration (re-entrant in one thread); another writer waits its turn up
    to `wait_s` seconds, calling `on_wait` once, and is then refused. `opened(path)` opens a lock
    file (the caller's, to turn a write failure into its own error)."""
    held = _held.__dict__.setdefault("folders", set())
    key = os.path.realpath(directory)
    if key in held:  # e.g. the command line holds it from load to save; the save inside goes on
        yield
        return
    import fcntl

    opened = opened or (lambda path: open(path, "a+"))  # noqa: SIM115 (closed below)
    deadline = time.monotonic() + wait_s
    with opened(directory / LOCK) as handle:
        with opened(directory / QUEUE) as queue:
            got = _flock(queue, deadline, on_wait)
            try:
                got = got and _flock(handle, deadline, on_wait if got is True else None)
            finally:
                fcntl.flock(queue, fcntl.LOCK_UN)
        if not got:
            waited = f" (waited {wait_s:g} s)" if wait_s else ""
            raise WriteConflict(f"another process is writing the knowledge base at {directory}{waited}; "
                                f"wait for it to finish, then retry")
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _flock(handle: IO[Any], deadline: float, on_wait: Callable[[], None] | None) -> bool | str:
    """Take `handle`'s flock by `deadline` (time.monotonic): True at once, "waited" after waiting
    (`on_wait` called first), False when the deadline passed; asked again every POLL_S meanwhile."""
    import fcntl

    waited = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return "waited" if waited else True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        time.sleep(min(POLL_S, left))
