"""A backend on PostgreSQL: stores shared across machines (ADR 20).

One schema per store, one ``(k bytea PRIMARY KEY, v bytea)`` table per keyspace;
``bytea`` orders as ``memcmp``, as LMDB does, and every key except ``meta``'s
starts with its tenant's scope. Reads are ``REPEATABLE READ`` snapshots; a
``transact`` is one ``SERIALIZABLE`` transaction, run again after a
serialization failure or a deadlock, so a ref's read-check-write holds against
every other writer. Round trips are what a transaction costs: one begins it and
reads ahead the rows the previous one started with, writes whose answer is
known without asking are sent together with ``COMMIT`` (see
:mod:`~mnemosyne.store.kv.postgres_txn`). Object values are cached in the
process, guarded by a store-wide erasure epoch: an erased object is never
served from the cache once the erasing transaction has committed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

import psycopg

from mnemosyne.errors import InvalidInput, MnemoError, NotFound
from mnemosyne.store.kv.base import Space, WriteTxn
from mnemosyne.store.kv.postgres_conn import (
    EPOCH_TABLE,
    RETRYABLE,
    PgLocation,
    Pool,
    create_tables,
    mapped,
    store_exists,
)
from mnemosyne.store.kv.postgres_sql import ObjectCache, Statements
from mnemosyne.store.kv.postgres_txn import Conn, Key, Misguessed, Txn, run_round

T = TypeVar("T")

CACHE_BYTES = 64 << 20
"""How many bytes of object values a handle keeps (least recently used leave first)."""

MAX_ATTEMPTS = 1000
"""Runs of one write transaction before serialization failures are given up on."""


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
        self.sql = Statements(self.where)
        self.cache = ObjectCache(CACHE_BYTES)
        self.objects = Space.OBJECTS
        """The keyspace of content-addressed values: cached, and guessed new when stored."""
        self._openings: dict[bool, list[Key]] = {False: [], True: []}
        """Per kind of transaction (write or not): the keys the last one asked for first."""
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

    def _begin(self, write: bool) -> tuple[Conn, tuple[int, int, int], dict[Key, bytes | None]]:
        """A connection inside a new transaction, its (epoch, cache floor, ticket) and rows read ahead.

        One round trip: ``BEGIN``, the epoch read in the snapshot it opens, and the
        rows the previous transaction of the same kind asked for first (a handle
        reading at HEAD asks for the tenant binding, HEAD and the branch every time).
        They are read in this snapshot, so they are what asking later would return;
        a wrong guess costs a few rows in the same round trip, never one more.
        """
        ahead = self._openings[write]
        # One simple-protocol message (parameters would need the extended protocol, one
        # statement each): keys go in as hex digits, decoded by the server.
        reads = "".join(
            f", (SELECT v FROM {self.sql.tables[space]} WHERE k = decode('{key.hex()}', 'hex'))"
            for space, key in ahead
        )
        begin = self.sql.begin_write if write else self.sql.begin_read
        statement = f"{begin}; SELECT ({self.sql.epoch}){reads}"
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
            assert row is not None
            epoch = int(str(row[0]))
            known: dict[Key, bytes | None] = {}
            for key, value in zip(ahead, row[1:], strict=True):
                assert value is None or isinstance(value, bytes)
                known[key] = value
            return conn, (epoch, floor, self.cache.ticket(epoch)), known
        raise MnemoError(f"cannot keep a connection to the PostgreSQL server at {self.where.host}")

    def _learn(self, write: bool, txn: Txn) -> None:
        if txn.asked:
            self._openings[write] = list(txn.asked)

    def _discard(self, conn: Conn) -> None:
        """End whatever transaction is open and return the connection (closed if broken)."""
        if not conn.closed:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        self._pool.give(conn)

    @contextmanager
    def read(self) -> Iterator[Txn]:
        """Open a snapshot read transaction (``REPEATABLE READ``)."""
        conn, begun, known = self._begin(write=False)
        txn = Txn(self, conn, begun, known, writable=False)
        try:
            yield txn
        except psycopg.Error as exc:
            raise mapped(exc, self.where) from None
        finally:
            txn.closed = True
            self._learn(False, txn)
            self._discard(conn)

    def transact(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in one ``SERIALIZABLE`` transaction, again after a serialization failure.

        Objects stored without overwrite are answered "added" without asking and
        checked at commit; when one was there after all, ``fn`` runs again (as
        after a serialization failure, which the KV contract allows) asking the
        server each time.
        """
        self._pool.check_open()
        if self.readonly:
            raise InvalidInput("the store is open read-only")
        delay = 0.001
        guess = True
        for _ in range(MAX_ATTEMPTS):
            conn, begun, known = self._begin(write=True)
            txn = Txn(self, conn, begun, known, writable=True, guess=guess)
            committing = False
            try:
                result = fn(txn)
                self._learn(True, txn)
                committing = True
                # One round trip: the buffered writes, the guessed objects' check, COMMIT.
                run_round(conn, [*txn.finish(), ("COMMIT", None)])
            except Misguessed:
                self._discard(conn)
                guess = False
                continue
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
