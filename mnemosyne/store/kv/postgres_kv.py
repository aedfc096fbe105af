"""A backend on PostgreSQL: stores shared across machines (ADR 20).

One schema per store, one ``(k bytea PRIMARY KEY, v bytea)`` table per keyspace;
``bytea`` orders as ``memcmp``, as LMDB does, and every key except ``meta``'s
starts with its tenant's scope. Reads are ``REPEATABLE READ`` snapshots; a
``transact`` is one ``SERIALIZABLE`` transaction, run again after a
serialization failure or a deadlock, so a ref's read-check-write holds against
every other writer. Writes whose answer is known without asking the server are
buffered and sent together at commit. Object values are cached in the process,
guarded by a store-wide erasure epoch: an erased object is never served from the
cache once the erasing transaction has committed.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

import psycopg

from mnemosyne.errors import InvalidInput, MnemoError, NotFound
from mnemosyne.store.kv.base import Space, WriteTxn, prefix_end
from mnemosyne.store.kv.postgres_conn import (
    EPOCH_TABLE,
    RETRYABLE,
    PgLocation,
    Pool,
    create_tables,
    mapped,
    store_exists,
)

T = TypeVar("T")

CACHE_BYTES = 64 << 20
"""How many bytes of object values a handle keeps (least recently used leave first)."""

FIRST_PAGE = 8
"""Rows a scan asks for first: many scans stop after one (the last entry of a log)."""

LAST_PAGE = 4096
"""Pages grow fourfold up to this many rows."""

BATCH_ROWS = 5000
"""Rows per statement when buffered writes are sent."""

MAX_ATTEMPTS = 1000
"""Runs of one write transaction before serialization failures are given up on."""

Conn = psycopg.Connection[tuple[object, ...]]


class _ObjectCache:
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
        with self._lock:
            if epoch != self.epoch:
                return None
            found = self._values.get(key)
            if found is None or found[1] > floor:
                return None
            self._values.move_to_end(key)
            return found[0]

    def put(self, key: bytes, value: bytes, epoch: int, ticket: int) -> None:
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
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])


class _Sql:
    """The statements of one store, built once (names are checked identifiers)."""

    def __init__(self, where: PgLocation) -> None:
        self.tables = {space: where.table(space.value) for space in Space}
        epoch = where.table(EPOCH_TABLE)
        self.begin_read = (
            f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT n FROM {epoch} WHERE id = 0"
        )
        self.begin_write = f"BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT n FROM {epoch} WHERE id = 0"
        self.bump_epoch = f"UPDATE {epoch} SET n = n + 1 WHERE id = 0"
        self._scans: dict[tuple[Space, bool, bool, bool, bool, bool], str] = {}

    def get(self, space: Space) -> str:
        return f"SELECT v FROM {self.tables[space]} WHERE k = %b"

    def insert(self, space: Space) -> str:
        return f"INSERT INTO {self.tables[space]} (k, v) VALUES (%b, %b) ON CONFLICT (k) DO NOTHING"

    def insert_many(self, space: Space, replace: bool) -> str:
        action = "UPDATE SET v = EXCLUDED.v" if replace else "NOTHING"
        return (
            f"INSERT INTO {self.tables[space]} (k, v) SELECT * FROM unnest(%b::bytea[], %b::bytea[]) "
            f"ON CONFLICT (k) DO {action}"
        )

    def delete(self, space: Space) -> str:
        return f"DELETE FROM {self.tables[space]} WHERE k = %b"

    def delete_many(self, space: Space) -> str:
        return f"DELETE FROM {self.tables[space]} WHERE k = ANY(%b::bytea[])"

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


class _Txn:
    """A transaction on one connection; a write transaction buffers what it can."""

    def __init__(self, kv: PostgresKV, conn: Conn, begun: tuple[int, int, int], writable: bool) -> None:
        self._kv = kv
        self._cur = conn.cursor(binary=True)
        self._epoch, self._floor, self._ticket = begun
        self._writable = writable
        self._pending: dict[Space, dict[bytes, bytes | None]] = {}
        self.written_objects: dict[bytes, bytes] = {}
        """Objects this transaction stored: served to itself, cached once it commits."""
        self.changed_objects = False
        """Whether it deleted or overwrote an object: the erasure epoch moves on."""
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise MnemoError("transaction is closed")

    def _fetch_one(self, query: str, params: list[object]) -> tuple[object, ...] | None:
        self._cur.execute(query, params)
        return self._cur.fetchone()

    # -- reading ----------------------------------------------------------------

    def get(self, space: Space, key: bytes) -> bytes | None:
        self._check()
        pending = self._pending.get(space)
        if pending is not None and key in pending:
            return pending[key]
        cache = None
        if space is Space.OBJECTS:
            mine = self.written_objects.get(key)
            if mine is not None:
                return mine  # never cached from here: this transaction may yet roll back
            cache = self._kv.cache
            found = cache.get(key, self._epoch, self._floor)
            if found is not None:
                return found
        row = self._fetch_one(self._kv.sql.get(space), [key])
        if row is None:
            return None
        value = row[0]
        assert isinstance(value, bytes)
        if cache is not None:
            cache.put(key, value, self._epoch, self._ticket)
        return value

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
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
            self._flush(space)  # a write transaction's scans see its own writes
            query = self._kv.sql.scan(space, reverse, low is not None, low_open, high is not None, high_open)
            params: list[object] = [bound for bound in (low, high) if bound is not None]
            self._cur.execute(query, [*params, size])
            rows = self._cur.fetchall()
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
        pending = self._buffer(space)
        value = bytes(value)
        if overwrite:
            pending[key] = value
            if space is Space.OBJECTS:
                self.changed_objects = True  # objects are never overwritten, but the contract allows it
                self._kv.cache.evict(key)
        elif key in pending:
            if pending[key] is not None:
                return False
            pending[key] = value
        else:
            # Whether the key exists is the answer: the server decides it now.
            self._cur.execute(self._kv.sql.insert(space), [key, value])
            if self._cur.rowcount != 1:
                return False
        if space is Space.OBJECTS:
            self.written_objects[key] = value
        return True

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        pending = self._buffer(space)
        if overwrite:
            for key, value in items:
                self.put(space, key, value)
            return len(items)
        added = 0
        unknown: dict[bytes, bytes] = {}
        for key, value in items:
            if key in pending:
                added += self.put(space, key, value, overwrite=False)
            elif key not in unknown:
                unknown[key] = bytes(value)
        for chunk in _chunks(list(unknown.items())):
            self._cur.execute(
                self._kv.sql.insert_many(space, replace=False),
                [[key for key, _ in chunk], [value for _, value in chunk]],
            )
            added += max(self._cur.rowcount, 0)
        if space is Space.OBJECTS:
            self.written_objects.update(unknown)
        return added

    def delete(self, space: Space, key: bytes) -> bool:
        pending = self._buffer(space)
        if space is Space.OBJECTS:
            self.changed_objects = True
            self.written_objects.pop(key, None)
            self._kv.cache.evict(key)
        if key in pending:
            existed = pending[key] is not None
            pending[key] = None  # the server may hold it too: delete it there at commit
            return existed
        self._cur.execute(self._kv.sql.delete(space), [key])
        return self._cur.rowcount == 1

    def _flush(self, space: Space | None = None) -> None:
        """Send buffered writes (of one keyspace, or all) to the server."""
        spaces = [space] if space is not None else list(self._pending)
        for name in spaces:
            pending = self._pending.pop(name, None)
            if not pending:
                continue
            puts = [(key, value) for key, value in pending.items() if value is not None]
            gone = [key for key, value in pending.items() if value is None]
            for chunk in _chunks(puts):
                self._cur.execute(
                    self._kv.sql.insert_many(name, replace=True),
                    [[key for key, _ in chunk], [value for _, value in chunk]],
                )
            for keys in _chunks(gone):
                self._cur.execute(self._kv.sql.delete_many(name), [keys])

    def finish(self) -> None:
        """Send every buffered write, and count this transaction's object deletions."""
        self._flush()
        if self.changed_objects:
            self._cur.execute(self._kv.sql.bump_epoch)


def _chunks(items: list[T]) -> Iterator[list[T]]:
    for at in range(0, len(items), BATCH_ROWS):
        yield items[at : at + BATCH_ROWS]


class PostgresKV:
    """Keyspaces as tables in one schema of a PostgreSQL database (see the module docstring).

    Args:
        url: ``postgresql://…`` (libpq's URL forms), with ``schema=NAME`` to pick
            one of several stores in the database (default ``mnemosyne``).
        create: create the schema and tables (the database must exist).
        readonly: refuse writes.
        sync: wait for the server to flush each commit (off: ``synchronous_commit=off``,
            a crash of the server may lose the latest commits, never consistency).

    Raises:
        NotFound: the server cannot be reached or refuses the connection, the
            database does not exist, or (without ``create``) no store is there.
        InvalidInput: a URL that is not one, or a bad schema name.
    """

    def __init__(self, url: str, *, create: bool = False, readonly: bool = False, sync: bool = True) -> None:
        self.where = PgLocation.parse(url)
        self.readonly = readonly
        self.sql = _Sql(self.where)
        self.cache = _ObjectCache(CACHE_BYTES)
        self._pool = Pool(self.where, sync)
        conn = self._pool.connect()
        try:
            if create:
                self._create(conn)
            elif not store_exists(conn, self.where):
                raise NotFound(f"no store at {self.where.display} (create one with 'mnemo init')")
        except psycopg.Error as exc:
            conn.close()
            raise mapped(exc, self.where, writing=create) from None
        except BaseException:
            conn.close()
            raise
        self._pool.give(conn)

    def _create(self, conn: Conn) -> None:
        with conn.transaction():
            create_tables(conn, self.where)

    @property
    def display(self) -> str:
        """The store's URL as messages show it (no password)."""
        return self.where.display

    # -- transactions -------------------------------------------------------------

    def _begin(self, write: bool) -> tuple[Conn, tuple[int, int, int]]:
        """A connection inside a new transaction: its snapshot's erasure epoch, cache floor and ticket."""
        statement = self.sql.begin_write if write else self.sql.begin_read
        for _ in range(2):
            conn, pooled = self._pool.take()
            floor = self.cache.floor()
            try:
                cur = conn.execute(statement)
                cur.nextset()
                row = cur.fetchone()
            except psycopg.OperationalError as exc:
                conn.close()
                if pooled:
                    continue  # a pooled connection the server dropped meanwhile: take another
                raise mapped(exc, self.where) from None
            except psycopg.Error as exc:
                self._discard(conn)
                raise mapped(exc, self.where, writing=write) from None
            epoch = int(str(row[0])) if row else 0
            return conn, (epoch, floor, self.cache.ticket(epoch))
        raise MnemoError(f"cannot keep a connection to the PostgreSQL server at {self.where.host}")

    def _discard(self, conn: Conn) -> None:
        """End whatever transaction is open and return the connection (closed if broken)."""
        if not conn.closed:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        self._pool.give(conn)

    @contextmanager
    def read(self) -> Iterator[_Txn]:
        """Open a snapshot read transaction (``REPEATABLE READ``)."""
        conn, begun = self._begin(write=False)
        txn = _Txn(self, conn, begun, writable=False)
        try:
            yield txn
        except psycopg.Error as exc:
            raise mapped(exc, self.where) from None
        finally:
            txn.closed = True
            self._discard(conn)

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in one ``SERIALIZABLE`` transaction, again after a serialization failure."""
        self._pool.check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        delay = 0.001
        for _ in range(MAX_ATTEMPTS):
            conn, begun = self._begin(write=True)
            txn = _Txn(self, conn, begun, writable=True)
            committing = False
            try:
                result = fn(txn)
                txn.finish()
                committing = True
                conn.execute("COMMIT")
            except RETRYABLE:
                self._discard(conn)
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.05)
                continue
            except psycopg.Error as exc:
                self._discard(conn)
                raise mapped(exc, self.where, writing=True, committing=committing) from None
            except BaseException:
                self._discard(conn)
                raise
            finally:
                txn.closed = True
            self._pool.give(conn)
            if not txn.changed_objects:
                # Tagged after the commit: only transactions begun since then can see them.
                ticket = self.cache.ticket(begun[0])
                for key, value in txn.written_objects.items():
                    self.cache.put(key, value, begun[0], ticket)
            return result
        raise MnemoError(
            f"gave up after {MAX_ATTEMPTS} serialization failures in the store at {self.where.display}; "
            "too many writers contend for it"
        )

    def close(self) -> None:
        """Close the handle's connections."""
        self._pool.close()

    # -- compaction -----------------------------------------------------------------

    def _size(self, conn: Conn) -> int:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            [self.where.schema],
        ).fetchone()
        return int(str(row[0])) if row else 0

    def check_compact(self) -> None:
        """Refuse a read-only handle, or a role that does not own the tables (VACUUM would skip them).

        Raises:
            InvalidInput: read-only, or the tables belong to another role.
        """
        conn, _ = self._pool.take()
        try:
            if self.readonly:
                raise InvalidInput("the store is open read-only")
            rows = conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r' AND NOT pg_has_role(c.relowner, 'USAGE') "
                "ORDER BY 1",
                [self.where.schema],
            ).fetchall()
        except psycopg.Error as exc:
            raise mapped(exc, self.where) from None
        finally:
            self._discard(conn)
        if rows:
            raise InvalidInput(
                f"compaction (VACUUM FULL) needs to own the store's tables; {rows[0][0]} in "
                f"{self.where.display} belongs to another role"
            )

    def compact(self) -> tuple[int, int]:
        """Rewrite every table of the store (``VACUUM FULL``), so erased bytes leave the table files.

        Each table is locked for the moment it is rewritten; a session holding one
        (a long transaction) makes compaction refuse rather than wait.

        Raises:
            InvalidInput: read-only, tables of another role, or a table kept busy.
        """
        self.check_compact()
        conn, _ = self._pool.take()
        try:
            conn.execute("SET lock_timeout = '10s'")
            before = self._size(conn)
            for table in [*self.sql.tables.values(), self.where.table(EPOCH_TABLE)]:
                try:
                    conn.execute(f"VACUUM FULL {table}")
                except psycopg.errors.LockNotAvailable:
                    raise InvalidInput(
                        f"compaction needs {table} to itself for a moment and another session holds it; "
                        "try again when no long transaction runs"
                    ) from None
            after = self._size(conn)
            conn.execute("RESET lock_timeout")
        except psycopg.Error as exc:
            raise mapped(exc, self.where, writing=True) from None
        finally:
            self._discard(conn)
        return before, after
