"""One transaction on a PostgreSQL store: reads, buffered writes, guessed answers (ADR 20).

Every round trip to the server is what a transaction costs (a microsecond on
LMDB, about a tenth of a millisecond over a local socket), so a transaction
avoids asking what it already knows: rows it read before (the snapshot does not
change under it), rows read ahead when it began, writes buffered until commit,
and whether an object it stores is new, guessed and checked at commit.
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

import psycopg

from mnemosyne.errors import InvalidInput, MnemoError
from mnemosyne.store.kv.base import Space, prefix_end
from mnemosyne.store.kv.postgres_ahead import FIRST_PAGE, QUESTIONS, Key, Page
from mnemosyne.store.kv.postgres_conn import Command, Conn, Statement, run_round
from mnemosyne.store.kv.postgres_sql import ObjectCache, Statements

T = TypeVar("T")

LAST_PAGE = 4096
"""Pages grow fourfold up to this many rows."""

BATCH_ROWS = 5000
"""Rows per statement when buffered writes are sent."""


class Detached(BaseException):
    """A read outside any transaction needs the server: it runs again in a transaction.

    A ``BaseException``, so that no ``except Exception`` in the reading code stops it.
    """


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

    def waited(self) -> None:
        """Count one round trip to the server."""
        ...


class Txn:
    """A transaction on one connection; a write transaction buffers what it can.

    Args:
        kv: the handle.
        conn: a connection inside the transaction (begun by the handle); None for a
            read served by what was read ahead alone, outside any transaction, which
            raises :class:`Detached` where it would need the server.
        begun: the snapshot's erasure epoch, the cache floor and the ticket.
        known: rows read ahead in this snapshot (None: the key is absent).
        pages: first pages of scans read ahead in this snapshot.
        writable: a write transaction.
        guess: take objects stored without overwrite, or where absent, to be new: answer
            "added" without asking and insert them plainly at commit, where the primary
            key checks the guess.
        named: pages read ahead because the read named them (``KV.view``'s ``scans``), not
            because earlier transactions asked them: they are not learned.
    """

    remote = True  # each read not at hand is a round trip: batch them (get_many)

    def __init__(
        self,
        kv: Backend,
        conn: Conn | None,
        begun: tuple[int, int, int],
        known: dict[Key, bytes | None],
        pages: dict[Page, list[tuple[bytes, bytes]]],
        writable: bool,
        guess: bool = False,
        named: tuple[Page, ...] = (),
    ) -> None:
        self._kv = kv
        self._objects = kv.objects
        self.conn = conn
        self._cursor: psycopg.Cursor[tuple[object, ...]] | None = None
        self.epoch, self._floor, self._ticket = begun
        self._writable = writable
        self._guess = guess
        self._pending: dict[Space, dict[bytes, bytes | None]] = {}
        self._known = known
        """Rows of this snapshot already fetched (not objects, which have the handle's cache)."""
        self._pages = pages
        """First pages of scans read ahead, dropped once this transaction writes to their keyspace."""
        self.asked: dict[Key | Page, bytes | None] = {}
        """The first questions this transaction needed the server for, in order, with the rows' values
        (a row by its key, or a scan's first page): the next ones read them ahead (see
        :func:`~mnemosyne.store.kv.postgres_ahead.learned`)."""
        self._batched: set[Key | Page] = set(named)
        """Rows and pages fetched many at once (:meth:`get_many`, :meth:`prefetch_scans`, the pages a
        read said it would scan): they name the keys of one call (the ids it was given), not what
        the next transaction asks first, so they are not learned."""
        self._guessed: dict[bytes, bytes] = {}
        """Objects answered "added" without asking the server: inserted and checked at commit."""
        self._absent: dict[bytes, bytes] = {}
        """Objects stored where absent (:meth:`put_absent`): inserted at commit, nothing to check."""
        self.written_objects: dict[bytes, bytes] = {}
        """Objects this transaction stored: served to itself, cached once it commits."""
        self.changed_objects = False
        """Whether it deleted or overwrote an object: the erasure epoch moves on."""
        self.waits = 0
        """Round trips this transaction made after the one that began it."""
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise MnemoError("transaction is closed")

    @property
    def _cur(self) -> psycopg.Cursor[tuple[object, ...]]:
        # Made when first needed: a read served by what was read ahead never needs one.
        if self._cursor is None:
            self._cursor = self._ask(counted=False).cursor(binary=True)
        return self._cursor

    def _ask(self, counted: bool = True) -> Conn:
        """The connection, before a wait for the server (counted as a round trip)."""
        if self.conn is None:
            raise Detached
        if counted:
            self._kv.waited()
            self.waits += 1
        return self.conn

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
            # The snapshot does not change and this transaction's own writes are in
            # ``_pending`` (or dropped from here when sent), so a row read once stays right.
            if (space, key) in self._known:
                found = self._known[space, key]
                if len(self.asked) < QUESTIONS and (space, key) not in self._batched:
                    self.asked.setdefault((space, key), found)
                return found
        self._ask()
        self._cur.execute(self._kv.sql.get(space), [key])
        row = self._cur.fetchone()
        value = row[0] if row is not None else None
        assert value is None or isinstance(value, bytes)
        if cache is None:
            self._known[space, key] = value
            if len(self.asked) < QUESTIONS:
                self.asked.setdefault((space, key), value)
        elif value is not None:
            cache.put(key, value, self.epoch, self._ticket)
        return value

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        """Each key's value as :meth:`get` gives it; those it would ask the server for, in one statement."""
        self._check()
        found: dict[bytes, bytes | None] = {}
        missing: list[bytes] = []
        pending = self._pending.get(space) or {}
        objects = space is self._objects
        cache = self._kv.cache
        mine = self.written_objects
        for key in keys:
            if key in pending:
                found[key] = pending[key]
            elif objects and (value := mine.get(key) or cache.get(key, self.epoch, self._floor)):
                found[key] = value
            elif not objects and (space, key) in self._known:
                found[key] = self._known[space, key]
            elif key not in found:
                found[key] = None
                missing.append(key)
        if missing:
            self._ask()
            for chunk in _chunks(missing):
                for got, row in self._cur.execute(self._kv.sql.get_many(space), [chunk]).fetchall():
                    assert isinstance(got, bytes) and isinstance(row, bytes)
                    found[got] = row
                    if objects:
                        cache.put(got, row, self.epoch, self._ticket)
                if not objects:
                    self._known.update(((space, key), found[key]) for key in chunk)
                    self._batched.update((space, key) for key in chunk)
        return [found[key] for key in keys]

    def let_go(self) -> None:
        """Nothing of the store is mapped here: values read are copies the caller holds."""

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        """Read the first page of each scan ``(prefix, start, reverse)`` in one round trip.

        Each :meth:`scan` with the same arguments then starts from its page (the
        change-index entries of many ids, read as one). A write transaction's own
        writes to ``space`` leave it to :meth:`scan`, which sends them first.
        """
        self._check()
        if self._pending.get(space):
            return
        pages: dict[Page, None] = {}
        for prefix, start, reverse in scans:
            page = first_page(space, prefix, start, reverse)
            if page.low is not None and page.high is not None and page not in self._pages:
                pages.setdefault(page)
        if not pages:
            return
        groups: dict[tuple[bool, bool, bool], list[Page]] = {}
        for page in pages:
            groups.setdefault((page.reverse, page.low_open, page.high_open), []).append(page)
        statements: list[Statement] = [
            (
                self._kv.sql.first_pages(space, *shape),
                [[page.low for page in group], [page.high for page in group], FIRST_PAGE],
            )
            for shape, group in groups.items()
        ]
        cursors = run_round(self._ask(), statements)
        for (reverse, _, _), group, cursor in zip(groups, groups.values(), cursors, strict=True):
            rows: list[list[tuple[bytes, bytes]]] = [[] for _ in group]
            for at, key, value in cursor.fetchall():
                assert isinstance(at, int) and isinstance(key, bytes) and isinstance(value, bytes)
                rows[at - 1].append((key, value))
            for page, found in zip(group, rows, strict=True):
                found.sort(reverse=reverse)
                self._pages[page] = found
                self._batched.add(page)

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield rows under ``prefix`` in key order (reversed: descending), from ``start`` on."""
        self._check()
        first: Page | None = first_page(space, prefix, start, reverse)
        assert first is not None
        low, low_open, high, high_open = first.low, first.low_open, first.high, first.high_open
        size = FIRST_PAGE
        if reverse and high is not None and not high_open and first not in self._pages:
            cover = self._pages.get(first_page(space, prefix, None, True))
            if cover is not None:
                # The newest rows under the prefix were read ahead: those up to ``start`` begin
                # this scan, and only if there may be more does it ask the server.
                for row in cover:
                    if row[0] <= high:
                        yield row
                if len(cover) < FIRST_PAGE:
                    return
                if cover[-1][0] <= high:
                    high, high_open = cover[-1][0], True
                first = None
        while True:
            rows: Sequence[tuple[object, ...]] | None = None
            if first is not None:
                if len(self.asked) < QUESTIONS and first not in self._batched:
                    self.asked.setdefault(first, None)
                rows = self._pages.get(first)
                first = None
            if rows is None:
                sql = self._kv.sql
                query = sql.scan(space, reverse, low is not None, low_open, high is not None, high_open)
                params: list[object] = [bound for bound in (low, high) if bound is not None]
                # A write transaction's scans see its own writes: those buffered go first, same round trip.
                conn = self._ask()
                cursor = run_round(conn, [*self._sent(space), (query, [*params, size])])[-1]
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
        if self._pages and any(page.space is space for page in self._pages):
            # A page read ahead no longer shows the keyspace as this transaction sees it.
            self._pages = {page: rows for page, rows in self._pages.items() if page.space is not space}
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
        elif space is self._objects and key in self.written_objects:
            return False  # stored by this transaction (guessed, where absent, or sent already)
        elif space is self._objects and self._guess and not self._cached(key):
            # Content-addressed objects a commit stores (tree chunks, the commit) are
            # nearly always new: answer "added" now, insert and check at commit, and
            # run the transaction again asking if one was there (``unique_violation``).
            self._guessed[key] = value
        else:
            # Whether the key exists is the answer: the server decides it now.
            self._known.pop((space, key), None)
            self._ask()
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
        mine = self.written_objects if space is self._objects else {}
        for key, value in items:
            if key in pending or key in mine:
                added += self.put(space, key, value, overwrite=False)
            elif key not in unknown:
                unknown[key] = bytes(value)
        for chunk in _chunks(list(unknown.items())):
            for key, _ in chunk:
                self._known.pop((space, key), None)
            self._ask()
            self._cur.execute(
                self._kv.sql.insert_many(space, replace=False),
                [[key for key, _ in chunk], [value for _, value in chunk]],
            )
            added += max(self._cur.rowcount, 0)
        if space is self._objects:
            self.written_objects.update(unknown)
        return added

    def put_absent(self, space: Space, items: list[tuple[bytes, bytes]]) -> None:
        """Store items whose keys are absent, sent with ``COMMIT``: no round trip, nothing to check.

        Guessing (the first run of a write transaction), those not cached go in with
        a plain ``INSERT``: a key that was there fails the commit, which runs again
        without guessing. Otherwise the rows go in with ``ON CONFLICT DO NOTHING``: a
        key that was there keeps its value, which for content-addressed objects is the
        same bytes.
        """
        pending = self._buffer(space)
        if space is not self._objects:
            # Only objects are buffered this way: other keyspaces keep their one-statement answer.
            self.put_many(space, items, overwrite=False)
            return
        guess = self._guess
        for key, value in items:
            if key in pending or key in self.written_objects:
                self.put(space, key, value, overwrite=False)
                continue
            value = bytes(value)
            if guess and not self._cached(key):
                # Nearly always new (a commit's tree chunks, nodes and commit): a plain insert,
                # checked by the primary key (``Statements.insert_new``), writes no
                # speculative-insertion record; a key there after all runs the transaction
                # again (``unique_violation``) with these inserts made where absent.
                self._guessed[key] = value
            else:
                self._absent[key] = value
            self.written_objects[key] = value

    def delete(self, space: Space, key: bytes) -> bool:
        """Remove ``key``; False when it was absent."""
        pending = self._buffer(space)
        if space is self._objects:
            self._dropping(key)
            if key in self._guessed:
                pending[key] = None  # inserted (and checked) at commit, then deleted after it
                return True
            if self._absent.pop(key, None) is not None:
                pending[key] = None  # it may be on the server too: deleted there at commit
                return True
        if key in pending:
            existed = pending[key] is not None
            pending[key] = None  # the server may hold it too: delete it there at commit
            return existed
        self._known.pop((space, key), None)
        self._ask()
        self._cur.execute(self._kv.sql.delete(space), [key])
        return self._cur.rowcount == 1

    def discard(self, space: Space, key: bytes) -> None:
        """Remove ``key`` at commit, with the buffered writes: no round trip, nothing to say."""
        pending = self._buffer(space)
        if space is self._objects:
            self._dropping(key)
            self._absent.pop(key, None)  # a guessed insert stays: made at commit, then deleted
        self._known.pop((space, key), None)
        pending[key] = None  # the server may hold it: deleted there at commit

    def _dropping(self, key: bytes) -> None:
        """What removing an object changes here, whatever the server holds: its bytes go from every cache."""
        self.changed_objects = True
        self.written_objects.pop(key, None)
        self._kv.cache.evict(key)

    def _sent(self, space: Space | None = None) -> list[Statement]:
        """Take the buffered writes (of one keyspace, or all) as statements to send, guessed objects first."""
        statements: list[Statement] = []
        if self._guessed and space in (None, self._objects):
            guessed, self._guessed = list(self._guessed.items()), {}
            for chunk in _chunks(guessed):
                statements.append(
                    (
                        self._kv.sql.insert_new(self._objects),
                        [[key for key, _ in chunk], [value for _, value in chunk]],
                    )
                )
        if self._absent and space in (None, self._objects):
            absent, self._absent = list(self._absent.items()), {}
            for chunk in _chunks(absent):
                statements.append(
                    (
                        self._kv.sql.insert_many(self._objects, replace=False),
                        [[key for key, _ in chunk], [value for _, value in chunk]],
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


PIPELINED_BYTES = 1 << 20
"""The most bytes of values a commit sends through libpq's pipeline directly rather than psycopg's."""


def pipelined(statements: list[Statement], prepared: set[str]) -> list[Command] | None:
    """The statements as commands for one pipelined round trip, values in binary; None when too large.

    For the round trip that commits: psycopg's pipeline, its encoding of the arrays
    and its bookkeeping cost the client about as much again as the server's work on
    a commit's few rows. Statements with parameters are prepared on the connection
    once (named from their text; ``prepared`` holds those it has), so the server
    plans none twice; values go as ``bytea[]`` arrays in the binary format, which
    the server copies rather than parses (hex literals in SQL text cost it about
    three times as much, measured).
    """
    size = 0
    commands: list[Command] = []
    preparing: set[bytes] = set()
    for query, params in statements:
        if not params:
            commands.append(Command(query.encode()))
            continue
        name, body, types = _shape(query)
        values: list[bytes] = []
        for param in params:
            if isinstance(param, int):
                values.append(_BIGINT.pack(param))
            else:
                assert isinstance(param, list)
                size += sum(map(len, param))
                values.append(_bytea_array(param))
        if size > PIPELINED_BYTES:
            return None
        fresh = name.decode() not in prepared and name not in preparing
        preparing.add(name)
        commands.append(Command(body, name, fresh, types, tuple(values)))
    return commands


_CAST = re.compile(r"%b::(bigint|bytea\[\])")
"""The parameters of the statements a commit sends, each cast to its type: arrays of bytes, counts."""

_OIDS = {"bigint": 20, "bytea[]": 1001}
_BYTEA = 17
_BIGINT = struct.Struct("!q")
_ARRAY = struct.Struct("!iiIii")
"""A one-dimensional array's header: dimensions, has-NULLs, element type, length, lower bound."""
_LENGTH = struct.Struct("!i")


@functools.lru_cache(maxsize=256)
def _shape(query: str) -> tuple[bytes, bytes, tuple[int, ...]]:
    """A statement's prepared name (from its text), its text with ``$n`` parameters, their types."""
    name = "mnemo_w" + hashlib.blake2b(query.encode(), digest_size=10).hexdigest()
    pieces = query.split("%b")
    types = tuple(_OIDS[cast] for cast in _CAST.findall(query))
    assert len(pieces) == len(types) + 1, query
    body = pieces[0] + "".join(f"${at}{after}" for at, after in enumerate(pieces[1:], start=1))
    return name.encode(), body.encode(), types


def _bytea_array(values: list[bytes]) -> bytes:
    """A ``bytea[]`` in PostgreSQL's binary format (one dimension, no NULLs; no dimension when empty)."""
    if not values:
        return _ARRAY.pack(0, 0, _BYTEA, 0, 0)[:12]
    pack = _LENGTH.pack
    return _ARRAY.pack(1, 0, _BYTEA, len(values), 1) + b"".join(
        [part for value in values for part in (pack(len(value)), value)]
    )


def first_page(space: Space, prefix: bytes, start: bytes | None, reverse: bool) -> Page:
    """The bounds of a scan's first page, as :meth:`Txn.scan` asks for it."""
    end = prefix_end(prefix)
    if reverse:
        if start is not None and (end is None or start < end):
            return Page(space, reverse, prefix or None, False, start, False)
        return Page(space, reverse, prefix or None, False, end, True)
    low = max(prefix, start) if start is not None else prefix
    return Page(space, reverse, low or None, False, end, True)


def _chunks(items: list[T]) -> Iterator[list[T]]:
    for at in range(0, len(items), BATCH_ROWS):
        yield items[at : at + BATCH_ROWS]
