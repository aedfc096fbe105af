"""The default backend: LMDB through py-lmdb.

One writer at a time (LMDB's own lock serialises writers across processes),
snapshot readers that never block, and a memory map that grows on demand: a
write that fills the map is aborted, the map doubled, and the write run again,
so users never meet ``MapFullError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import suppress
from typing import Any, TypeVar, cast

import lmdb

from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, StorageFull
from mnemosyne.store.kv import lmdb_seal, lmdb_space, mapped_pages
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, prefix_end
from mnemosyne.store.kv.datafile import DATA_FILE, check_data_file
from mnemosyne.store.kv.lmdb_env import SharedEnv, is_unwritable
from mnemosyne.store.kv.store_lock import LOCK_NAME

T = TypeVar("T")

DEFAULT_MAP_SIZE = 1 << 36
"""Initial map size (64 GiB of address space). The file grows only as pages are written.

Large, because a transaction that outgrows the map is thrown away and run again
after the map doubles: a rebuild or a collection that writes gigabytes in one
transaction (``reindex_recall`` of a million memories grows the file fivefold)
would otherwise run two or three times over."""

DEFAULT_MAX_MAP_SIZE = 1 << 44
"""The map doubles on demand up to this size, then writes fail with StorageFull."""


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

    def __init__(self, kv: LmdbKV, shared: SharedEnv) -> None:
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
    __slots__ = ("_dbs", "_get", "_path", "_txn", "wrote")

    remote = False  # a read is a lookup in the map

    def __init__(self, txn: lmdb.Transaction, dbs: dict[Space, Any], path: str) -> None:
        self._txn = txn
        self._dbs = dbs
        self._path = path
        # Typed once here (the environment is opened without buffers: reads give bytes),
        # not by a typing.cast call on every read.
        self._get = cast("Callable[..., bytes | None]", txn.get)
        self.wrote = False
        """Whether a write was asked for: then the transaction is sealed before it commits."""

    def get(self, space: Space, key: bytes) -> bytes | None:
        try:
            return self._get(key, db=self._dbs[space])
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(space, key) for key in keys]

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        pass  # a scan costs no round trip here

    def let_go(self) -> None:
        mapped_pages.let_go(os.path.join(self._path, DATA_FILE))

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
        self.wrote = True
        try:
            done: bool = self._txn.put(key, value, db=self._dbs[space], overwrite=overwrite)
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None
        return done

    def delete(self, space: Space, key: bytes) -> bool:
        self.wrote = True
        try:
            done: bool = self._txn.delete(key, db=self._dbs[space])
        except _DAMAGE as exc:
            raise damaged(self._path, exc) from None
        return done

    def discard(self, space: Space, key: bytes) -> None:
        self.delete(space, key)

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        # One C loop instead of a Python call per key: bulk commits write 3 keys a node.
        self.wrote = True
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


class LmdbKV:
    """Keyspaces in one LMDB environment: the store directory's ``data.mdb``.

    With ``sync`` off, commits are not flushed to disk before returning (faster
    bulk loads; a crash may lose the latest commits but never corrupts the store).
    The first handle opened on a path in a process sets its options.
    """

    remote = False  # a read is a lookup in the map

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        salvage: bool = False,
    ) -> None:
        real = os.path.realpath(os.fspath(path))
        if salvage and not readonly:
            raise InvalidInput("a store is opened to salvage it read-only")
        if create:
            os.makedirs(real, exist_ok=True)
        self.readonly = readonly
        self._closed = False
        with SharedEnv.registry_lock:
            shared = SharedEnv.registry.get(real)
            if shared is not None and shared.readonly and not readonly:
                raise InvalidInput(f"{real} is open read-only in this process; close it first")
            if shared is None:
                if not create:
                    check_data_file(real, salvage=salvage)  # a truncated file would crash the process
                try:
                    size = min(map_size, max_map_size)
                    shared = SharedEnv(real, readonly, size, max_map_size, sync, salvage)
                except (*_DAMAGE, lmdb.VersionMismatchError) as exc:
                    raise damaged(real, exc) from None
                except lmdb.Error as exc:
                    if not readonly and lmdb_space.is_disk_full(exc, real):
                        raise StorageFull(
                            f"{lmdb_space.full_message(real, exc)}; cannot open the store for writing"
                        ) from None
                    if not readonly and is_unwritable(exc):
                        raise InvalidInput(
                            f"cannot open the store at {real} for writing ({str(exc).splitlines()[0]}); "
                            "open it read-only to inspect it"
                        ) from None
                    raise MnemoError(f"cannot open store at {real}: {exc}") from None
                SharedEnv.registry[real] = shared
            shared.users += 1
        self._shared = shared

    @property
    def path(self) -> str:
        """The store directory (its real path)."""
        return self._shared.path

    def reopen_in_child(self) -> None:
        """Open the store afresh, read-only, in a forked child (the parent's environment is not usable).

        Raises:
            CorruptObject: the store file is damaged.
            MnemoError: it cannot be opened.
        """
        old = self._shared
        self._closed = True  # until the new environment is there
        try:
            shared = SharedEnv(old.path, True, old.map_size, old.max_map_size, old.sync, old.salvage)
        except (*_DAMAGE, lmdb.VersionMismatchError) as exc:
            raise damaged(old.path, exc) from None
        except lmdb.Error as exc:
            raise MnemoError(f"cannot open store at {old.path}: {exc}") from None
        with SharedEnv.registry_lock:
            SharedEnv.registry[old.path] = shared
            shared.users = 1
        self._shared = shared
        self.readonly = True
        self._closed = False

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

    def _transact(self, shared: SharedEnv, fn: Callable[[WriteTxn], T]) -> T:
        while True:
            size = 0
            failed: lmdb.Transaction | None = None
            try:
                try:
                    # enter/leave rather than ``with gate.shared()``: no generator per commit.
                    gate = shared.gate
                    gate.enter()
                    try:
                        size = shared.map_size
                        txn = self._begin(shared, write=True)
                        try:
                            wrapped = _Txn(txn, shared.dbs, shared.path)
                            result = fn(wrapped)
                            if wrapped.wrote:  # a transaction that writes nothing commits nothing
                                lmdb_seal.seal(txn)
                            txn.commit()
                        except BaseException:
                            failed = txn
                            raise
                        return result
                    finally:
                        gate.leave()
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

    def begin_read(self, shared: SharedEnv) -> lmdb.Transaction:
        """A read transaction on ``shared`` (the caller holds a slot of its gate)."""
        return self._begin(shared, write=False)

    def _begin(self, shared: SharedEnv, write: bool) -> lmdb.Transaction:
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

    def _begin_retrying(self, shared: SharedEnv, write: bool) -> lmdb.Transaction:
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
        with SharedEnv.registry_lock:
            shared.users -= 1
            if shared.users == 0:
                SharedEnv.registry.pop(shared.path, None)
                shared.close()

    def compact(self) -> tuple[int, int]:
        """Rewrite the store file without free pages (see ``SharedEnv.compact``)."""
        shared = self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with SharedEnv.registry_lock, shared.writer:
            return shared.compact()

    def check_compact(self) -> None:
        """Refuse now what :meth:`compact` would refuse (see ``KV.check_compact``)."""
        shared = self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with SharedEnv.registry_lock:
            shared.check_alone(probe=True)

    def _check_open(self) -> SharedEnv:
        if self._closed:
            raise MnemoError("the store is closed")
        shared = self._shared
        if shared.pid != os.getpid():
            raise MnemoError("this handle was opened before a fork: open the store again in this process")
        if shared.broken is not None:
            raise MnemoError(shared.broken)
        return shared
