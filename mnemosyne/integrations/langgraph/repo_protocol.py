"""What the LangGraph faces need of a repo: the narrow protocols a local ``Repo`` and a served one both meet.

``MnemosyneSaver`` and ``MnemosyneStore`` work on a :class:`~mnemosyne.Repo` or on
a served store's handle (``mnemosyne.connect(url, token=...)``, a
:class:`~mnemosyne.integrations.client.ServedRepo`) alike: each names here the
calls it makes, with the arguments it passes, and nothing else, so neither asks
which one it was given (ADR 68). What a call costs differs (a lookup in memory, a
PostgreSQL round trip, an HTTP request); the faces are written so that the count
of calls per LangGraph call is small and fixed, and :func:`nodes_at` is how they
read several nodes at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mnemosyne import Commit, CommitResult, ForgetReport, Freshness, History, Hit, Node, Version

if TYPE_CHECKING:
    from mnemosyne import Repo
    from mnemosyne.integrations.client import ServedRepo

Rev = str | Commit
"""A revision: its text, or a :class:`Commit`."""


class Listing(Protocol):
    """The ids of a snapshot in order, and the commit listed (``Repo.ids``)."""

    commit: Commit | None

    def __iter__(self) -> Iterator[str]:
        """The ids."""

    def __next__(self) -> str:
        """The next id."""


@runtime_checkable
class ThreadRepo(Protocol):
    """What :class:`~mnemosyne.integrations.langgraph.saver.MnemosyneSaver` calls on its repo."""

    def thread_branch(self, thread_id: str) -> str:
        """The branch that holds a thread, or would (``Repo.thread_branch``)."""

    def tip(self, branch: str) -> str | None:
        """The id of a branch's tip, None without commits (``Repo.tip``)."""

    def freshness(self, branch: str) -> Freshness:
        """A branch's tip and the erasure count, in one read (``Repo.freshness``)."""

    def branches(self) -> list[str]:
        """The branches that have commits (``Repo.branches``)."""

    def get(self, id: str, *, at: Rev | None = None) -> Node | None:
        """One node in a snapshot, None when absent (``Repo.get``)."""

    def nodes(self, *, at: Rev | None = None, prefix: str | None = None) -> Iterator[Node]:
        """The nodes of a snapshot, by id (``Repo.nodes``)."""

    def histories(
        self, ids: Iterable[str], *, at: Rev | None = None, limit: int | None = None
    ) -> dict[str, History]:
        """Several ids of one snapshot with their histories, in one read (``Repo.histories``)."""

    def history(self, id: str, *, at: Rev | None = None, limit: int | None = None) -> list[Version]:
        """The versions of an id, newest first (``Repo.history``); ``limit=1``: the commit that wrote it."""

    def commit(
        self,
        put: Iterable[Node] = (),
        delete: Iterable[str] = (),
        *,
        message: str = "",
        author: str = ...,
        branch: str | None = None,
        parent: Rev | None = None,
    ) -> CommitResult:
        """One atomic commit (``Repo.commit``)."""

    def branch(
        self, name: str, *, at: Rev | None = None, orphan: bool = False, author: str = ...
    ) -> Commit | None:
        """Create a branch (``Repo.branch``)."""

    def delete_branch(self, name: str, *, author: str = ...) -> Commit | None:
        """Delete a branch (``Repo.delete_branch``)."""

    def forget(
        self, id: str | Sequence[str], reason: str, *, author: str = ..., version: str | None = None
    ) -> ForgetReport:
        """Erase every version of ids, or one version of an id (``Repo.forget``)."""

    def close(self) -> None:
        """Release the repo."""


@runtime_checkable
class ItemRepo(Protocol):
    """What :class:`~mnemosyne.integrations.langgraph.store.MnemosyneStore` calls on its repo."""

    @property
    def readonly(self) -> bool:
        """Whether writes are refused."""

    def now(self) -> datetime:
        """The clock expiry is reckoned by (``Repo.now``)."""

    def use_embedder(self, embedder: Any) -> None:
        """Set the embedder searches use (``Repo.use_embedder``)."""

    def branches(self) -> list[str]:
        """The branches that have commits (``Repo.branches``)."""

    def resolve(self, rev: Rev = "HEAD", *, as_of: Any = None) -> Commit:
        """The commit a revision names (``Repo.resolve``)."""

    def get(self, id: str, *, at: Rev | None = None, as_of: Any = None) -> Node | None:
        """One node in a snapshot, None when absent (``Repo.get``)."""

    def ids(self, *, at: Rev | None = None, prefix: str | None = None) -> Listing:
        """The ids of a snapshot and the commit listed (``Repo.ids``)."""

    def nodes(
        self,
        *,
        at: Rev | None = None,
        prefix: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
    ) -> Iterator[Node]:
        """The nodes of a snapshot, by id (``Repo.nodes``)."""

    def histories(
        self,
        ids: Iterable[str],
        *,
        at: Rev | None = None,
        limit: int | None = None,
        include_expired: bool = False,
    ) -> dict[str, History]:
        """Several ids of one snapshot with their histories, in one read (``Repo.histories``)."""

    def history(self, id: str, *, at: Rev | None = None) -> list[Version]:
        """Every version of an id, newest first (``Repo.history``)."""

    def search(
        self,
        query: str,
        *,
        k: int = ...,
        at: Rev | None = None,
        prefix: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
    ) -> list[Hit]:
        """Recall by words and meaning (``Repo.search``)."""

    def commit(
        self,
        put: Iterable[Node] = (),
        delete: Iterable[str] = (),
        *,
        message: str = "",
        author: str = ...,
        branch: str | None = None,
        parent: Rev | None = None,
        meta: dict[str, Any] | None = None,
    ) -> CommitResult:
        """One atomic commit (``Repo.commit``)."""

    def forget(self, id: str | Sequence[str], reason: str, *, author: str = ...) -> ForgetReport:
        """Erase every version of ids (``Repo.forget``)."""

    def close(self) -> None:
        """Release the repo."""


def nodes_at(repo: ThreadRepo, ids: Iterable[str], at: Rev) -> dict[str, Node | None]:
    """Each of ``ids`` as the snapshot ``at`` holds it, in one read (None: absent, expired or erased).

    ``Repo.histories`` with no versions: one lookup locally, one round trip on
    PostgreSQL or over HTTP, for any number of ids.
    """
    return {node_id: found.node for node_id, found in repo.histories(ids, at=at, limit=0).items()}


if TYPE_CHECKING:  # mypy holds both kinds of repo to both protocols here

    def _both_meet_them(local: Repo, served: ServedRepo) -> tuple[ThreadRepo, ThreadRepo, ItemRepo, ItemRepo]:
        return local, served, local, served
