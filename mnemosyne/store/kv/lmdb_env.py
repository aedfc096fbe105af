"""One LMDB environment per store directory per process, shared by its handles.

LMDB forbids a second environment on a path in one process, so every
:class:`~mnemosyne.store.kv.lmdb_kv.LmdbKV` on a store shares this one: its
memory map (grown on demand), its named databases, the process's lock on the
store, compaction (which swaps the data file and reopens), and the registry that
a forked child replaces.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from contextlib import suppress
from typing import Any, ClassVar

import lmdb

from mnemosyne.errors import InvalidInput, MnemoError, StorageFull
from mnemosyne.store.kv import lmdb_rewrite, lmdb_seal, lmdb_space
from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.lmdb_gate import Gate
from mnemosyne.store.kv.store_lock import StoreLock

_MAX_DBS = 64
"""Named databases an environment may open: the keyspaces, and room for more."""

_MAX_READERS = 512
"""Read transactions open at once across every process of a store (slots of LMDB's lock file)."""


def is_unwritable(exc: BaseException) -> bool:
    """Whether opening failed for want of write access (permissions, a read-only medium)."""
    text = str(exc)
    return (
        "Permission denied" in text
        or "Read-only file system" in text
        or (isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM))
    )


class SharedEnv:
    """One LMDB environment per store directory per process (LMDB forbids two)."""

    registry: ClassVar[dict[str, SharedEnv]] = {}
    registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, path: str, readonly: bool, map_size: int, max_map_size: int, sync: bool, salvage: bool = False
    ) -> None:
        self.path = path
        self.readonly = readonly
        self.max_map_size = max_map_size
        self.users = 0
        self.gate = Gate()
        # This process's writers queue here, outside the gate, rather than inside it on
        # LMDB's writer lock: so a writer can always get the gate to itself to abort.
        self.writer = threading.RLock()
        self.sync = sync
        self.salvage = salvage
        """Opened to salvage a store refused as damaged (read-only, its seal not checked)."""
        self.pid = os.getpid()
        """The process that opened the environment: LMDB's may not be used in another."""
        self.broken: str | None = None
        """Why the environment is unusable (a failed reopen after compaction), or None."""
        # Every process holding the store open keeps a shared lock, so compaction
        # (which replaces the data file) can tell it is alone.
        self.lock = StoreLock.acquire(path)
        self.locked = True
        """Whether LMDB tracks this process's readers in ``lock.mdb`` (see :meth:`_open_env`)."""
        try:
            self.env = self._open_env(map_size)
        except BaseException:
            if self.lock is not None:
                self.lock.close()
            raise
        self.dbs: dict[Space, Any] = {}
        try:
            if self.locked:
                # Free reader slots left by processes that died mid-read: stale ones would
                # pin old pages (the file grows) and count against max_readers.
                self.env.reader_check()
            self._check_seal(salvage)  # before anything is written: a damaged store stays as it is
            self.map_size: int = self.env.info()["map_size"]
            self._open_dbs()  # writes on a new store: a full disk fails here
        except BaseException:
            self.env.close()
            if self.lock is not None:
                self.lock.close()
            raise

    def _open_env(self, map_size: int) -> lmdb.Environment:
        # Before LMDB maps its lock file: on a full disk, a hole in it is SIGBUS.
        lmdb_space.make_lock_file(self.path, _MAX_READERS)
        try:
            return self._lmdb_open(map_size, self.locked)
        except lmdb.Error as exc:
            if not (self.readonly and self.locked and is_unwritable(exc)):
                raise
        # A read-only handle on a directory or medium it cannot write: LMDB cannot
        # register its readers in lock.mdb, so it reads without that lock. Safe only
        # where nothing writes (a read-only medium, an archived copy): a writer could
        # recycle pages under an unregistered reader; objects would fail their hash
        # check, but refs and index records carry none. So this is a fallback for an
        # unwritable directory, never an option.
        self.locked = False
        return self._lmdb_open(map_size, False)

    def _lmdb_open(self, map_size: int, lock: bool) -> lmdb.Environment:
        return lmdb.open(
            self.path,
            subdir=True,
            create=False,
            readonly=self.readonly,
            map_size=map_size,
            max_dbs=_MAX_DBS,
            max_readers=_MAX_READERS,
            readahead=False,
            sync=self.sync,
            metasync=self.sync,
            lock=lock,
        )

    def _check_seal(self, salvage: bool) -> None:
        """Refuse a store whose latest meta page leads to a tree another transaction wrote.

        With ``salvage``, only one that leads to no keyspaces at all (nothing to read).

        Raises:
            CorruptObject: the two disagree (see :mod:`~mnemosyne.store.kv.lmdb_seal`).
            lmdb.Error: the main database cannot be read.
        """
        for _ in range(3):
            try:
                txn = self.env.begin()
                break
            except lmdb.MapResizedError:  # another process grew the map: adopt its size
                self.env.set_mapsize(0)
        else:
            txn = self.env.begin()
        with txn:
            problem = lmdb_seal.broken_seal(txn)
            if salvage and problem is not None and lmdb_seal.has_keyspaces(txn):
                return
        if problem is not None:
            raise lmdb_seal.suspect(self.path, problem)

    def _open_dbs(self) -> None:
        readonly = self.readonly
        if readonly:
            # Without an explicit txn: py-lmdb ends a read-only txn without publishing the
            # handles opened in it, so they would be invalid ("mdb_get: Invalid argument").
            for space in Space:
                self.dbs[space] = self.env.open_db(space.value.encode(), create=False)
        else:
            with self.env.begin(write=True) as txn:
                created = False
                for space in Space:
                    name = space.value.encode()
                    created = created or txn.get(name) is None
                    self.dbs[space] = self.env.open_db(name, txn=txn, create=True)
                if created:  # a new store, or a keyspace new in this version: a commit of its own
                    lmdb_seal.seal(txn)

    def compact(self) -> tuple[int, int]:
        """Rewrite the data file with live pages only; return sizes before and after.

        Freed pages keep old bytes until reused: this is what makes erased bytes
        leave the disk. Needs the store to itself, in this process and every other.

        Raises:
            InvalidInput: another handle or process has the store open.
            StorageFull: no room for the second copy (the store is unchanged).
        """
        self.check_alone()
        assert self.lock is not None  # check_alone refuses without one
        if not self.lock.try_exclusive():
            raise InvalidInput("compaction needs the store to itself: another process has it open")
        data = os.path.join(self.path, "data.mdb")
        try:
            with self.gate.exclusive():
                return self._compact_alone(data)
        finally:
            self.lock.share()

    def _compact_alone(self, data: str) -> tuple[int, int]:
        """Rewrite and swap the data file; the store is this handle's alone."""
        known = {space.value.encode(): db for space, db in self.dbs.items()}
        try:
            lmdb_rewrite.remove_stale_scratch(self.path)  # left by a compaction that was killed
            before = os.stat(data)
            needed = lmdb_rewrite.least_bytes(self.env, known)
            lmdb_space.check_room(self.path, needed, "compaction (a new copy of the live records)")
            scratch = lmdb_rewrite.scratch_directory(self.path)
        except (lmdb.Error, OSError) as exc:
            raise self._compaction_failed(exc) from None
        closed = False
        try:
            try:
                lmdb_rewrite.rewrite_into(self.env, known, scratch, self.map_size, _MAX_DBS)
                fresh = os.path.join(scratch, "data.mdb")
                lmdb_rewrite.copy_owner_and_mode(before, fresh)
            except (lmdb.Error, OSError) as exc:
                raise self._compaction_failed(exc) from None
            self.env.close()
            closed = True
            try:
                os.replace(fresh, data)
            except OSError as exc:
                raise MnemoError(f"compaction failed, the store is unchanged: {exc}") from None
            try:
                lmdb_rewrite.sync_directory(self.path)
            except OSError as exc:
                raise MnemoError(
                    f"compaction swapped the store file but could not flush its directory ({exc}); "
                    "run 'mnemo fsck'"
                ) from None
            return before.st_size, os.path.getsize(data)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            if closed:  # LMDB forbids a second environment on a path in one process
                self._reopen()

    def _compaction_failed(self, exc: lmdb.Error | OSError) -> MnemoError:
        """The error for a compaction that failed before the swap (its scratch copy is removed)."""
        if lmdb_space.is_disk_full(exc, self.path):
            return StorageFull(
                f"{lmdb_space.full_message(self.path, exc)}: compaction needs room for a second copy "
                "of the live records; the store is unchanged"
            )
        return MnemoError(f"compaction failed, the store is unchanged: {exc}")

    def _reopen(self) -> None:
        try:
            self.env = self._open_env(self.map_size)
            self._open_dbs()
        except (lmdb.Error, OSError, MnemoError) as exc:
            self.broken = f"the store could not be reopened after compaction ({exc}); open it again"
            raise MnemoError(self.broken) from None

    def check_alone(self, probe: bool = False) -> None:
        """Refuse unless no other handle has the store open (with ``probe``, no other process).

        Raises:
            InvalidInput: another handle or process has the store open.
        """
        if self.users > 1:
            raise InvalidInput("compaction needs the store to itself: it is open more than once here")
        if self.lock is None:
            raise InvalidInput("compaction needs the store to itself: its lock file cannot be written")
        if probe:
            if not self.lock.try_exclusive():
                raise InvalidInput("compaction needs the store to itself: another process has it open")
            self.lock.share()

    def close(self) -> None:
        """Close the environment and release the process's lock on the store."""
        if self.pid == os.getpid():  # a forked child leaves the parent's environment alone
            self.env.close()
        if self.lock is not None:
            self.lock.close()

    def grow(self, failed_size: int) -> None:
        """Double the map after a write failed on a map of ``failed_size`` bytes.

        Raises:
            StorageFull: the map is at ``max_map_size`` already.
        """
        with self.gate.exclusive():
            current = self.env.info()["map_size"]
            if current > failed_size:
                return  # another thread grew it already
            if current >= self.max_map_size:
                raise StorageFull(
                    f"the store's map is full at {current} bytes (its limit); nothing was written"
                )
            self.env.set_mapsize(min(current * 2, self.max_map_size))
            self.map_size = self.env.info()["map_size"]

    def adopt_new_size(self) -> None:
        """Take up the map size another process grew the data file to."""
        with self.gate.exclusive():
            self.env.set_mapsize(0)
            self.map_size = self.env.info()["map_size"]


def _forget_parent_stores() -> None:
    # A forked child must open stores afresh (LMDB's environments do not survive a
    # fork); the parent's registry, and a lock another thread may have held, are
    # replaced, not used. An inherited environment is closed in the child when no
    # transaction was open at the fork (closing touches only this process's state
    # then), so the child can open the store again; else the child cannot.
    parents = list(SharedEnv.registry.values())
    SharedEnv.registry = {}
    SharedEnv.registry_lock = threading.Lock()
    for shared in parents:
        if shared.gate.idle_after_fork():
            with suppress(lmdb.Error):
                shared.env.close()
        if shared.lock is not None:
            shared.lock.close()  # the child's copy: the parent keeps its own


os.register_at_fork(after_in_child=_forget_parent_stores)
