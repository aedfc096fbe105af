"""A throwaway PostgreSQL server for the tests: started once per session, removed at the end.

The server runs from Debian's ``postgresql-15`` binaries (installed when missing)
with a data directory and a unix socket in a temporary directory, no TCP
listener, and ``fsync`` on as in production. As root, every server command runs
as the ``postgres`` user (the server refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

PACKAGE = "postgresql-15"
BIN_GLOB = "/usr/lib/postgresql/*/bin"


class ServerUnavailable(RuntimeError):
    """The server could not be installed or started."""


def _bin_dir(install: bool) -> Path:
    found = sorted(glob.glob(f"{BIN_GLOB}/initdb"))
    if found:
        return Path(found[-1]).parent
    if not install or os.geteuid() != 0:
        raise ServerUnavailable(f"no server binaries under {BIN_GLOB} ({PACKAGE} is not installed)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", PACKAGE],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise ServerUnavailable(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}")
    return _bin_dir(install=False)


class PgServer:
    """One running server: ``url(schema)`` names a store in its ``postgres`` database."""

    def __init__(self, install: bool = True) -> None:
        self.bin = _bin_dir(install)
        self.root = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
        self.data = self.root / "data"
        self.socket = self.root / "sock"
        self.log = self.root / "server.log"
        self.socket.mkdir()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.socket, "postgres", "postgres")
        self.user = "postgres" if self.as_root else os.environ.get("USER", "postgres")
        self._names = itertools.count()
        self.running = False
        self.options = ""

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)

    def start(self) -> PgServer:
        """Create the cluster and start the server (about a second).

        Raises:
            ServerUnavailable: initdb or the server failed.
        """
        done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user, "-N", "-E", "UTF8")
        if done.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {done.stderr.strip()[-500:]}")
        options = " ".join(
            [
                "-c listen_addresses=''",
                f"-c unix_socket_directories={self.socket}",
                "-c fsync=on",
                # Old WAL segments are removed, not renamed for reuse, so a checkpoint
                # after compaction leaves no erased bytes in pg_wal (see the forget tests).
                "-c wal_recycle=off",
                "-c max_connections=200",
                "-c shared_buffers=32MB",
            ]
        )
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start"
        )
        self.options = options
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise ServerUnavailable(f"the server did not start: {done.stderr.strip()} {log[-500:]}")
        self.running = True
        return self

    def halt(self) -> None:
        """Stop the server at once, keeping its files (:meth:`resume` starts it again)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def resume(self) -> None:
        """Start a server :meth:`halt` stopped, with the options it had."""
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", self.options, "start"
        )
        if done.returncode != 0:
            raise ServerUnavailable(f"the server did not start again: {done.stderr.strip()}")

    def stop(self) -> None:
        """Stop the server (at once) and remove its files."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self.running = False
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def base_url(self) -> str:
        """The server's ``postgres`` database, over its unix socket."""
        return f"postgresql:///postgres?host={self.socket}&user={self.user}"

    def url(self, schema: str | None = None) -> str:
        """A store URL: ``schema`` (default: a fresh name) in the ``postgres`` database."""
        name = schema or f"t{os.getpid()}_{next(self._names)}"
        return f"{self.base_url}&schema={name}"

    def sql(self, statement: str) -> None:
        """Run one statement as the superuser (autocommit)."""
        import psycopg

        with psycopg.connect(f"host={self.socket} user={self.user} dbname=postgres", autocommit=True) as conn:
            conn.execute(statement)

    def drop_schema(self, url: str) -> None:
        """Drop the store a URL from :meth:`url` names (its schema), if it exists."""
        name = url.rsplit("schema=", 1)[1]
        with contextlib.suppress(Exception):
            self.sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def files(self) -> list[Path]:
        """Every file under the data directory."""
        return [Path(folder) / name for folder, _, names in os.walk(self.data) for name in names]

    def files_holding(self, needle: bytes) -> list[str]:
        """Files under the data directory holding ``needle``, once what the server holds is on disk.

        Two checkpoints around a WAL switch: table files are written out, and WAL
        segments from before the first are removed (``wal_recycle=off``).
        """
        for statement in ("CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT", "SELECT pg_switch_wal()"):
            self.sql(statement)
        self.sql("CHECKPOINT")
        found = []
        for file in self.files():
            with contextlib.suppress(OSError):  # files the server removed meanwhile
                if needle in file.read_bytes():
                    found.append(str(file.relative_to(self.data)))
        return found

    def wait_ready(self, seconds: float = 10) -> None:
        """Wait until the server takes connections."""
        deadline = time.monotonic() + seconds
        while True:
            done = self._run("pg_isready", "-h", str(self.socket))
            if done.returncode == 0 or time.monotonic() > deadline:
                return
            time.sleep(0.05)
