"""Opening the store a LangGraph face works on, and closing it when the face owns it."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, cast

from mnemosyne import NotFound, Repo


def open_creating(path: str | Path, tenant: str) -> Repo:
    """The tenant ``tenant`` of the store at ``path``; the store and the tenant are created when absent."""
    try:
        return Repo.open(path, tenant=tenant, create=True)
    except NotFound:
        Repo.init(path).close()
        return Repo.open(path, tenant=tenant, create=True)


class Closes(Protocol):
    """A repo as a face that may own it sees it: something to close."""

    def close(self) -> None:
        """Release the repo."""


class OwnsItsRepo:
    """``from_path``, ``close`` and ``with`` for a face built on a repo it may own.

    The face's constructor takes the repo first and ``close_repo=``; a face opened
    by :meth:`from_path` owns its repo and closes it with itself.
    """

    repo: Closes
    close_repo: bool

    @classmethod
    def from_path(cls, path: str | Path, *, tenant: str = "default", **kwargs: Any) -> Self:
        """Open the store at ``path`` (created when absent); closing the face closes it.

        Args:
            path: the store directory or URL.
            tenant: the tenant to use (created when absent).
            **kwargs: the keyword arguments of the face's constructor.
        """
        repo = open_creating(path, tenant)
        try:
            return cast(Self, cast(Any, cls)(repo, close_repo=True, **kwargs))
        except BaseException:
            repo.close()
            raise

    def close(self) -> None:
        """Close the repo if the face owns it (:meth:`from_path` opened it)."""
        if self.close_repo:
            self.repo.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
