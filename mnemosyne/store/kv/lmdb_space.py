"""Room on the disk for an LMDB store: telling a full disk apart, and never meeting ``SIGBUS``.

Two ways a full disk used to escape :class:`StorageFull`:

- LMDB writes a commit's pages with ``pwritev``; when the file system fills up
  part way through, the write comes back short and LMDB reports ``EIO`` ("short
  write, filesystem full?" in its source), not ``ENOSPC``. So an ``EIO`` on a
  file system with next to nothing free is taken for what it almost surely is.
- LMDB sizes a new lock file (``lock.mdb``) with ``ftruncate``, which allocates
  nothing, then writes into it through a shared memory map. On a full disk the
  first touch of an unallocated page kills the process with ``SIGBUS``: no
  exception, no message (``mnemo init`` and ``clone`` on a full tmpfs did). So
  the store makes the lock file itself, every block written, before LMDB maps
  it, and a full disk is an ordinary ``ENOSPC``. The data file is safe: LMDB
  (without ``writemap``, which the store never sets) writes it with ``pwrite``
  and maps it read-only.
"""

from __future__ import annotations

import errno
import os
from contextlib import suppress

from mnemosyne.errors import StorageFull

LOCK_FILE = "lock.mdb"
"""LMDB's lock file (its reader table), beside ``data.mdb``."""

NEARLY_FULL = 1 << 20
"""Free bytes below which an ``EIO`` from a write is a full disk: a short write leaves less than a page."""

_READER_BYTES = 64
"""One reader slot of LMDB's lock file (a cache line)."""

_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = tuple(os.strerror(code) for code in _FULL)
_SHORT_WRITE_TEXT = os.strerror(errno.EIO)


def free_bytes(path: str, *, reserve: bool = False) -> int:
    """Bytes free for writing on the file system holding ``path``.

    Args:
        path: a file or directory on the file system.
        reserve: count the blocks the file system keeps for ``root`` (ext4's 5 %)
            when this process is ``root`` and may use them. Without it the figure
            is what any process may write: 0 when ``root`` has filled the reserve
            too, while the free count still holds blocks nobody may write (ext4
            keeps up to 16 MiB for its own metadata).
    """
    stat = os.statvfs(path)
    blocks = stat.f_bfree if reserve and os.geteuid() == 0 else stat.f_bavail
    return blocks * stat.f_frsize


def is_disk_full(exc: BaseException, path: str) -> bool:
    """Whether ``exc`` (an ``lmdb.Error`` or ``OSError`` from writing under ``path``) means the disk is full.

    ``ENOSPC`` and ``EDQUOT`` do; so does ``EIO`` when the file system has less
    than :data:`NEARLY_FULL` free (LMDB's report of a short write). Any other
    ``EIO`` stays what it is: a failing disk must not pass for a full one.
    """
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else getattr(exc, "code", None)
    text = str(exc)
    if code in _FULL or any(reason in text for reason in _FULL_TEXT):
        return True
    if code != errno.EIO and _SHORT_WRITE_TEXT not in text:
        return False
    try:
        return free_bytes(path) < NEARLY_FULL
    except OSError:
        return False


def full_message(path: str, exc: BaseException) -> str:
    """What a write refused by a full disk says: how much is free where, and the system's words."""
    try:
        free = f"{free_bytes(path)} bytes free"
    except OSError:
        free = "free space unknown"
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"the disk holding {path} is full ({free}; {first})"


def check_room(path: str, needed: int, what: str) -> None:
    """Refuse, before writing anything, a job that needs ``needed`` bytes where fewer are free.

    Raises:
        StorageFull: fewer than ``needed`` bytes are free on the file system of ``path``.
    """
    try:
        free = free_bytes(path, reserve=True)  # refuse only what cannot fit
    except OSError:
        return  # no figure to refuse on: the write itself will tell
    if free < needed:
        raise StorageFull(
            f"the disk holding {path} is too full: {what} needs at least {_mib(needed)} free, "
            f"and {_mib(free)} is; nothing was changed"
        )


def make_lock_file(directory: str, readers: int) -> None:
    """Create ``directory``'s LMDB lock file with every block written, unless it exists.

    Sized as LMDB 0.9 sizes it for ``readers`` slots (a header of three cache
    lines, the first slot among them, then the other slots), so LMDB adopts it
    as it is. It is written whole under a name of its own and linked into place,
    so a process opening the store meanwhile meets either no lock file or this
    one complete; where another made one first, theirs stays. An existing lock
    file is left alone: filling its holes in place could race with processes
    using it. Where the directory cannot be written (a read-only store) or takes
    no hard links, nothing is done: LMDB makes the file as before.

    Raises:
        StorageFull: the disk has no room for the lock file.
    """
    path = os.path.join(directory, LOCK_FILE)
    if os.path.exists(path):
        return
    import secrets  # with hmac and OpenSSL's hashes: loaded the rare time a lock file is made

    draft = os.path.join(directory, f".{LOCK_FILE}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        # 0o644: what LMDB creates it with (py-lmdb's mode 0o755, less the execute bits).
        handle = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in _FULL:
            raise StorageFull(f"{full_message(directory, exc)}; LMDB's lock file cannot be made") from None
        return  # unwritable: LMDB reads without its lock, or says why it cannot open
    try:
        try:
            zeros = memoryview(bytes((readers + 2) * _READER_BYTES))
            while zeros:
                zeros = zeros[os.write(handle, zeros) :]
        finally:
            os.close(handle)
        with suppress(FileExistsError):  # another process made it meanwhile: LMDB uses theirs
            os.link(draft, path)
    except OSError as exc:
        if exc.errno in _FULL:
            raise StorageFull(f"{full_message(directory, exc)}; LMDB's lock file cannot be made") from None
    finally:
        with suppress(OSError):
            os.remove(draft)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"
