"""The small key-value interface every storage backend implements.

A backend offers named keyspaces, snapshot read transactions and serialised
write transactions with ordered prefix scans. Write transactions are given as
a function so a backend may run it again (LMDB does, after growing its map).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Protocol, TypeVar

T = TypeVar("T")


class Space(StrEnum):
    """The named keyspaces of a store."""

    OBJECTS = "objects"
    REFS = "refs"
    REFLOG = "reflog"
    INDEX = "index"
    META = "meta"
    REDACTIONS = "redactions"
    RECALL = "recall"
    VECTORS = "vectors"
    READS = "reads"


EXPORTED_SPACES = (Space.OBJECTS, Space.REFS, Space.REFLOG, Space.REDACTIONS)
"""The keyspaces an export carries (besides tenant names from ``meta``): the history itself."""

DERIVED_SPACES = (Space.INDEX,)
"""Keyspaces rebuilt from the objects (``reindex``), in a commit's own transaction."""

LAZY_SPACES = (Space.RECALL, Space.VECTORS)
"""Recall indexes: derived too, but caught up lazily at the next search and never exported
(vectors cost model time, and another machine may use another model)."""

LOCAL_SPACES = (Space.READS,)
"""Kept with the store, not carried by exports: the read audit log records what one
store's searches returned, and erasure scrubs it in place."""


class ReadTxn(Protocol):
    """A consistent snapshot of the store."""

    remote: bool
    """Whether each read not served by what the transaction holds waits on a server (PostgreSQL).

    Then reading many keys with one :meth:`get_many` beats reading them one by one,
    and a walk that knows what it will read asks first; where a read is a lookup
    in memory (LMDB's map), such a walk is only a second walk.
    """

    def get(self, space: Space, key: bytes) -> bytes | None:
        """Return the value at ``key``, or None."""
        ...

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        """The value at each of ``keys`` (None where absent), in order: one round trip on PostgreSQL."""
        ...

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for keys starting with ``prefix``, in key order.

        ``start`` (inclusive) is where to begin: the smallest key yielded going
        forward, the largest going in reverse.
        """
        ...

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        """Make the first page of each scan ``(prefix, start, reverse)`` ready at once.

        A hint, for callers that know many scans before running them (the
        change-index entries of many ids): on PostgreSQL the first pages come in
        one round trip and each :meth:`scan` with the same arguments starts from
        its page; elsewhere it does nothing.
        """
        ...

    def let_go(self) -> None:
        """Let the store's pages this process has read leave its memory (a hint).

        For a long pass over much of the store (building an approximate index
        reads every vector block): LMDB maps its file, and every page read stays
        in the process's resident memory until it lets go of the mapping. The
        pages stay in the operating system's cache, and a later read maps them
        again. Elsewhere it does nothing.
        """
        ...


class WriteTxn(ReadTxn, Protocol):
    """A read transaction that may also write; all or nothing."""

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        """Store ``value`` at ``key``; False when ``overwrite`` is off and the key exists."""
        ...

    def delete(self, space: Space, key: bytes) -> bool:
        """Remove ``key``; False when it was absent."""
        ...

    def discard(self, space: Space, key: bytes) -> None:
        """Remove ``key`` if it is there, saying nothing: on PostgreSQL at commit, not in a round trip."""
        ...

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        """Store many items at once (bulk writes); return how many were added."""
        ...

    def put_absent(self, space: Space, items: list[tuple[bytes, bytes]]) -> None:
        """Store the items whose keys are absent and leave the others, without saying which were added.

        For content-addressed values: a key given must be absent or already hold
        the bytes given, so that whether it was there makes no difference. Reads in
        the transaction see the items at once; a backend may send them with the
        commit (PostgreSQL does: no round trip of their own).
        """
        ...


class KV(Protocol):
    """A storage backend."""

    readonly: bool
    remote: bool
    """Whether a read waits on a server (PostgreSQL) rather than looking in a map of this
    process (LMDB, memory): a server answers such reads from a worker thread, never its
    event loop."""

    def read(self) -> AbstractContextManager[ReadTxn]:
        """Open a snapshot read transaction."""
        ...

    def view(
        self,
        fn: Callable[[ReadTxn], T],
        kind: Hashable = None,
        scans: list[tuple[Space, bytes, bytes | None, bool]] | None = None,
    ) -> T:
        """Run ``fn`` on a snapshot read transaction and return what it returns.

        ``fn`` may be run more than once, so it must not have effects outside the
        transaction (PostgreSQL first tries it on a snapshot taken by one statement
        outside any transaction, when the last read of the same ``kind``, such as
        ``fn``'s code, needed nothing more, and runs it again in a transaction when
        it does). ``scans`` (``(keyspace, prefix, start, reverse)``) are scans ``fn``
        will make: PostgreSQL reads their first pages in the round trip that begins
        the read; elsewhere they change nothing.
        """
        ...

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in a write transaction and commit it; abort if it raises.

        ``fn`` may be run more than once, so it must not have effects outside the
        transaction.
        """
        ...

    def close(self) -> None:
        """Release the backend; further use is an error."""
        ...

    def compact(self) -> tuple[int, int]:
        """Rewrite the stored data from live records only; return its size in bytes before and after.

        Raises:
            InvalidInput: the backend is shared with another handle or process, or read-only.
        """
        ...

    def check_compact(self) -> None:
        """Refuse now what :meth:`compact` would refuse, before work that should precede it.

        A check, not a reservation: ``compact`` checks again.

        Raises:
            InvalidInput: the backend is shared with another handle or process, or read-only.
        """
        ...


def prefix_end(prefix: bytes) -> bytes | None:
    """Return the smallest key greater than every key starting with ``prefix``.

    None when there is none (an empty prefix or one of all 0xff bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def last_number(txn: ReadTxn, space: Space, prefix: bytes) -> int:
    """The number (big-endian, after ``prefix``) of the last key under ``prefix``; 0 for none."""
    last = next(iter(txn.scan(space, prefix, reverse=True)), None)
    return int.from_bytes(last[0][len(prefix) :], "big") if last else 0


def entries(txn: ReadTxn, space: Space, prefix: bytes) -> dict[bytes, bytes]:
    """Every key under ``prefix`` with its value, as stored."""
    return dict(txn.scan(space, prefix))


def replace_all(txn: WriteTxn, space: Space, prefix: bytes, items: dict[bytes, bytes]) -> None:
    """Replace every key under ``prefix`` by ``items`` (keys with the prefix): a rebuild."""
    for key in [key for key, _ in txn.scan(space, prefix)]:
        txn.delete(space, key)
    txn.put_many(space, sorted(items.items()))


class AppendLog:
    """Appends entries numbered 1, 2, … (8 bytes, big-endian) under a prefix.

    Where the log ends is read once, at the first append.
    """

    def __init__(self, txn: WriteTxn, space: Space, prefix: bytes) -> None:
        self._txn = txn
        self._space = space
        self._prefix = prefix
        self._seq: int | None = None

    def append(self, entry: bytes) -> None:
        """Write ``entry`` after the last one."""
        if self._seq is None:
            self._seq = last_number(self._txn, self._space, self._prefix)
        self._seq += 1
        self._txn.put(self._space, self._prefix + self._seq.to_bytes(8, "big"), entry)
