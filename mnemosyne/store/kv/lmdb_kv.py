"""The default backend: LMDB through py-lmdb.

One writer at a time (LMDB's own lock serialises writers across processes),
snapshot readers that never block, and a memory map that grows on demand: a
write that fills the map is aborted, the map doubled, and the write run again,
so users never meet ``MapFullError``.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import suppress
from typing import Any, ClassVar, TypeVar, cast

import lmdb

from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, StorageFull
from mnemosyne.store.kv import lmdb_rewrite, lmdb_space
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, prefix_end
from mnemosyne.store.kv.datafile import DATA_FILE, check_data_file
from mnemosyne.store.kv.lmdb_gate import Gate
from mnemosyne.store.kv.store_lock import LOCK_NAME, StoreLock

T = TypeVar("T")

DEFAULT_MAP_SIZE = 1 << 36
"""Initial map size (64 GiB of address space). The file grows only as pages are written.

Large, because a transaction that outgrows the map is thrown away and run again
after the map doubles: a rebuild or a collection that writes gigabytes in one
transaction (``reindex_recall`` of a million memories grows the file fivefold)
would otherwise run two or three times over."""

DEFAULT_MAX_MAP_SIZE = 1 << 44
"""The map doubles on demand up to this size, then writes fail with StorageFull."""


def _is_unwritable(exc: BaseException) -> bool:
    """Whether opening failed for want of write access (permissions, a read-only medium)."""
    text = str(exc)
    return (
        "Permission denied" in text
        or "Read-only file system" in text
        or (isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM))
    )


_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.BadTxnError,
    lmdb.PanicError,
    lmdb.InvalidError,
    lmdb.BadDbiError,
    lmdb.BadRslotError,
)
"""What LMDB raises when its file is damaged (or a transaction broke on damage)."""


def damaged(path: str, exc: BaseException) -> CorruptObject:
    """The error for damage below the objects: the store file itself, with what to do about it."""
    return CorruptObject(
        f"the store file {os.path.join(path, 'data.mdb')} is damaged ({type(exc).__name__}: "
        f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); export what still reads "
        "('mnemo export'), or restore from a backup"
    )


def discard_new_store(path: str | os.PathLike[str], *, directory: bool) -> None:
    """Remove what a store creation that failed (a full disk) made at ``path``.

    Its files go (the data file, LMDB's lock file, the store lock), and the
    directory too when ``directory`` (the creation made it) and nothing else is
    in it; so a new ``init`` there finds nothing half-made.
    """
    for name in (DATA_FILE, lmdb_space.LOCK_FILE, LOCK_NAME):
        with suppress(FileNotFoundError):
            os.remove(os.path.join(path, name))
    if directory:
        with suppress(OSError):  # not empty: something else is there, kept
            os.rmdir(path)


class _Reading:
    """One snapshot read: a shared slot and a read transaction, closed together.

    A class rather than a generator: every read of the store passes through here.
    """

    __slots__ = ("_kv", "_shared", "_txn")

    def __init__(self, kv: LmdbKV, shared: _Shared) -> None:
        self._kv = kv
        self._shared = shared
        self._txn: lmdb.Transaction | None = None

    def __enter__(self) -> _Txn:
        shared = self._shared
        shared.gate.enter()
        try:
            self._txn = self._kv.begin_read(shared)
        except BaseException:
            shared.gate.leave()
            raise
        return _Txn(self._txn, shared.dbs, shared.path)

    def __exit__(self, *exc: object) -> None:
        try:
            if self._txn is not None:
                self._txn.abort()
        finally:
            self._shared.gate.leave()


class _Txn:
    __slots__ = ("_dbs", "_get", "_path", "_txn")

    remote = False  # a read is a lookup in the map

    def __init__(self, txn: lmdb.Transaction, dbs: dict[Space, Any], path: str) -> None:
        self._txn = txn
        self._dbs = dbs
        self._path = path
        # Typed once here (the environment is opened without buffers: reads give bytes),
        # not by a typing.cast call on every read.
        self._get = cast("Callable[..., bytes | None]", txn.get)

    def get(self, space: Space, key: bytes) -> bytes | None:
        try:
            return self._get(key, db=self._dbs[space])
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(space, key) for key in keys]

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        pass  # a scan costs no round trip here

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        try:
            cursor = self._txn.cursor(db=self._dbs[space])
            if reverse:
                yield from self._scan_reverse(cursor, prefix, start)
                return
            # Forward, in this one generator: fsck and rebuilds read every key this way.
            if not cursor.set_range(max(prefix, start) if start is not None else prefix):
                return
            for item in cast("Iterator[tuple[bytes, bytes]]", cursor.iternext()):
                if not item[0].startswith(prefix):
                    return
                yield item
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None

    @staticmethod
    def _scan_reverse(cursor: Any, prefix: bytes, start: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        # Place the cursor on the last key at or below the bound.
        if start is not None:
            if cursor.set_range(start):
                positioned = cursor.key() == start or cursor.prev()
            else:
                positioned = cursor.last()
        else:
            end = prefix_end(prefix)
            positioned = (cursor.prev() if cursor.set_range(end) else cursor.last()) if end else cursor.last()
        if not positioned:
            return
        for item in cast("Iterator[tuple[bytes, bytes]]", cursor.iterprev()):
            key = item[0]
            if not key.startswith(prefix):
                if key < prefix:
                    return
                continue  # above the prefix range: only when start lies beyond it
            yield item

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        try:
            done: bool = self._txn.put(key, value, db=self._dbs[space], overwrite=overwrite)
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None
        return done

    def delete(self, space: Space, key: bytes) -> bool:
        try:
            done: bool = self._txn.delete(key, db=self._dbs[space])
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None
        return done

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        # One C loop instead of a Python call per key: bulk commits write 3 keys a node.
        try:
            _, added = self._txn.cursor(db=self._dbs[space]).putmulti(items, overwrite=overwrite)
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None
        return int(added)

    def put_absent(self, space: Space, items: list[tuple[bytes, bytes]]) -> None:
        if len(items) == 1:
            self.put(space, items[0][0], items[0][1], overwrite=False)  # no cursor for one key
        else:
            self.put_many(space, items, overwrite=False)


class _Shared:
    """One LMDB environment per store directory per process (LMDB forbids two)."""

    registry: ClassVar[dict[str, _Shared]] = {}
    registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str, readonly: bool, map_size: int, max_map_size: int, sync: bool) -> None:
        self.path = path
        self.readonly = readonly
        self.max_map_size = max_map_size
        self.users = 0
        self.gate = Gate()
        # This process's writers queue here, outside the gate, rather than inside it on
        # LMDB's writer lock: so a writer can always get the gate to itself to abort.
        self.writer = threading.RLock()
        self.sync = sync
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
            if not (self.readonly and self.locked and _is_unwritable(exc)):
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

    def _open_dbs(self) -> None:
        readonly = self.readonly
        if readonly:
            # Without an explicit txn: py-lmdb ends a read-only txn without publishing the
            # handles opened in it, so they would be invalid ("mdb_get: Invalid argument").
            for space in Space:
                self.dbs[space] = self.env.open_db(space.value.encode(), create=False)
        else:
            with self.env.begin(write=True) as txn:
                for space in Space:
                    self.dbs[space] = self.env.open_db(space.value.encode(), txn=txn, create=True)

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
        with self.gate.exclusive():
            self.env.set_mapsize(0)
            self.map_size = self.env.info()["map_size"]


def _forget_parent_stores() -> None:
    # A forked child must open stores afresh (LMDB's environments do not survive a
    # fork); the parent's registry, and a lock another thread may have held, are
    # replaced, not used. An inherited environment is closed in the child when no
    # transaction was open at the fork (closing touches only this process's state
    # then), so the child can open the store again; else the child cannot.
    parents = list(_Shared.registry.values())
    _Shared.registry = {}
    _Shared.registry_lock = threading.Lock()
    for shared in parents:
        if shared.gate.idle_after_fork():
            with suppress(lmdb.Error):
                shared.env.close()
        if shared.lock is not None:
            shared.lock.close()  # the child's copy: the parent keeps its own


os.register_at_fork(after_in_child=_forget_parent_stores)


_MAX_DBS = 64
"""Named databases an environment may open: the keyspaces, and room for more."""

_MAX_READERS = 512
"""Read transactions open at once across every process of a store (slots of LMDB's lock file)."""


class LmdbKV:
    """Keyspaces in one LMDB environment: the store directory's ``data.mdb``.

    With ``sync`` off, commits are not flushed to disk before returning (faster
    bulk loads; a crash may lose the latest commits but never corrupts the store).
    The first handle opened on a path in a process sets its options.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
    ) -> None:
        real = os.path.realpath(os.fspath(path))
        if create:
            os.makedirs(real, exist_ok=True)
        self.readonly = readonly
        self._closed = False
        with _Shared.registry_lock:
            shared = _Shared.registry.get(real)
            if shared is not None and shared.readonly and not readonly:
                raise InvalidInput(f"{real} is open read-only in this process; close it first")
            if shared is None:
                if not create:
                    check_data_file(real)  # a truncated file would crash the process on open
                try:
                    shared = _Shared(real, readonly, min(map_size, max_map_size), max_map_size, sync)
                except (*_DAMAGE, lmdb.VersionMismatchError) as exc:
                    raise damaged(real, exc) from None
                except lmdb.Error as exc:
                    if not readonly and lmdb_space.is_disk_full(exc, real):
                        raise StorageFull(
                            f"{lmdb_space.full_message(real, exc)}; cannot open the store for writing"
                        ) from None
                    if not readonly and _is_unwritable(exc):
                        raise InvalidInput(
                            f"cannot open the store at {real} for writing ({str(exc).splitlines()[0]}); "
                            "open it read-only to inspect it"
                        ) from None
                    raise MnemoError(f"cannot open store at {real}: {exc}") from None
                _Shared.registry[real] = shared
            shared.users += 1
        self._shared = shared

    @property
    def env(self) -> lmdb.Environment:
        """The LMDB environment (for benchmarks and maintenance)."""
        return self._shared.env

    def read(self) -> _Reading:
        """Open a snapshot read transaction (a context manager giving the transaction)."""
        return _Reading(self, self._check_open())

    def view(
        self,
        fn: Callable[[ReadTxn], T],
        kind: Hashable = None,
        scans: list[tuple[Space, bytes, bytes | None, bool]] | None = None,
    ) -> T:
        """Run ``fn`` on a snapshot read transaction (once: a read costs nothing to begin here)."""
        with self.read() as txn:
            return fn(txn)

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in a write transaction, growing the map and re-running it when full."""
        shared = self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with shared.writer:
            return self._transact(shared, fn)

    def _transact(self, shared: _Shared, fn: Callable[[WriteTxn], T]) -> T:
        while True:
            size = 0
            failed: lmdb.Transaction | None = None
            try:
                try:
                    with shared.gate.shared():
                        size = shared.map_size
                        txn = self._begin(shared, write=True)
                        try:
                            result = fn(_Txn(txn, shared.dbs, shared.path))
                            txn.commit()
                        except BaseException:
                            failed = txn
                            raise
                        return result
                finally:
                    if failed is not None:
                        # py-lmdb (3.x) makes a write abort wait until no other thread of the
                        # process is inside an LMDB call; busy readers could postpone that
                        # forever. Hold new readers back while the current ones finish.
                        with shared.gate.exclusive():
                            failed.abort()
            except lmdb.MapFullError:
                shared.grow(size)
            except _DAMAGE as exc:
                raise damaged(shared.path, exc) from None
            except (lmdb.Error, OSError) as exc:
                if lmdb_space.is_disk_full(exc, shared.path):
                    message = lmdb_space.full_message(shared.path, exc)
                    raise StorageFull(f"{message}; nothing was written") from None
                if isinstance(exc, OSError):
                    raise
                raise MnemoError(f"storage error: {exc}") from None

    def begin_read(self, shared: _Shared) -> lmdb.Transaction:
        """A read transaction on ``shared`` (the caller holds a slot of its gate)."""
        return self._begin(shared, write=False)

    def _begin(self, shared: _Shared, write: bool) -> lmdb.Transaction:
        try:
            return self._begin_retrying(shared, write)
        except _DAMAGE as exc:
            raise damaged(shared.path, exc) from None
        except lmdb.ReadersFullError:
            raise MnemoError(
                f"too many readers of {shared.path} at once ({shared.env.max_readers()}); "
                "close idle handles or processes and try again"
            ) from None
        except lmdb.Error as exc:
            if write:
                raise  # _transact maps it (a full map grows and runs again)
            raise MnemoError(f"storage error: {exc}") from None

    def _begin_retrying(self, shared: _Shared, write: bool) -> lmdb.Transaction:
        for _ in range(3):
            try:
                return shared.env.begin(write=write)
            except lmdb.MapResizedError:
                # Another process grew the map; adopt its size outside our slot.
                pass
            with shared.gate.released():
                shared.adopt_new_size()
        return shared.env.begin(write=write)

    def close(self) -> None:
        """Release this handle; the environment closes with its last handle."""
        if self._closed:
            return
        self._closed = True
        shared = self._shared
        with _Shared.registry_lock:
            shared.users -= 1
            if shared.users == 0:
                _Shared.registry.pop(shared.path, None)
                shared.close()

    def compact(self) -> tuple[int, int]:
        """Rewrite the store file without free pages (see ``_Shared.compact``)."""
        shared = self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with _Shared.registry_lock, shared.writer:
            return shared.compact()

    def check_compact(self) -> None:
        """Refuse now what :meth:`compact` would refuse (see ``KV.check_compact``)."""
        shared = self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with _Shared.registry_lock:
            shared.check_alone(probe=True)

    def _check_open(self) -> _Shared:
        if self._closed:
            raise MnemoError("the store is closed")
        shared = self._shared
        if shared.pid != os.getpid():
            raise MnemoError("this handle was opened before a fork: open the store again in this process")
        if shared.broken is not None:
            raise MnemoError(shared.broken)
        return shared
