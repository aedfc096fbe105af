"""A backend on PostgreSQL: stores shared across machines (ADR 20).

One schema per store, one ``(k bytea PRIMARY KEY, v bytea)`` table per keyspace;
``bytea`` orders as ``memcmp``, as LMDB does, and every key except ``meta``'s
starts with its tenant's scope. Reads are ``REPEATABLE READ`` snapshots; a
``transact`` is one ``SERIALIZABLE`` transaction, run again after a
serialization failure or a deadlock, so a ref's read-check-write holds against
every other writer. Round trips are what a transaction costs: one begins it and
reads ahead what the last ones started with (:mod:`~mnemosyne.store.kv.postgres_ahead`),
writes whose answer is known without asking are sent together with ``COMMIT``
(:mod:`~mnemosyne.store.kv.postgres_txn`), and a read ends with a ``ROLLBACK``
nothing waits for: a warm read is one round trip, a commit two (ADR 31).
Object values are cached in the process, guarded by a store-wide erasure epoch:
an erased object is never served from the cache once the erasing transaction
has committed.
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg

from mnemosyne.errors import InvalidInput, MnemoError, NotFound
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn
from mnemosyne.store.kv.postgres_ahead import Key, Page, ReadAhead
from mnemosyne.store.kv.postgres_conn import (
    EPOCH_TABLE,
    RETRYABLE,
    Conn,
    PgLocation,
    Pool,
    create_tables,
    exchange,
    exchange_bound,
    exchange_pipelined,
    mapped,
    run_round,
    store_exists,
)
from mnemosyne.store.kv.postgres_sql import ObjectCache, Statements
from mnemosyne.store.kv.postgres_txn import Detached, Txn, first_page, pipelined

T = TypeVar("T")

CACHE_BYTES = 64 << 20
"""How many bytes of object values a handle keeps (least recently used leave first)."""

MAX_ATTEMPTS = 1000
"""Runs of one write transaction before serialization failures are given up on."""

PREPARED = 64
"""Statements a connection keeps prepared for beginning transactions; past it, they start afresh."""

UNSURE = ""
"""Among a connection's prepared names: a message that prepared some failed, which ran is unknown."""

SERVED_KINDS = 256
"""Kinds of read remembered as served by the read-ahead alone (see :meth:`PostgresKV.view`)."""


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

    remote = True  # a read not at hand is a round trip to the server

    def __init__(self, url: str, *, create: bool = False, readonly: bool = False, sync: bool = True) -> None:
        self.where = PgLocation.parse(url)
        self.readonly = readonly
        self.sql = Statements(self.where)
        self.cache = ObjectCache(CACHE_BYTES)
        self.objects = Space.OBJECTS
        """The keyspace of content-addressed values: cached, and guessed new when stored."""
        self._ahead = {write: ReadAhead(self.sql.tables, self.sql.epoch) for write in (False, True)}
        """Per kind of transaction (write or not): what the last ones asked for first."""
        self._prepared: weakref.WeakKeyDictionary[Conn, set[str]] = weakref.WeakKeyDictionary()
        """Per connection: the names of the read-ahead statements prepared on it."""
        self._served: dict[Hashable, None] = {}
        """Kinds of read whose last run needed nothing but the read-ahead (see :meth:`view`)."""
        self._trips = 0
        self._trips_lock = threading.Lock()
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

    @property
    def round_trips(self) -> int:
        """How many times this handle has waited for the server's answer, since it was opened.

        A test hook, and what the bench reports: a warm ``get`` is one, a commit
        two. Messages sent without waiting (a read's ``ROLLBACK``) do not count;
        connecting does not either.
        """
        with self._trips_lock:
            return self._trips

    def waited(self) -> None:
        """Count one round trip (transactions call it before each wait for the server)."""
        with self._trips_lock:
            self._trips += 1

    # -- transactions -------------------------------------------------------------

    def _begin(
        self, write: bool, transaction: bool = True, named: tuple[Page, ...] = ()
    ) -> tuple[Conn, tuple[int, int, int], dict[Key, bytes | None], dict[Page, list[tuple[bytes, bytes]]]]:
        """A connection inside a new transaction, its (epoch, cache floor, ticket), rows and pages read ahead.

        One round trip: ``BEGIN``, the epoch read in the snapshot it opens, and what
        the last transactions of the same kind asked for first (a handle reading at
        HEAD asks for the tenant binding, HEAD and the branch every time; see
        :mod:`~mnemosyne.store.kv.postgres_ahead`). They are read in this snapshot,
        so they are what asking later would return; a wrong guess costs a few rows
        in the same round trip, never one more.

        Without ``transaction`` (a read): the statement alone, its own snapshot, and the
        connection back in the pool at once (the one returned is not to be used).
        ``named``: first pages of scans the transaction says it will make, read too.
        """
        opening = self._ahead[write].opening
        if named:
            opening = opening.with_pages(named)
        begin = self.sql.begin_write if write else self.sql.begin_read
        for _ in range(2):
            conn, pooled = self._pool.take()
            # Prepared on a connection the first time, in one simple-protocol message with
            # the keys spelt in SQL (after BEGIN: a PREPARE survives the ROLLBACK); from then
            # on a bind of it, the keys binary parameters: nothing for the server to parse.
            prepared = self._prepared.setdefault(conn, set())
            bound = opening.name in prepared
            message = b""
            if not bound:
                parts = [begin] if transaction else []
                if len(prepared) >= PREPARED:
                    parts += [f"DEALLOCATE {name}" for name in sorted(prepared) if name != UNSURE]
                    prepared.clear()
                parts += [opening.prepare, opening.execute]
                message = "; ".join(parts).encode()
            floor = self.cache.floor()
            try:
                self.waited()
                if bound:
                    starting = begin.encode() if transaction else None
                    answer = exchange_bound(conn, starting, opening.name.encode(), opening.arguments)
                else:
                    answer = exchange(conn, message)[-1]
                epoch, known, pages = opening.answers(answer)
            except psycopg.OperationalError as exc:
                conn.close()
                if pooled:
                    continue  # a pooled connection the server dropped meanwhile: take another
                raise mapped(exc, self.where) from None
            except psycopg.errors.InvalidSqlStatementName:
                # Our statement was deallocated behind our back (DEALLOCATE ALL by another
                # user of the session): a fresh connection prepares it again.
                conn.close()
                continue
            except psycopg.Error as exc:
                conn.close()  # which statements it prepared before the error is unknown
                raise mapped(exc, self.where, writing=write) from None
            except BaseException:
                conn.close()  # interrupted mid-message: nothing more can be sent on it
                raise
            prepared.add(opening.name)
            if not transaction:
                self._pool.give(conn)
            return conn, (epoch, floor, self.cache.ticket(epoch)), known, pages
        raise MnemoError(f"cannot keep a connection to the PostgreSQL server at {self.where.host}")

    def _learn(self, write: bool, txn: Txn) -> None:
        self._ahead[write].learn_asked(txn.asked)

    def _discard(self, conn: Conn) -> None:
        """End whatever transaction is open and return the connection (closed if broken)."""
        if not conn.closed:
            self.waited()
            prepared = self._prepared.get(conn)
            unsure = prepared is not None and UNSURE in prepared
            # Past psycopg, which on seeing a ROLLBACK would deallocate every statement the
            # session prepared ("DEALLOCATE ALL"), ours among them.
            message = b"ROLLBACK" + (b"; SELECT name FROM pg_prepared_statements" if unsure else b"")
            try:
                results = exchange(conn, message)
            except psycopg.Error:
                conn.close()
            else:
                if unsure and prepared is not None:
                    names = [results[-1].get_value(row, 0) or b"" for row in range(results[-1].ntuples)]
                    prepared.clear()
                    prepared.update(name.decode() for name in names if name.startswith(b"mnemo_"))
        self._pool.give(conn)

    @contextmanager
    def read(self, named: tuple[Page, ...] = ()) -> Iterator[Txn]:
        """Open a snapshot read transaction (``REPEATABLE READ``): one round trip when what it reads is known.

        It ends with a ``ROLLBACK`` nobody waits for (see ``Pool.give_ending``).
        ``named``: first pages of scans it will make, read in that round trip too.
        """
        conn, begun, known, pages = self._begin(write=False, named=named)
        txn = Txn(self, conn, begun, known, pages, writable=False, named=named)
        try:
            yield txn
        except psycopg.Error as exc:
            raise mapped(exc, self.where) from None
        finally:
            txn.closed = True
            self._learn(False, txn)
            self._pool.give_ending(conn)

    def view(
        self,
        fn: Callable[[ReadTxn], T],
        kind: Hashable = None,
        scans: list[tuple[Space, bytes, bytes | None, bool]] | None = None,
    ) -> T:
        """Run ``fn`` on a snapshot: one statement and no transaction when the read-ahead serves it.

        When the last read of this ``kind`` needed nothing but the rows read ahead
        and cached objects, ``fn`` first runs on the snapshot of the one statement
        that reads them ahead, outside any transaction: nothing to end afterwards.
        Should it need the server after all, it runs again in a read transaction.
        The first pages of ``scans`` (``(keyspace, prefix, start, reverse)``) are read
        ahead by that statement too.
        """
        named = tuple(dict.fromkeys(first_page(*scan) for scan in scans or ()))
        if kind is not None and kind in self._served:
            _, begun, known, pages = self._begin(write=False, transaction=False, named=named)
            txn = Txn(self, None, begun, known, pages, writable=False, named=named)
            try:
                return fn(txn)
            except Detached:
                self._served.pop(kind, None)
            finally:
                txn.closed = True
                self._learn(False, txn)
        with self.read(named) as txn:
            result = fn(txn)
            if kind is not None and not txn.waits:
                if len(self._served) >= SERVED_KINDS:
                    self._served.clear()
                self._served[kind] = None
        return result

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
            conn, begun, known, pages = self._begin(write=True)
            txn = Txn(self, conn, begun, known, pages, writable=True, guess=guess)
            committing = False
            try:
                result = fn(txn)
                self._learn(True, txn)
                committing = True
                # One round trip: the buffered writes, the guessed objects' check, COMMIT.
                self.waited()
                statements = [*txn.finish(), ("COMMIT", None)]
                prepared = self._prepared.setdefault(conn, set())
                commands = pipelined(statements, prepared)
                if commands is None:
                    run_round(conn, statements)
                else:
                    try:
                        exchange_pipelined(conn, commands, prepared)
                    except psycopg.Error:
                        # The answers name the prepares that ran, unless the connection failed
                        # part way: then ask (on the way out, with the ROLLBACK) rather than guess.
                        prepared.add(UNSURE)
                        raise
                    except BaseException:
                        conn.close()  # interrupted mid-message: nothing more can be sent on it
                        raise
            except psycopg.errors.UniqueViolation as exc:
                self._discard(conn)
                if not guess:  # no plain insert was sent: a real error, not a wrong guess
                    raise mapped(exc, self.where, writing=True, committing=committing) from None
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
