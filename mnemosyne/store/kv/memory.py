"""An in-memory backend with the same snapshot semantics as LMDB, for fast tests."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from mnemosyne.errors import InvalidInput, MnemoError
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, prefix_end

T = TypeVar("T")


class _Table:
    """One keyspace: a dict plus a lazily sorted key list."""

    __slots__ = ("_sorted", "data")

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data: dict[bytes, bytes] = dict(data or {})
        self._sorted: list[bytes] | None = None

    def copy(self) -> _Table:
        return _Table(self.data)

    def keys(self) -> list[bytes]:
        if self._sorted is None:
            self._sorted = sorted(self.data)
        return self._sorted

    def changed(self) -> None:
        self._sorted = None


class _Txn:
    remote = False

    def __init__(self, tables: dict[Space, _Table], writable: bool) -> None:
        self.tables = tables
        self._writable = writable
        self._copied: set[Space] = set()
        self.closed = False

    def _table(self, space: Space) -> _Table:
        if self.closed:
            raise MnemoError("transaction is closed")
        return self.tables[space]

    def get(self, space: Space, key: bytes) -> bytes | None:
        return self._table(space).data.get(key)

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        data = self._table(space).data
        return [data.get(key) for key in keys]

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        self._table(space)  # nothing to fetch ahead in memory; a closed transaction still refuses

    def let_go(self) -> None:
        pass  # nothing is mapped

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        table = self._table(space)
        keys = table.keys()
        data = table.data
        if not reverse:
            seek = max(prefix, start) if start is not None else prefix
            i = bisect.bisect_left(keys, seek)
            while i < len(keys):
                key = keys[i]
                if not key.startswith(prefix):
                    return
                yield key, data[key]
                i += 1
        else:
            if start is not None:
                i = bisect.bisect_right(keys, start) - 1
            else:
                end = prefix_end(prefix)
                i = (bisect.bisect_left(keys, end) if end is not None else len(keys)) - 1
            while i >= 0:
                key = keys[i]
                if key < prefix:
                    return
                if key.startswith(prefix):
                    yield key, data[key]
                i -= 1

    def _writable_table(self, space: Space) -> _Table:
        if not self._writable:
            raise InvalidInput("the store is open read-only")
        if space not in self._copied:
            self.tables[space] = self._table(space).copy()
            self._copied.add(space)
        table = self.tables[space]
        return table

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        table = self._writable_table(space)
        if not overwrite and key in table.data:
            return False
        if key not in table.data:
            table.changed()
        table.data[key] = bytes(value)
        return True

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        return sum(self.put(space, key, value, overwrite) for key, value in items)

    def put_absent(self, space: Space, items: list[tuple[bytes, bytes]]) -> None:
        self.put_many(space, items, overwrite=False)

    def delete(self, space: Space, key: bytes) -> bool:
        table = self._writable_table(space)
        if key not in table.data:
            return False
        del table.data[key]
        table.changed()
        return True

    def discard(self, space: Space, key: bytes) -> None:
        self.delete(space, key)


class MemoryKV:
    """Keyspaces held in process memory. Nothing survives ``close``."""

    remote = False

    def __init__(self, readonly: bool = False) -> None:
        self.readonly = readonly
        self._tables: dict[Space, _Table] = {space: _Table() for space in Space}
        self._write_lock = threading.Lock()
        self._closed = False

    @contextmanager
    def read(self) -> Iterator[_Txn]:
        """Open a snapshot read transaction."""
        self._check_open()
        # The dict of tables is replaced whole on commit, so this is a snapshot.
        txn = _Txn(dict(self._tables), writable=False)
        try:
            yield txn
        finally:
            txn.closed = True

    def view(
        self,
        fn: Callable[[ReadTxn], T],
        kind: Hashable = None,
        scans: list[tuple[Space, bytes, bytes | None, bool]] | None = None,
    ) -> T:
        """Run ``fn`` on a snapshot read transaction."""
        with self.read() as txn:
            return fn(txn)

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in the write transaction; its changes appear all at once."""
        self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        with self._write_lock:
            txn = _Txn(dict(self._tables), writable=True)
            try:
                result = fn(txn)
            finally:
                txn.closed = True
            self._tables = txn.tables
            return result

    def close(self) -> None:
        """Drop the data."""
        self._closed = True

    def compact(self) -> tuple[int, int]:
        """Nothing to rewrite: deleted records leave memory with their last reference."""
        self.check_compact()
        return 0, 0

    def check_compact(self) -> None:
        """Refuse a read-only store (see :meth:`KV.check_compact`)."""
        self._check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")

    def _check_open(self) -> None:
        if self._closed:
            raise MnemoError("the store is closed")
