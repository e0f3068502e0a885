"""A streaming read replica of a PostgreSQL server, for the tests and checks that need one: a base
backup with recovery settings (pg_basebackup -R) and a postgres of its own, from the binaries the
pgserver wheel ships, listening on a Unix socket in its own folder only.

    replica = StreamingReplica(primary_url, folder)      # started; replays the primary's WAL
    replica.url("kb")                                    # the replica's URL of a database
    replica.caught_up()                                  # wait until it has replayed all written so far
    replica.stop(); replica.kill()

As root (pgserver runs its server as the system user pgserver then), the replica runs as that user too.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def _binaries() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


class StreamingReplica:
    """A hot standby of the server at `primary_url`, streaming its WAL, with its files under `folder`."""

    def __init__(self, primary_url: str, folder: Path, timeout_s: float = 180.0):
        self.folder, self.data, self.socket = Path(folder), Path(folder) / "data", Path(folder) / "socket"
        self.user = "pgserver" if os.geteuid() == 0 else None
        self.folder.mkdir(parents=True, exist_ok=True)
        self.socket.mkdir()
        if self.user:  # the folders it runs in reachable by that user, as pgserver makes its own
            from pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.folder)
            shutil.chown(self.socket, self.user)
            shutil.chown(self.folder, self.user)
        backup = subprocess.run(  # -c fast: a checkpoint at once, not spread over minutes
            [_binaries() / "pg_basebackup", "-D", self.data, "-R", "-X", "stream", "-c", "fast", "-d", primary_url],
            capture_output=True, text=True, user=self.user)
        if backup.returncode:
            raise RuntimeError(f"pg_basebackup failed: {backup.stderr.strip()}")
        self.process = subprocess.Popen(
            [_binaries() / "postgres", "-D", self.data, "-k", self.socket, "-c", "listen_addresses=",
             "-c", "hot_standby=on"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, user=self.user,
            start_new_session=True)  # its own process group: kill() takes its backends with it
        self.primary_url = primary_url
        try:
            self._wait_ready(timeout_s)
        except BaseException:  # a replica that did not start is not left running
            self.kill()
            raise

    def url(self, database: str | None = None) -> str:
        """The replica's URL: the primary's, by its socket folder, for `database` (default the primary URL's)."""
        parts = urlsplit(self.primary_url)
        query = dict(parse_qsl(parts.query)) | {"host": str(self.socket)}
        path = f"/{database}" if database else parts.path
        return urlunsplit(parts._replace(path=path, query=urlencode(query)))

    def _wait_ready(self, timeout_s: float) -> None:
        """Wait until the replica takes connections and streams the primary's WAL (its WAL receiver
        says 'streaming'): a bound on readiness, generous for a busy machine, not a fixed sleep."""
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=5) as db:
                    if (db.execute("SELECT status FROM pg_stat_wal_receiver").fetchone() or [None])[0] == "streaming":
                        return
            except psycopg.OperationalError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"the replica in {self.data} did not start: postgres exited with "
                                   f"{self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica in {self.data} was not streaming after {timeout_s:g} s")
            time.sleep(0.1)

    def caught_up(self, timeout_s: float = 180.0) -> None:
        """Wait until the replica has replayed everything the primary has written so far."""
        import psycopg

        with psycopg.connect(self.primary_url, autocommit=True) as primary:
            written = (primary.execute("SELECT pg_current_wal_lsn()::text").fetchone() or [None])[0]
        deadline = time.monotonic() + timeout_s
        with psycopg.connect(self.url(), autocommit=True) as db:
            while not (db.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (written,)).fetchone() or [0])[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError("the replica did not catch up with the primary")
                time.sleep(0.05)

    def stop(self) -> None:
        """A fast shutdown (SIGINT), waited for."""
        if self.process.poll() is None:
            self.process.send_signal(2)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:  # not down in a minute: killed, not left behind
                self.kill()

    def kill(self) -> None:
        """The replica and all its processes killed (SIGKILL), as a crashed host would leave it; its
        backends too, should the postmaster have gone before them."""
        try:
            os.killpg(self.process.pid, 9)
        except ProcessLookupError:  # the whole group has gone
            pass
        self.process.wait(60)
