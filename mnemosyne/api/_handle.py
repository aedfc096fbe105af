"""A handle on one tenant: its backend, key scope, clock, and the one way to read and write.

Every part of :class:`~mnemosyne.api.repo.Repo` (the history, branch, recall,
erasure and maintenance services, and the remotes' porcelain) holds the same
handle and opens its transactions through it: reads see one snapshot with the
tenant's binding checked, and writes run the given function in one write
transaction after the same check. Private to the API: faces and users reach a
tenant through ``Repo``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from types import TracebackType
from typing import Self, TypeVar

from mnemosyne.errors import InvalidInput
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.store.kv.base import KV, ReadTxn, Space, WriteTxn
from mnemosyne.store.refs import BRANCH_PREFIX
from mnemosyne.store.tenancy import check_bound, open_tenant

Clock = Callable[[], datetime]
"""Where record time comes from: a function returning a timezone-aware datetime."""

T = TypeVar("T")


def system_clock() -> datetime:
    """The default clock: the system's time in UTC."""
    return datetime.now(UTC)


def read_clock(clock: Clock) -> datetime:
    """What ``clock`` says, in UTC.

    Raises:
        InvalidInput: the clock returned a naive datetime.
    """
    now = clock()
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise InvalidInput("the store's clock must return a timezone-aware datetime")
    return now.astimezone(UTC)


class Resource:
    """Something to close, usable as a context manager (``with Store.open(...) as store:``)."""

    def close(self) -> None:
        """Release it."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Handle:
    """One tenant of an open store: backend, scope, clock and transactions.

    Attributes:
        kv: the storage backend (shared by every handle on the store).
        tenant: the tenant's name.
        stores: the tenant's object store, refs and derived indexes.
    """

    def __init__(self, kv: KV, scope: bytes, tenant: str, clock: Clock) -> None:
        self.kv = kv
        self.tenant = tenant
        self.stores = Stores(scope)
        self._clock = clock
        # One write transaction of this tenant at a time from this handle's threads (a served
        # tenant's requests share one handle). On PostgreSQL a tenant's writes meet on the same
        # rows (the branch's ref, the recall queue): begun at once, all but one failed at COMMIT
        # and ran again, about four runs per commit with 16 connections (bench/serve_several.py).
        # Queued here, each runs once; other processes' writers still contend as before.
        self._writing = threading.RLock()

    @classmethod
    def open(cls, kv: KV, tenant: str, *, create: bool, where: str, clock: Clock) -> Handle:
        """A handle on ``tenant`` of the store on ``kv``, created first when ``create``.

        Raises:
            NotFound: no such tenant, without ``create``.
            InvalidInput: a bad tenant name.
        """
        return cls(kv, open_tenant(kv, tenant, create, where), tenant, clock)

    def on(self, kv: KV, tenant: str, *, create: bool, where: str) -> Handle:
        """A handle on ``tenant`` of another store (a remote), with the same clock.

        Raises:
            NotFound: no such tenant there, without ``create``.
        """
        return Handle.open(kv, tenant, create=create, where=where, clock=self._clock)

    @property
    def scope(self) -> bytes:
        """The tenant's key scope."""
        return self.stores.scope

    @property
    def readonly(self) -> bool:
        """Whether the backend refuses writes."""
        return self.kv.readonly

    def read(self) -> _Viewing:
        """A view of one snapshot (refused when the tenant was dropped since): a context manager."""
        return _Viewing(self)

    def view(
        self, fn: Callable[[View], T], scans: list[tuple[Space, bytes, bytes | None, bool]] | None = None
    ) -> T:
        """Run ``fn`` on a view of one snapshot, after the same check as :meth:`read`.

        ``fn`` may run more than once (no side effects): a backend may try it first
        on a cheaper snapshot (PostgreSQL: one statement, no transaction; see
        ``KV.view``). For short reads such as a ``get``, which that makes one round trip;
        ``scans`` that ``fn`` will make are read in that round trip too.
        """

        def work(txn: ReadTxn) -> T:
            check_bound(txn, self.tenant, self.stores.scope)
            return fn(View(self.stores, txn))

        return self.kv.view(work, fn.__code__, scans)

    def write(self, fn: Callable[[WriteView], T]) -> T:
        """Run ``fn`` in one write transaction (the backend may run it again: no side effects)."""

        def work(txn: WriteTxn) -> T:
            check_bound(txn, self.tenant, self.scope)
            return fn(WriteView(self.stores, txn))

        with self._writing:
            return self.kv.transact(work)

    def within(self, txn: WriteTxn) -> WriteView:
        """The tenant's view inside a write transaction the caller runs, after the same check.

        For store-wide work that touches several tenants in one transaction
        (forgetting a remote drops its tracking refs in every tenant).
        """
        check_bound(txn, self.tenant, self.scope)
        return WriteView(self.stores, txn)

    def now(self) -> datetime:
        """The store's clock, in UTC.

        Raises:
            InvalidInput: the clock returned a naive datetime.
        """
        return read_clock(self._clock)

    def tip(self, view: View, at: Rev | None, as_of: datetime | None) -> bytes | None:
        """The commit a read looks at; None for HEAD on a branch with no commits."""
        if at is None:
            if as_of is None:
                return view.refs.read(view.txn, BRANCH_PREFIX + view.refs.head_branch(view.txn))
            return resolve(view, "HEAD", as_of=as_of)
        return resolve(view, at, as_of=as_of)

    def judged_at(self, as_of: datetime | None) -> datetime:
        """The time expiry is judged at: ``as_of`` when given, else now."""
        return as_of if as_of is not None else self.now()


class _Viewing:
    """One snapshot read of a tenant: a class rather than a generator, as every read passes here."""

    __slots__ = ("_handle", "_reading")

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._reading: AbstractContextManager[ReadTxn] | None = None

    def __enter__(self) -> View:
        handle = self._handle
        reading = handle.kv.read()
        txn = reading.__enter__()
        self._reading = reading
        try:
            check_bound(txn, handle.tenant, handle.stores.scope)
        except BaseException:
            self._reading = None
            reading.__exit__(None, None, None)
            raise
        return View(handle.stores, txn)

    def __exit__(self, *exc: object) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.__exit__(None, None, None)
