"""One transaction on a PostgreSQL store: reads, buffered writes, guessed answers (ADR 20).

Every round trip to the server is what a transaction costs (a microsecond on
LMDB, about a tenth of a millisecond over a local socket), so a transaction
avoids asking what it already knows: rows it read before (the snapshot does not
change under it), rows read ahead when it began, writes buffered until commit,
and whether an object it stores is new, guessed and checked at commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

import psycopg

from mnemosyne.errors import InvalidInput, MnemoError
from mnemosyne.store.kv.base import Space, prefix_end
from mnemosyne.store.kv.postgres_sql import ObjectCache, Statements

T = TypeVar("T")

FIRST_PAGE = 8
"""Rows a scan asks for first: many scans stop after one (the last entry of a log)."""

LAST_PAGE = 4096
"""Pages grow fourfold up to this many rows."""

BATCH_ROWS = 5000
"""Rows per statement when buffered writes are sent."""

READ_AHEAD = 6
"""Keys a transaction reads ahead when it begins: the first ones the previous transaction asked for."""

Conn = psycopg.Connection[tuple[object, ...]]
Statement = tuple[str, list[object] | None]
Key = tuple[Space, bytes]


class Misguessed(Exception):
    """An object answered "added" without asking was there after all: run the transaction again, asking."""


def run_round(conn: Conn, statements: list[Statement]) -> list[psycopg.Cursor[tuple[object, ...]]]:
    """Send statements in one round trip (psycopg's pipeline mode); a cursor holds each one's rows.

    Raises:
        Misguessed: the check of guessed objects failed (see ``Statements.insert_new``).
    """
    cursors = [conn.cursor(binary=True) for _ in statements]
    try:
        if len(statements) == 1:
            cursors[0].execute(statements[0][0], statements[0][1])
        else:
            with conn.pipeline():
                for cursor, (query, params) in zip(cursors, statements, strict=True):
                    # Not prepared: psycopg can lose track of a statement prepared in a
                    # pipeline that an error aborted ("prepared statement does not exist").
                    cursor.execute(query, params, prepare=False)
    except psycopg.errors.DivisionByZero:
        raise Misguessed from None
    return cursors


class Backend(Protocol):
    """What a transaction uses of the backend that began it (:class:`PostgresKV` is one)."""

    @property
    def sql(self) -> Statements:
        """The statements of the store's schema."""
        ...

    @property
    def cache(self) -> ObjectCache:
        """The objects cache shared by the backend's transactions."""
        ...

    @property
    def objects(self) -> Space:
        """The keyspace whose values the cache holds."""
        ...


class Txn:
    """A transaction on one connection; a write transaction buffers what it can.

    Args:
        kv: the handle.
        conn: a connection inside the transaction (begun by the handle).
        begun: the snapshot's erasure epoch, the cache floor and the ticket.
        known: rows read ahead in this snapshot (None: the key is absent).
        writable: a write transaction.
        guess: answer "added" for objects stored without overwrite, checked at commit.
    """

    def __init__(
        self,
        kv: Backend,
        conn: Conn,
        begun: tuple[int, int, int],
        known: dict[Key, bytes | None],
        writable: bool,
        guess: bool = False,
    ) -> None:
        self._kv = kv
        self._objects = kv.objects
        self.conn = conn
        self._cur = conn.cursor(binary=True)
        self.epoch, self._floor, self._ticket = begun
        self._writable = writable
        self._guess = guess
        self._pending: dict[Space, dict[bytes, bytes | None]] = {}
        self._known = known
        """Rows of this snapshot already fetched (not objects, which have the handle's cache)."""
        self.asked: dict[Key, None] = {}
        """The first keys this transaction needed from the server, in order: the next one reads them ahead."""
        self._guessed: dict[bytes, bytes] = {}
        """Objects answered "added" without asking the server: inserted and checked at commit."""
        self.written_objects: dict[bytes, bytes] = {}
        """Objects this transaction stored: served to itself, cached once it commits."""
        self.changed_objects = False
        """Whether it deleted or overwrote an object: the erasure epoch moves on."""
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise MnemoError("transaction is closed")

    def _cached(self, key: bytes) -> bool:
        # A cached object exists: guessing "added" for it would be wrong for sure.
        return self._kv.cache.get(key, self.epoch, self._floor) is not None

    # -- reading ----------------------------------------------------------------

    def get(self, space: Space, key: bytes) -> bytes | None:
        """The value at ``key`` in this snapshot (with this transaction's writes), or None."""
        self._check()
        pending = self._pending.get(space)
        if pending is not None and key in pending:
            return pending[key]
        cache = None
        if space is self._objects:
            mine = self.written_objects.get(key)
            if mine is not None:
                return mine  # never cached from here: this transaction may yet roll back
            cache = self._kv.cache
            found = cache.get(key, self.epoch, self._floor)
            if found is not None:
                return found
        else:
            if len(self.asked) < READ_AHEAD:
                self.asked.setdefault((space, key))
            # The snapshot does not change and this transaction's own writes are in
            # ``_pending`` (or dropped from here when sent), so a row read once stays right.
            if (space, key) in self._known:
                return self._known[space, key]
        self._cur.execute(self._kv.sql.get(space), [key])
        row = self._cur.fetchone()
        value = row[0] if row is not None else None
        assert value is None or isinstance(value, bytes)
        if cache is None:
            self._known[space, key] = value
        elif value is not None:
            cache.put(key, value, self.epoch, self._ticket)
        return value

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield rows under ``prefix`` in key order (reversed: descending), from ``start`` on."""
        self._check()
        end = prefix_end(prefix)
        low: bytes | None
        high: bytes | None
        if reverse:
            low, low_open = (prefix or None), False
            if start is not None and (end is None or start < end):
                high, high_open = start, False
            else:
                high, high_open = end, True
        else:
            low, low_open = (max(prefix, start) if start is not None else prefix) or None, False
            high, high_open = end, True
        size = FIRST_PAGE
        while True:
            query = self._kv.sql.scan(space, reverse, low is not None, low_open, high is not None, high_open)
            params: list[object] = [bound for bound in (low, high) if bound is not None]
            # A write transaction's scans see its own writes: those buffered go first, same round trip.
            cursor = run_round(self.conn, [*self._sent(space), (query, [*params, size])])[-1]
            rows = cursor.fetchall()
            for key, value in rows:
                assert isinstance(key, bytes) and isinstance(value, bytes)
                yield key, value
            if len(rows) < size:
                return
            last = rows[-1][0]
            assert isinstance(last, bytes)
            if reverse:
                high, high_open = last, True
            else:
                low, low_open = last, True
            size = min(size * 4, LAST_PAGE)

    # -- writing ----------------------------------------------------------------

    def _buffer(self, space: Space) -> dict[bytes, bytes | None]:
        self._check()
        if not self._writable:
            raise InvalidInput("the store is open read-only")
        return self._pending.setdefault(space, {})

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        """Store ``value`` at ``key``; False when ``overwrite`` is off and the key exists."""
        pending = self._buffer(space)
        value = bytes(value)
        if overwrite:
            pending[key] = value
            if space is self._objects:
                self.changed_objects = True  # objects are never overwritten, but the contract allows it
                self._kv.cache.evict(key)
        elif key in pending:
            if pending[key] is not None:
                return False
            pending[key] = value
        elif key in self._guessed:
            return False
        elif space is self._objects and self._guess and not self._cached(key):
            # Content-addressed objects a commit stores (tree chunks, the commit) are
            # nearly always new: answer "added" now, insert and check at commit, and
            # run the transaction again asking if one was there (``Misguessed``).
            self._guessed[key] = value
        else:
            # Whether the key exists is the answer: the server decides it now.
            self._known.pop((space, key), None)
            self._cur.execute(self._kv.sql.insert(space), [key, value])
            if self._cur.rowcount != 1:
                return False
        if space is self._objects:
            self.written_objects[key] = value
        return True

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        """Store many items; return how many were added (one statement without overwrite)."""
        pending = self._buffer(space)
        if overwrite:
            for key, value in items:
                self.put(space, key, value)
            return len(items)
        added = 0
        unknown: dict[bytes, bytes] = {}
        for key, value in items:
            if key in pending or key in self._guessed:
                added += self.put(space, key, value, overwrite=False)
            elif key not in unknown:
                unknown[key] = bytes(value)
        for chunk in _chunks(list(unknown.items())):
            for key, _ in chunk:
                self._known.pop((space, key), None)
            self._cur.execute(
                self._kv.sql.insert_many(space, replace=False),
                [[key for key, _ in chunk], [value for _, value in chunk]],
            )
            added += max(self._cur.rowcount, 0)
        if space is self._objects:
            self.written_objects.update(unknown)
        return added

    def delete(self, space: Space, key: bytes) -> bool:
        """Remove ``key``; False when it was absent."""
        pending = self._buffer(space)
        if space is self._objects:
            self.changed_objects = True
            self.written_objects.pop(key, None)
            self._kv.cache.evict(key)
            if key in self._guessed:
                pending[key] = None  # inserted (and checked) at commit, then deleted after it
                return True
        if key in pending:
            existed = pending[key] is not None
            pending[key] = None  # the server may hold it too: delete it there at commit
            return existed
        self._known.pop((space, key), None)
        self._cur.execute(self._kv.sql.delete(space), [key])
        return self._cur.rowcount == 1

    def _sent(self, space: Space | None = None) -> list[Statement]:
        """Take the buffered writes (of one keyspace, or all) as statements to send, guessed objects first."""
        statements: list[Statement] = []
        if self._guessed and space in (None, self._objects):
            guessed, self._guessed = list(self._guessed.items()), {}
            for chunk in _chunks(guessed):
                statements.append(
                    (
                        self._kv.sql.insert_new(self._objects),
                        [[key for key, _ in chunk], [value for _, value in chunk], len(chunk)],
                    )
                )
        for name in [space] if space is not None else list(self._pending):
            pending = self._pending.pop(name, None)
            if not pending:
                continue
            for key in pending:
                self._known.pop((name, key), None)
            puts = [(key, value) for key, value in pending.items() if value is not None]
            gone = [key for key, value in pending.items() if value is None]
            for chunk in _chunks(puts):
                statements.append(
                    (
                        self._kv.sql.insert_many(name, replace=True),
                        [[key for key, _ in chunk], [value for _, value in chunk]],
                    )
                )
            for keys in _chunks(gone):
                statements.append((self._kv.sql.delete_many(name), [keys]))
        return statements

    def finish(self) -> list[Statement]:
        """Everything left to send before ``COMMIT``: buffered writes, guessed objects, the epoch's step."""
        statements = self._sent()
        if self.changed_objects:
            statements.append((self._kv.sql.bump_epoch, None))
        return statements


def _chunks(items: list[T]) -> Iterator[list[T]]:
    for at in range(0, len(items), BATCH_ROWS):
        yield items[at : at + BATCH_ROWS]
