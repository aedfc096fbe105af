"""Where the tests' temporary files go: a roomy RAM-backed tmpfs when the machine has one.

Stores, PostgreSQL's data directory and every ``mnemo`` process the tests start write
under the temporary directory, and the library syncs each commit (``fsync`` on LMDB,
``fsync=on`` on the server) as in production. On a disk that is a few milliseconds
a sync, thousands of times a run: on ``/dev/shm`` the same calls run and return at
once (test files heavy in commits ran about 30% faster). No test checks survival of
a power cut (a killed process is survived through the page cache, on any file
system), so what the tests assert holds on either medium, but for the few that need
each sync to wait for a real medium (the event loop beating while commits wait for
the disk): those take the ``disk_tmp_path`` fixture instead of ``tmp_path``, a
directory where the temporary files would have gone otherwise.

A ``TMPDIR`` set in the environment is kept (``TMPDIR=/tmp make unit`` runs on disk),
and so is the default when ``/dev/shm`` is missing, not a tmpfs, not writable or
short of :data:`MIN_FREE` (a container's default 64 MB, say).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")
"""The usual tmpfs of a Linux machine."""

MIN_FREE = 2 * 2**30
"""Free bytes ``/dev/shm`` needs to take the suite's files (a run peaks far below)."""

DISK_ENV = "MNEMO_TESTS_DISK_TMPDIR"
"""Where the temporary files would have gone: set with ``TMPDIR``, for xdist's workers too."""


def _is_tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[1:3] == [str(path), "tmpfs"] for line in mounts if len(line.split()) > 2)


def ram_tmpdir() -> Path | None:
    """``/dev/shm`` when the tests should put their temporary files there, else ``None``."""
    if os.environ.get("TMPDIR"):
        return None
    if not (SHM.is_dir() and _is_tmpfs(SHM) and os.access(SHM, os.W_OK | os.X_OK)):
        return None
    stats = os.statvfs(SHM)
    return SHM if stats.f_bavail * stats.f_frsize >= MIN_FREE else None


def use_ram() -> None:
    """Send this run's temporary files to :func:`ram_tmpdir`, if any, before any is made.

    The environment carries it to xdist's workers and every process a test starts.
    """
    ram = ram_tmpdir()
    if ram is not None:
        os.environ[DISK_ENV] = tempfile.gettempdir()
        os.environ["TMPDIR"] = tempfile.tempdir = str(ram)


def disk_tmpdir() -> Path:
    """The temporary directory the run would have used without :func:`use_ram`."""
    return Path(os.environ.get(DISK_ENV) or tempfile.gettempdir())
