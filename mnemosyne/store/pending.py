"""When garbage collection first found each unreachable object: the grace period's clock.

Kept in the ``meta`` keyspace under ``gc-pending/`` · scope · object id → the
time in microseconds (8 bytes). Owned here; gc and tenant deletion go through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from mnemosyne.model.times import from_micros, micros
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

PREFIX = b"gc-pending/"


class PendingMarks:
    """One tenant's marks of unreachable objects waiting out their grace period."""

    def __init__(self, scope: bytes) -> None:
        self.prefix = PREFIX + scope

    def first_seen(self, txn: ReadTxn, oid: bytes) -> datetime | None:
        """When a collection first found ``oid`` unreachable, or None."""
        found = txn.get(Space.META, self.prefix + oid)
        return from_micros(int.from_bytes(found, "big")) if found is not None else None

    def first_seen_many(self, txn: ReadTxn, oids: list[bytes]) -> list[datetime | None]:
        """:meth:`first_seen` of each of ``oids``, read at once (one round trip on PostgreSQL)."""
        found = txn.get_many(Space.META, [self.prefix + oid for oid in oids]) if oids else []
        return [from_micros(int.from_bytes(data, "big")) if data is not None else None for data in found]

    def mark(self, txn: WriteTxn, oid: bytes, when: datetime) -> None:
        """Record that ``oid`` was found unreachable at ``when``."""
        txn.put(Space.META, self.prefix + oid, micros(when).to_bytes(8, "big"))

    def unmark(self, txn: WriteTxn, oid: bytes) -> None:
        """Forget the mark of ``oid`` (removed, or reachable again)."""
        txn.discard(Space.META, self.prefix + oid)

    def marked(self, txn: ReadTxn) -> Iterator[bytes]:
        """The ids of every marked object."""
        size = len(self.prefix)
        for key, _ in txn.scan(Space.META, self.prefix):
            yield key[size:]

    def clear(self, txn: WriteTxn) -> None:
        """Forget every mark (the tenant is being deleted)."""
        for oid in list(self.marked(txn)):
            self.unmark(txn, oid)
