"""The writer lock of a knowledge base's folder, fair between processes.

    DIR/.lock         held (flock) by the one writer at work
    DIR/.lock-queue   held by the one writer next in line, while it waits for .lock

flock wakes no waiter in order, and a writer that lets .lock go and asks for it again at once gets
it before a waiter has woken: two services writing one folder took 95 turns against 14. So a
writer first takes the queue lock and keeps it until it holds .lock: the writer that just let
.lock go must queue behind the waiter, which takes its turn first. Waits block in the kernel (in
a helper thread, since flock cannot time out), so a waiter is woken the moment a lock is free,
never overtaken between two polls. flock is POSIX only; fcntl is imported where it is used, so that
reading a knowledge base works everywhere.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from .._errors import RetrievalError

LOCK, QUEUE = ".lock", ".lock-queue"
_held = threading.local()  # folders whose lock this thread holds, so a save inside a held lock goes on


@contextmanager
def writer_lock(directory: Path, wait_s: float = 0.0, on_wait: Callable[[], None] | None = None,
                opened: Callable[[Path], object] | None = None):
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
            raise RetrievalError(f"another process is writing the knowledge base at {directory}{waited}; "
                                 f"wait for it to finish, then retry")
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _flock(handle, deadline: float, on_wait: Callable[[], None] | None) -> bool | str:
    """Take `handle`'s flock by `deadline` (time.monotonic): True at once, "waited" after waiting
    (`on_wait` called first), False when the deadline passed. The wait is a blocking flock in a
    thread of its own; given up at the deadline, that thread lets the lock go as soon as it gets it."""
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        if time.monotonic() >= deadline:
            return False
    if on_wait is not None:
        on_wait()
    fd = os.dup(handle.fileno())  # the same open file (so the same lock), closed by the thread alone
    got, gate, abandoned = threading.Event(), threading.Lock(), []

    def wait():
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with gate:
                if abandoned:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                else:
                    got.set()
        finally:
            os.close(fd)

    threading.Thread(target=wait, name=f"writer lock {handle.name}", daemon=True).start()
    try:
        got.wait(max(0.0, deadline - time.monotonic()))
    finally:  # the deadline, or an interrupt: the lock is not wanted any more unless it came
        with gate:
            if not got.is_set():
                abandoned.append(True)
    return "waited" if got.is_set() else False
