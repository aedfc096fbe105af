"""The statements and the object cache of a store on PostgreSQL (ADR 20).

Split from :mod:`~mnemosyne.store.kv.postgres_kv` to keep modules small: the SQL
a store sends, built once per handle, and the per-handle cache of object values
with the two rules that keep it exact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.postgres_conn import EPOCH_TABLE, PgLocation


class ObjectCache:
    """Object values by key, served only to snapshots that could see them (ADR 20).

    Two guards. The erasure epoch: every transaction that deletes or overwrites an
    object increments it, a transaction reads it in its snapshot, and the cache
    serves and takes values only for transactions of its own epoch (one that sees a
    newer epoch empties it): once an erasure has committed, no transaction that
    starts afterwards reads a value cached before it. Tickets: a value is tagged
    with the ticket of the transaction that read it (handed out when its snapshot
    was taken) and served only to transactions begun after that, so a snapshot
    never sees an object stored after it began.
    """

    def __init__(self, budget: int) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[bytes, tuple[bytes, int]] = OrderedDict()
        self._bytes = 0
        self._budget = budget
        self._tickets = 0
        self.epoch = -1

    def floor(self) -> int:
        """Taken before a transaction begins: values with tickets up to it are older than its snapshot."""
        with self._lock:
            return self._tickets

    def ticket(self, epoch: int) -> int:
        """Taken once a transaction's snapshot exists: the tag of the values it reads."""
        with self._lock:
            if epoch > self.epoch:
                self._values.clear()
                self._bytes = 0
                self.epoch = epoch
            self._tickets += 1
            return self._tickets

    def get(self, key: bytes, epoch: int, floor: int) -> bytes | None:
        """The cached value, if a transaction of this epoch begun after its ticket may see it."""
        with self._lock:
            if epoch != self.epoch:
                return None
            found = self._values.get(key)
            if found is None or found[1] > floor:
                return None
            self._values.move_to_end(key)
            return found[0]

    def put(self, key: bytes, value: bytes, epoch: int, ticket: int) -> None:
        """Keep a value read (or committed) under ``ticket`` in ``epoch``."""
        if len(value) > self._budget // 16:
            return  # one large value would push out many small ones
        with self._lock:
            if epoch != self.epoch:
                return
            old = self._values.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
                ticket = min(ticket, old[1])  # the same bytes: seen since the older ticket
            self._values[key] = (value, ticket)
            self._bytes += len(value)
            while self._bytes > self._budget:
                _, (dropped, _) = self._values.popitem(last=False)
                self._bytes -= len(dropped)

    def evict(self, key: bytes) -> None:
        """Forget a key this process deletes or overwrites."""
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])


class Statements:
    """The statements of one store, built once (names are checked identifiers)."""

    def __init__(self, where: PgLocation) -> None:
        self.tables = {space: where.table(space.value) for space in Space}
        epoch = where.table(EPOCH_TABLE)
        self.begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        self.begin_write = "BEGIN ISOLATION LEVEL SERIALIZABLE"
        self.epoch = f"SELECT n FROM {epoch} WHERE id = 0"
        self.bump_epoch = f"UPDATE {epoch} SET n = n + 1 WHERE id = 0"
        self._scans: dict[tuple[Space, bool, bool, bool, bool, bool], str] = {}

    def get(self, space: Space) -> str:
        """Read one row."""
        return f"SELECT v FROM {self.tables[space]} WHERE k = %b"

    def get_many(self, space: Space) -> str:
        """Read the rows of many keys (those present)."""
        return f"SELECT k, v FROM {self.tables[space]} WHERE k = ANY(%b::bytea[])"

    def insert(self, space: Space) -> str:
        """Insert one row unless its key exists (the row count says which)."""
        return f"INSERT INTO {self.tables[space]} (k, v) VALUES (%b, %b) ON CONFLICT (k) DO NOTHING"

    def insert_many(self, space: Space, replace: bool) -> str:
        """Insert many rows, replacing or keeping those whose keys exist."""
        action = "UPDATE SET v = EXCLUDED.v" if replace else "NOTHING"
        return (
            f"INSERT INTO {self.tables[space]} (k, v) SELECT * FROM unnest(%b::bytea[], %b::bytea[]) "
            f"ON CONFLICT (k) DO {action}"
        )

    def insert_new(self, space: Space) -> str:
        """Insert rows this transaction took to be new without asking: all must be new.

        A plain ``INSERT`` (no ``ON CONFLICT``, whose speculative insertion writes a
        WAL record of its own per row): the primary key is the check. Sent in the
        round trip of ``COMMIT``, it fails the transaction with ``unique_violation``
        (SQLSTATE 23505) when a key was there after all; every other insert we send
        says what to do on a conflict, so that error means "a guess was wrong" (ADR 20).
        """
        return f"INSERT INTO {self.tables[space]} (k, v) SELECT * FROM unnest(%b::bytea[], %b::bytea[])"

    def delete(self, space: Space) -> str:
        """Delete one row (the row count says whether it was there)."""
        return f"DELETE FROM {self.tables[space]} WHERE k = %b"

    def delete_many(self, space: Space) -> str:
        """Delete many rows."""
        return f"DELETE FROM {self.tables[space]} WHERE k = ANY(%b::bytea[])"

    def first_pages(self, space: Space, reverse: bool, low_open: bool, high_open: bool) -> str:
        """The first pages of many range scans, both bounds present: rows numbered by their range.

        Arguments: the ranges' low bounds, their high bounds (two arrays), the rows per page.
        """
        low = "k > p.lo" if low_open else "k >= p.lo"
        high = "k < p.hi" if high_open else "k <= p.hi"
        order = "DESC" if reverse else "ASC"
        return (
            "SELECT p.n, t.k, t.v FROM unnest(%b::bytea[], %b::bytea[]) WITH ORDINALITY AS p(lo, hi, n) "
            f"CROSS JOIN LATERAL (SELECT k, v FROM {self.tables[space]} WHERE {low} AND {high} "
            f"ORDER BY k {order} LIMIT %b) AS t"
        )

    def scan(
        self, space: Space, reverse: bool, low: bool, low_open: bool, high: bool, high_open: bool
    ) -> str:
        """A page of a range scan: bounds present or not, inclusive or not, then a limit."""
        flags = (space, reverse, low, low_open, high, high_open)
        found = self._scans.get(flags)
        if found is None:
            where = []
            if low:
                where.append("k > %b" if low_open else "k >= %b")
            if high:
                where.append("k < %b" if high_open else "k <= %b")
            condition = f" WHERE {' AND '.join(where)}" if where else ""
            order = "DESC" if reverse else "ASC"
            found = f"SELECT k, v FROM {self.tables[space]}{condition} ORDER BY k {order} LIMIT %b"
            self._scans[flags] = found
        return found
