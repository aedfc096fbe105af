"""Reaching a PostgreSQL store: its URL, its connections, its tables, and errors worded for users.

A store on PostgreSQL is a schema of one database: ``postgresql://…?schema=NAME``
(default ``mnemosyne``), holding one table per keyspace. Everything here is
plumbing for :class:`~mnemosyne.store.kv.postgres_kv.PostgresKV`; see ADR 20.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict

from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, NotFound, StorageFull
from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.location import is_postgres_url, join_url, shown_url

DEFAULT_SCHEMA = "mnemosyne"
"""The schema a URL without ``schema=`` names: the database's default store."""

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""Schema names a store may have: plain identifiers, never quoted into anything else."""

EPOCH_TABLE = "erasure_epoch"
"""One row counting transactions that deleted objects: the object cache's validity (ADR 20)."""

IDLE_CONNECTIONS = 8
"""Connections a handle keeps open between transactions (more are opened while needed)."""

SETTLE_SECONDS = 10.0
"""How long taking a connection waits for the answer to a ``ROLLBACK`` sent without waiting
(the server ended the transaction when the message came; the answer is normally there)."""

Conn = psycopg.Connection[tuple[object, ...]]
Statement = tuple[str, list[object] | None]
"""A statement and its parameters (None: none)."""

RETRYABLE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)
"""Errors after which a write transaction is run again from the start."""


@dataclass(frozen=True)
class PgLocation:
    """A parsed store URL.

    Attributes:
        conninfo: the URL libpq is given (without ``schema=``).
        schema: the store's schema.
        display: the URL as messages show it: without any password.
        host: the server as messages name it (host or socket directory, and port).
    """

    conninfo: str
    schema: str
    display: str
    host: str

    @classmethod
    def parse(cls, url: str) -> PgLocation:
        """Split ``url`` into what libpq takes and the store's schema.

        Raises:
            InvalidInput: not a PostgreSQL URL, a bad schema name, or a URL libpq refuses.
        """
        if not is_postgres_url(url):
            raise InvalidInput(f"not a PostgreSQL URL: {url.split('://', 1)[0]}://…")
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        schemas = [value for key, value in query if key == "schema"]
        schema = schemas[-1] if schemas else DEFAULT_SCHEMA
        rest = [(key, value) for key, value in query if key != "schema"]
        display = shown_url(url)
        if not SCHEMA_NAME.fullmatch(schema):
            raise InvalidInput(
                f"{schema!r} is not a store schema name ([a-z_][a-z0-9_]*, at most 63) in {display}"
            )
        conninfo = join_url(parts.scheme, parts.netloc, parts.path, rest)
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            raise InvalidInput(f"{display} is not a URL PostgreSQL accepts: {_first_line(exc)}") from None
        host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "localhost")
        port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
        return cls(
            conninfo,
            schema,
            display,
            f"{host}:{port}" if not host.startswith("/") else f"{host} (port {port})",
        )

    def table(self, name: str) -> str:
        """The quoted, schema-qualified name of one table (names are checked identifiers)."""
        return f'"{self.schema}"."{name}"'


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for prefix in ("connection is bad: ", "connection failed: "):
        text = text.removeprefix(prefix)
    return text.splitlines()[0] if text else type(exc).__name__


def mapped(
    exc: psycopg.Error, where: PgLocation, *, writing: bool = False, committing: bool = False
) -> MnemoError:
    """The library error for a database error that is not worth a retry: one line, no password.

    ``writing``: in a write transaction; ``committing``: while it was being committed
    (a lost connection then leaves the outcome unknown).
    """
    detail = _first_line(exc)
    if isinstance(exc, pgerrors.DiskFull):
        return StorageFull(
            f"the PostgreSQL server at {where.host} is out of disk ({detail}); nothing was written"
        )
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        hint = "; open it read-only to inspect it" if writing else ""
        return InvalidInput(f"permission denied on the store at {where.display}: {detail}{hint}")
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return InvalidInput(f"the PostgreSQL server at {where.host} refuses writes ({detail})")
    if isinstance(exc, pgerrors.UndefinedTable | pgerrors.InvalidSchemaName):
        return NotFound(f"no store at {where.display} ({detail})")
    if isinstance(exc, pgerrors.DataCorrupted | pgerrors.IndexCorrupted):
        return CorruptObject(
            f"the PostgreSQL server reports damage in the store at {where.display} ({detail}); "
            "export what still reads ('mnemo export'), or restore from a backup"
        )
    if isinstance(exc, psycopg.OperationalError):
        outcome = " (the write may or may not have been applied)" if committing else ""
        return MnemoError(f"lost the connection to the PostgreSQL server at {where.host}: {detail}{outcome}")
    return MnemoError(f"PostgreSQL error in the store at {where.display}: {detail}")


def unreachable(exc: psycopg.Error, where: PgLocation) -> NotFound:
    """The error for a server that cannot be reached or refuses the connection."""
    return NotFound(f"cannot reach the store at {where.display}: {_first_line(exc)}")


class Pool:
    """Open connections of one handle: each transaction takes one and gives it back.

    Connections are in autocommit mode: transactions are begun explicitly, so
    the isolation level and the first query travel in one round trip. A read
    transaction is ended by a ``ROLLBACK`` sent without waiting for its answer
    (:meth:`give_ending`): the server ends the transaction when the message
    arrives, and the answer is read when the connection is next taken, by then
    normally waiting in the socket.
    """

    def __init__(self, where: PgLocation, sync: bool) -> None:
        self.where = where
        self.sync = sync
        self.pid = os.getpid()
        self._idle: list[tuple[psycopg.Connection[tuple[object, ...]], bool]] = []
        """Idle connections, each with whether the answer to its ``ROLLBACK`` is still to be read."""
        self._lock = threading.Lock()
        self.closed = False
        _POOLS.add(self)

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """A new connection.

        Raises:
            NotFound: the server cannot be reached, refuses us, or has no such database.
        """
        # Settings travel with the connection request (no round trip of their own), after
        # any the URL gives. Columns have no statistics (see create_tables), so the planner
        # cannot tell a range holds thousands of rows: without sorts it always walks a
        # scan's page in key order off the primary key (LIMIT n reads n rows), rather
        # than reading a whole range, such as a long-lived branch's reflog, to sort it.
        # Our statements are lookups and ranges on primary keys and inserts: a generic plan
        # (made once per prepared statement) is always the right one, so none is replanned.
        # Standard strings: a '\x…' literal (as a user's URL or a tool may send) means what it says.
        settings = [
            "-c enable_sort=off",
            "-c plan_cache_mode=force_generic_plan",
            "-c standard_conforming_strings=on",
        ]
        if not self.sync:
            # A crash may lose the latest commits, never the store's consistency: as LMDB's sync=False.
            settings.append("-c synchronous_commit=off")
        given = conninfo_to_dict(self.where.conninfo).get("options")
        try:
            conn = psycopg.connect(
                self.where.conninfo,
                autocommit=True,
                application_name=f"mnemosyne:{self.where.schema}",
                connect_timeout=int(os.environ.get("PGCONNECT_TIMEOUT", "10")),
                options=" ".join([str(given), *settings] if given else settings),
            )
        except psycopg.Error as exc:
            raise unreachable(exc, self.where) from None
        return conn

    def check_open(self) -> None:
        """Refuse a closed handle, or one opened before a fork.

        Raises:
            MnemoError: the handle is closed, or was opened in the parent of this process.
        """
        if self.closed:
            raise MnemoError("the store is closed")
        if self.pid != os.getpid():
            raise MnemoError("this handle was opened before a fork: open the store again in this process")

    def take(self) -> tuple[psycopg.Connection[tuple[object, ...]], bool]:
        """A connection to use, and whether it was pooled (it may have gone stale since).

        One free to use at once comes first: one with nothing to read, or whose
        ``ROLLBACK`` has been answered. When every idle one still awaits its answer
        (reads in a tight loop), a second connection is opened once rather than
        waiting: from then on the two take turns, each answered by its next turn.
        """
        self.check_open()
        while True:
            with self._lock:
                if not self._idle:
                    break
                chosen = next((i for i, (conn, unsettled) in enumerate(self._idle) if not unsettled), None)
                answered = chosen is not None
                if chosen is None:
                    chosen = next((i for i, (conn, _) in enumerate(self._idle) if _answered(conn)), None)
                    answered = chosen is not None
                if chosen is None and len(self._idle) < 2:
                    break
                conn, unsettled = self._idle.pop(-1 if chosen is None else chosen)
            if not unsettled or _settled(conn, answered):
                return conn, True
            conn.close()  # its ROLLBACK failed or never answered: a new one serves instead
        return self.connect(), False

    def give(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Return a connection after its transaction ended (closed when broken or not needed)."""
        healthy = not conn.closed and conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self._lock:
            if healthy and not self.closed and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append((conn, False))
                return
        conn.close()

    def give_ending(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Return a connection inside a transaction, ending it with a ``ROLLBACK`` sent without waiting.

        For read transactions: nothing depends on the answer, so it costs no round
        trip. The server rolls back when the message arrives, so no snapshot or
        lock outlives the transaction; :meth:`take` reads the answer later.
        """
        if conn.closed:
            return
        pgconn = conn.pgconn
        try:
            pgconn.send_query(b"ROLLBACK")
            deadline = time.monotonic() + SETTLE_SECONDS
            while pgconn.flush():  # the socket's buffer was full: wait until it takes the rest
                left = deadline - time.monotonic()
                if not _ready(pgconn.socket, select.POLLOUT, left):
                    raise OSError("the server takes no more data")
        except (psycopg.Error, OSError):
            conn.close()
            return
        with self._lock:
            if not self.closed and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append((conn, True))
                return
        conn.close()  # the server rolls back a session that ends, answered or not

    def close(self) -> None:
        """Close every idle connection; connections in use close when given back."""
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        if self.pid == os.getpid():
            for conn, _ in idle:
                conn.close()

    def forget_after_fork(self) -> None:
        """In a forked child: make the parent's connections harmless without touching their sessions.

        Closing a connection sends the server a goodbye on the socket the parent
        shares; pointing the child's copies of the sockets at /dev/null first means
        nothing the child does (or its garbage collector) reaches the parent's sessions.
        """
        with self._lock:
            idle = self._idle
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for conn, _ in idle:
                try:
                    os.dup2(null, conn.pgconn.socket)
                except (OSError, psycopg.Error):
                    pass
        finally:
            os.close(null)
        self._lock = threading.Lock()


def _ready(fd: int, events: int, seconds: float | None = None) -> bool:
    """Wait until ``fd`` is ready for ``events`` (``select.POLLIN``/``POLLOUT``), at most ``seconds``."""
    if seconds is not None and seconds <= 0:
        return False
    poller = select.poll()  # not select.select: it cannot watch descriptors past 1023
    poller.register(fd, events | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(None if seconds is None else seconds * 1000))


def exchange(conn: psycopg.Connection[tuple[object, ...]], message: bytes) -> list[psycopg.pq.abc.PGresult]:
    """Send one simple-protocol message (statements separated by ``;``) and read every result.

    Straight through libpq: for the short messages that begin transactions, psycopg's
    cursor machinery costs about as much as the round trip itself. Results come in
    text format.

    Raises:
        psycopg.Error: the first statement that failed (its SQLSTATE's class), or a lost connection.
    """
    pgconn = conn.pgconn
    pgconn.send_query(message)
    return _answers(conn)


def exchange_bound(
    conn: psycopg.Connection[tuple[object, ...]], begin: bytes | None, name: bytes, values: Sequence[bytes]
) -> psycopg.pq.abc.PGresult:
    """Run a prepared statement, its parameters bound in binary, after ``begin`` if given: one round trip.

    The extended protocol's bind: no SQL text for the server to parse, no hex to
    spell or decode (a statement named in an ``EXECUTE``, its keys spelt in SQL,
    is parsed afresh each time). With ``begin``, the two go in libpq's pipeline
    mode, the transaction begun going on after it. Results come in text format.

    Raises:
        psycopg.Error: the first statement that failed, or a lost connection.
    """
    if begin is not None:
        return exchange_pipelined(conn, [Command(begin), Command(b"", name, values=tuple(values))], set())[-1]
    pgconn = conn.pgconn
    pgconn.send_query_prepared(name, values, param_formats=[1] * len(values))
    return _answers(conn)[-1]


def _answers(conn: psycopg.Connection[tuple[object, ...]]) -> list[psycopg.pq.abc.PGresult]:
    """Send what was queued and read every result; the first failed statement raised."""
    pgconn = conn.pgconn
    _flush(pgconn)
    results: list[psycopg.pq.abc.PGresult] = []
    while (result := _next_result(pgconn)) is not None:
        results.append(result)
    for result in results:
        if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
    return results


def _flush(pgconn: psycopg.pq.abc.PGconn) -> None:
    """Send all that is queued on ``pgconn``, waiting for the socket as needed."""
    while pgconn.flush():
        _ready(pgconn.socket, select.POLLOUT)


def _next_result(pgconn: psycopg.pq.abc.PGconn) -> psycopg.pq.abc.PGresult | None:
    """The next result of what was sent, once it is in (None: the end of a statement's results)."""
    pgconn.consume_input()
    while pgconn.is_busy():
        _ready(pgconn.socket, select.POLLIN)
        pgconn.consume_input()
    return pgconn.get_result()


def run_round(conn: Conn, statements: list[Statement]) -> list[psycopg.Cursor[tuple[object, ...]]]:
    """Send statements in one round trip (psycopg's pipeline mode); a cursor holds each one's rows.

    Raises:
        psycopg.errors.UniqueViolation: an object taken to be new was there (see ``Statements.insert_new``).
    """
    cursors = [conn.cursor(binary=True) for _ in statements]
    if len(statements) == 1:
        cursors[0].execute(statements[0][0], statements[0][1])
    else:
        with conn.pipeline():
            for cursor, (query, params) in zip(cursors, statements, strict=True):
                # Not prepared: psycopg can lose track of a statement prepared in a
                # pipeline that an error aborted ("prepared statement does not exist";
                # still so in psycopg 3.3, see test_postgres_round_trips.py).
                cursor.execute(query, params, prepare=False)
    return cursors


@dataclass(frozen=True, slots=True)
class Command:
    """One statement of a pipelined round trip (:func:`exchange_pipelined`).

    Attributes:
        text: the statement (``$n`` for its parameters when it has a ``name``).
        name: the prepared statement that runs it; empty: run as is, without parameters.
        prepare: prepare ``text`` under ``name`` first (in the same round trip).
        types: the parameters' type OIDs, for the prepare.
        values: the parameters, each in PostgreSQL's binary format.
    """

    text: bytes
    name: bytes = b""
    prepare: bool = False
    types: tuple[int, ...] = ()
    values: tuple[bytes, ...] = ()


def exchange_pipelined(
    conn: psycopg.Connection[tuple[object, ...]], commands: list[Command], prepared: set[str]
) -> list[psycopg.pq.abc.PGresult]:
    """Run statements in one round trip, their values in binary, through libpq's pipeline mode.

    Straight through libpq, as :func:`exchange`, but in the extended protocol: a
    value travels as its bytes (no hex to spell, no SQL text for the server to
    parse: about a third of the server's work on a commit's values, measured), and
    the answers say exactly which prepares ran, each added to ``prepared`` (a
    prepared statement outlives the transaction's abort).

    Returns:
        The statements' results (a prepare's among them), in order.

    Raises:
        psycopg.Error: the first statement that failed (those after it did not run), or a lost connection.
    """
    pgconn = conn.pgconn
    preparing: list[bytes | None] = []
    """Per result expected: the name a prepare made, None for a statement run."""
    pgconn.enter_pipeline_mode()
    try:
        for command in commands:
            if not command.name:
                pgconn.send_query_params(command.text, None)
                preparing.append(None)
                continue
            if command.prepare:
                pgconn.send_prepare(command.name, command.text, param_types=command.types)
                preparing.append(command.name)
            pgconn.send_query_prepared(command.name, command.values, param_formats=[1] * len(command.values))
            preparing.append(None)
        pgconn.pipeline_sync()
        _flush(pgconn)
        results: list[psycopg.pq.abc.PGresult] = []
        while True:
            result = _next_result(pgconn)
            if result is None:
                continue  # the end of one statement's results
            if result.status == psycopg.pq.ExecStatus.PIPELINE_SYNC:
                break
            results.append(result)
    finally:
        if pgconn.pipeline_status:
            try:
                pgconn.exit_pipeline_mode()
            except psycopg.Error:
                conn.close()  # answers left unread (a lost connection): it serves no one again
    failed = None
    for made, result in zip(preparing, results, strict=True):
        if made is not None and result.status == psycopg.pq.ExecStatus.COMMAND_OK:
            prepared.add(made.decode())
        if failed is None and result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            failed = result
    if failed is not None:
        raise psycopg.errors.error_from_result(failed, encoding=conn.info.encoding)
    return results


def _answered(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the answer to a ``ROLLBACK`` sent without waiting is in (or the connection broke): no wait."""
    pgconn = conn.pgconn
    try:
        pgconn.consume_input()
        return not pgconn.is_busy()
    except psycopg.Error:
        return True  # broken: taking it finds out and closes it


def _settled(conn: psycopg.Connection[tuple[object, ...]], answered: bool = False) -> bool:
    """Read the answer to a ``ROLLBACK`` sent without waiting; whether the connection is fit for use.

    ``answered``: :func:`_answered` said it is in (nothing more to take from the socket).
    """
    pgconn = conn.pgconn
    deadline = time.monotonic() + SETTLE_SECONDS
    try:
        if not answered:
            pgconn.consume_input()
        while pgconn.is_busy():
            left = deadline - time.monotonic()
            if not _ready(pgconn.socket, select.POLLIN, left):
                return False
            pgconn.consume_input()
        fine = True
        while (result := pgconn.get_result()) is not None:
            fine = fine and result.status == psycopg.pq.ExecStatus.COMMAND_OK
    except (psycopg.Error, OSError):
        return False
    return fine and pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE


_POOLS: weakref.WeakSet[Pool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool.forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _ddl(where: PgLocation) -> list[str]:
    statements = [f'CREATE SCHEMA IF NOT EXISTS "{where.schema}"']
    for space in Space:
        table = where.table(space.value)
        statements += [
            f"CREATE TABLE IF NOT EXISTS {table} (k bytea PRIMARY KEY, v bytea NOT NULL)",
            # No column statistics: ANALYZE would copy sampled values (erased ones too) into
            # pg_statistic, out of reach of erasure; lookups are by key and need none.
            # Values stored out of line uncompressed: bytea is mostly msgpack and hashes.
            f"ALTER TABLE {table} ALTER COLUMN k SET STATISTICS 0, ALTER COLUMN v SET STATISTICS 0, "
            "ALTER COLUMN v SET STORAGE EXTERNAL",
        ]
    epoch = where.table(EPOCH_TABLE)
    statements += [
        f"CREATE TABLE IF NOT EXISTS {epoch} (id smallint PRIMARY KEY, n bigint NOT NULL)",
        f"INSERT INTO {epoch} (id, n) VALUES (0, 0) ON CONFLICT (id) DO NOTHING",
    ]
    return statements


def store_exists(conn: psycopg.Connection[tuple[object, ...]], where: PgLocation) -> bool:
    """Whether the schema holds a store's tables."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
        [where.table(Space.META.value), where.table(EPOCH_TABLE)],
    ).fetchone()
    return bool(row and row[0])


def create_tables(conn: psycopg.Connection[tuple[object, ...]], where: PgLocation) -> None:
    """Create the store's schema and tables (those missing) in the open transaction."""
    for statement in _ddl(where):
        conn.execute(statement)
