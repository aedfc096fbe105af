"""The store lock: how compaction tells that no other process has the store open.

Every process that opens a store keeps a shared lock on ``<store>/mnemo.lock``
for as long as it has it open; compaction, which replaces the data file, upgrades
its own to exclusive without waiting and refuses when it cannot.

The lock is an open-file-description lock (Linux ``F_OFD_SETLK``), for three
properties the usual kinds lack together:

- a refused upgrade keeps the shared lock (``flock`` drops it first, so a refused
  process would sit unprotected while another compacted the file away);
- closing some other descriptor of the file in the process releases nothing
  (a process-wide POSIX lock goes whenever any descriptor of the file closes,
  say when something copies or reads the store's files);
- a forked child shares it, as it shares the open file.

A ``flock`` is held beside it, as earlier versions did, so that their processes
and these see each other. Where open-file-description locks do not exist, the
``flock`` alone is used.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from typing import IO

from mnemosyne.errors import MnemoError

LOCK_NAME = "mnemo.lock"

_OFD_SET = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_SET_WAIT = getattr(fcntl, "F_OFD_SETLKW", None)
_BUSY = (errno.EACCES, errno.EAGAIN)


def _flock_struct(kind: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len (0: to the end), l_pid (0 for OFD).
    return struct.pack("hhqqi", kind, os.SEEK_SET, 0, 0, 0)


class StoreLock:
    """A process's lock on one store: shared while open, exclusive to compact."""

    def __init__(self, handle: IO[bytes], path: str) -> None:
        self._handle = handle
        self._path = path

    @classmethod
    def acquire(cls, directory: str) -> StoreLock | None:
        """Open ``directory``'s lock file and take the shared lock (waiting for a compaction).

        Returns None where the lock file can neither be opened nor created (a
        read-only location without one): nothing can compact there either.

        Raises:
            MnemoError: the lock cannot be taken (a file system without locks).
        """
        path = os.path.join(directory, LOCK_NAME)
        handle: IO[bytes]
        try:
            handle = open(path, "a+b")  # kept open: the lock lives with it
        except OSError:
            try:
                handle = open(path, "rb")  # a reader's shared lock needs read access only
            except OSError:
                return None
        lock = cls(handle, path)
        try:
            lock.share()
        except OSError as exc:
            handle.close()
            raise MnemoError(
                f"cannot lock {path} ({exc.strerror}); a store needs a file system with locks"
            ) from None
        return lock

    def share(self) -> None:
        """Hold the lock shared (a downgrade after compaction), waiting for an exclusive holder."""
        if _OFD_SET_WAIT is not None:
            fcntl.fcntl(self._handle, _OFD_SET_WAIT, _flock_struct(fcntl.F_RDLCK))
        fcntl.flock(self._handle, fcntl.LOCK_SH)

    def try_exclusive(self) -> bool:
        """Upgrade to exclusive without waiting; False, still shared, when another holds it.

        Raises:
            MnemoError: the lock cannot be upgraded for another reason.
        """
        try:
            if _OFD_SET is not None:
                try:
                    fcntl.fcntl(self._handle, _OFD_SET, _flock_struct(fcntl.F_WRLCK))
                except OSError as exc:
                    if exc.errno in _BUSY:
                        return False  # the shared lock stays: the upgrade is atomic
                    raise
            try:
                fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in _BUSY:
                    raise
                # Only a process of an earlier version (flock alone) gets here: flock's
                # refused upgrade dropped our shared flock, so take it back.
                self.share()
                return False
        except OSError as exc:
            raise MnemoError(f"cannot lock {self._path} exclusively ({exc.strerror})") from None
        return True

    def close(self) -> None:
        """Release the lock (closing its file)."""
        self._handle.close()
