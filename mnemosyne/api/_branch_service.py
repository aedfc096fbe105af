"""Branches: create, delete, switch, reset, merge, ancestry and bisect (see :class:`Repo`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mnemosyne.api._handle import Handle
from mnemosyne.history import branches, walk
from mnemosyne.history.branches import Resolution
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index.view import WriteView
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.objects import Commit
from mnemosyne.model.results import MergeResult
from mnemosyne.store.refs import BRANCH_PREFIX, check_branch_name


class BranchService:
    """The branches of one tenant (see :class:`Repo` for each call)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def head(self) -> str:
        """The work of :attr:`Repo.head`."""
        with self._handle.read() as view:
            return view.refs.head_branch(view.txn)

    def names(self) -> list[str]:
        """The work of :meth:`Repo.branches`."""
        with self._handle.read() as view:
            return [name for name, _ in view.refs.branches(view.txn)]

    def tip(self, name: str) -> str | None:
        """The work of :meth:`Repo.tip`."""
        check_branch_name(name)
        with self._handle.read() as view:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + name)
        return oid.hex() if oid is not None else None

    def tips(self) -> list[tuple[str, Commit]]:
        """The work of :meth:`Repo.branch_tips`."""
        with self._handle.read() as view:
            return [
                (name, Commit.from_object(oid, view.commit(oid)))
                for name, oid in view.refs.branches(view.txn)
            ]

    def create(self, name: str, at: Rev | None, author: str, orphan: bool) -> Commit | None:
        """The work of :meth:`Repo.branch`."""
        check_branch_name(name)
        handle = self._handle
        return handle.write(lambda view: branches.create(view, name, at, handle.now(), author, orphan=orphan))

    def delete(self, name: str, author: str) -> Commit | None:
        """The work of :meth:`Repo.delete_branch`."""
        check_branch_name(name)
        handle = self._handle
        return handle.write(lambda view: branches.delete(view, name, handle.now(), author))

    def switch(self, name: str) -> None:
        """The work of :meth:`Repo.switch`."""
        check_branch_name(name)
        self._handle.write(lambda view: branches.switch(view, name))

    def reset(self, branch: str, to: Rev, author: str) -> Commit:
        """The work of :meth:`Repo.reset`."""
        check_branch_name(branch)
        handle = self._handle
        return handle.write(lambda view: branches.reset(view, branch, to, handle.now(), author))

    def merge(
        self,
        source: Rev,
        into: str | None,
        resolutions: Mapping[str, Resolution] | None,
        strategy: MergeStrategy | None,
        message: str | None,
        author: str,
    ) -> MergeResult:
        """The work of :meth:`Repo.merge`."""
        if into is not None:
            check_branch_name(into)
        handle = self._handle

        def work(view: WriteView) -> MergeResult:
            return branches.merge(
                view,
                source=source,
                into=into or view.refs.head_branch(view.txn),
                resolutions=resolutions,
                strategy=strategy,
                message=message,
                author=author,
                now=handle.now(),
            )

        return handle.write(work)

    def is_ancestor(self, ancestor: Rev, descendant: Rev) -> bool:
        """The work of :meth:`Repo.is_ancestor`."""
        with self._handle.read() as view:
            return view.graph.is_ancestor(view.txn, resolve(view, ancestor), resolve(view, descendant))

    def bisect(self, predicate: Callable[[Commit], bool], good: Rev, bad: Rev) -> Commit:
        """The work of :meth:`Repo.bisect`."""
        return walk.bisect(self._handle.read, predicate, good, bad)
