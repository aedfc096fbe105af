"""The plumbing every ``Repo`` method stands on: the handle, its clock, transactions.

Kept apart so the API can be split by concept (``Repo`` in :mod:`mnemosyne.api.repo`,
recall in :mod:`mnemosyne.api.recall`, forgetting in :mod:`mnemosyne.api.erasure`)
without any of them reaching into the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from mnemosyne.errors import InvalidInput
from mnemosyne.history.revisions import resolve
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.index import VectorCache
from mnemosyne.store.kv.base import KV, WriteTxn
from mnemosyne.store.refs import BRANCH_PREFIX
from mnemosyne.store.tenancy import check_bound

Clock = Callable[[], datetime]
T = TypeVar("T")


def aware(when: datetime, name: str = "as_of") -> datetime:
    """``when`` in UTC; refuse anything but a timezone-aware datetime (``name``: the argument)."""
    if not isinstance(when, datetime) or when.tzinfo is None:
        raise InvalidInput(f"{name} must be a timezone-aware datetime")
    return when.astimezone(UTC)


class RepoCore:
    """A handle on one tenant of a store: storage, clock and transactions."""

    def __init__(self, kv: KV, scope: bytes, tenant: str, clock: Clock, path: Path | None) -> None:
        """Use :meth:`init`, :meth:`open` or :meth:`in_memory` instead."""
        self._kv = kv
        self._scope = scope
        self._stores = Stores(scope)
        self._clock = clock
        self.tenant = tenant
        self.path = path
        self._embedder: Embedder | str | None = "config"
        self._vectors = VectorCache()

    def close(self) -> None:
        """Release the store; the handle cannot be used afterwards."""
        self._kv.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        return f"<Repo {where} tenant={self.tenant}>"

    @property
    def readonly(self) -> bool:
        """Whether the handle refuses writes."""
        return self._kv.readonly

    @property
    def kv(self) -> KV:
        """The storage backend (for maintenance tools and benchmarks)."""
        return self._kv

    @contextmanager
    def _view(self) -> Iterator[View]:
        with self._kv.read() as txn:
            check_bound(txn, self.tenant, self._scope)
            yield View(self._stores, txn)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise InvalidInput("the store's clock returned a naive datetime")
        return now.astimezone(UTC)

    def _tip(self, view: View, at: str | None, as_of: datetime | None) -> bytes | None:
        """The commit a read looks at; None for HEAD on a branch with no commits."""
        if at is None:
            if as_of is None:
                return view.refs.read(view.txn, BRANCH_PREFIX + view.refs.head_branch(view.txn))
            return resolve(view, "HEAD", as_of=aware(as_of))
        return resolve(view, at, as_of=aware(as_of) if as_of is not None else None)

    def _judged_at(self, as_of: datetime | None) -> datetime:
        """The time expiry is judged at: ``as_of`` when given, else now."""
        return aware(as_of) if as_of is not None else self._now()

    def _write(self, fn: Callable[[WriteView], T]) -> T:
        def work(txn: WriteTxn) -> T:
            check_bound(txn, self.tenant, self._scope)
            return fn(WriteView(self._stores, txn))

        return self._kv.transact(work)
