"""Branches: create, delete, switch, reset, merge, ancestry, bisect, threads (see :class:`Repo`).

The code that moves branches and merges (:mod:`mnemosyne.history.branches`, and
through it the commit path) is imported by the call that runs it, so opening a
``Repo`` to read does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput, NotFound, Redacted
from mnemosyne.history import walk
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.objects import Commit
from mnemosyne.model.results import Freshness, MergeResult
from mnemosyne.model.thread_names import (
    Thread,
    checkpoint_thread_id,
    is_thread_branch,
    legacy_thread_branch,
    thread_branch_name,
    thread_id_of,
)
from mnemosyne.store.refs import BRANCH_PREFIX, check_branch_name

if TYPE_CHECKING:
    from mnemosyne.history.branches import Resolution


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

    def freshness(self, name: str) -> Freshness:
        """The work of :meth:`Repo.freshness`."""
        check_branch_name(name)

        def read(view: View) -> Freshness:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + name)
            erasures = view.objects.erasures(view.txn)
            return Freshness(tip=oid.hex() if oid is not None else None, erasures=erasures)

        return self._handle.view(read)

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
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.create(view, name, at, handle.now(), author, orphan=orphan))

    def delete(self, name: str, author: str) -> Commit | None:
        """The work of :meth:`Repo.delete_branch`."""
        check_branch_name(name)
        handle = self._handle
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.delete(view, name, handle.now(), author))

    def switch(self, name: str) -> None:
        """The work of :meth:`Repo.switch`."""
        check_branch_name(name)
        from mnemosyne.history import branches

        self._handle.write(lambda view: branches.switch(view, name))

    def reset(self, branch: str, to: Rev, author: str) -> Commit:
        """The work of :meth:`Repo.reset`."""
        check_branch_name(branch)
        handle = self._handle
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.reset(view, branch, to, handle.now(), author))

    def merge(
        self,
        source: Rev,
        into: str | None,
        resolutions: Mapping[str, Resolution] | None,
        strategy: MergeStrategy | None,
        message: str | None,
        author: str,
        allow_unrelated: bool = False,
    ) -> MergeResult:
        """The work of :meth:`Repo.merge`."""
        if into is not None:
            check_branch_name(into)
        if not isinstance(allow_unrelated, bool):
            raise InvalidInput("allow_unrelated_histories must be True or False")
        handle = self._handle

        from mnemosyne.history import branches

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
                allow_unrelated=allow_unrelated,
            )

        return handle.write(work)

    def is_ancestor(self, ancestor: Rev, descendant: Rev) -> bool:
        """The work of :meth:`Repo.is_ancestor`."""
        with self._handle.read() as view:
            return view.graph.is_ancestor(view.txn, resolve(view, ancestor), resolve(view, descendant))

    def bisect(self, predicate: Callable[[Commit], bool], good: Rev, bad: Rev) -> Commit:
        """The work of :meth:`Repo.bisect`."""
        return walk.bisect(self._handle.read, predicate, good, bad)

    # -- LangGraph threads (ADR 28) ---------------------------------------------------

    def thread_branch(self, thread_id: str) -> str:
        """The work of :meth:`Repo.thread_branch`."""
        name = thread_branch_name(thread_id)
        legacy = legacy_thread_branch(thread_id)
        if legacy is None:
            return name  # a plain id: one name, nothing to read
        with self._handle.read() as view:
            for candidate in (name, legacy):
                if view.refs.read(view.txn, BRANCH_PREFIX + candidate) is not None:
                    return candidate
        return name

    def thread(self, thread_id: str) -> Thread:
        """The work of :meth:`Repo.thread`."""
        branch = self.thread_branch(thread_id)
        with self._handle.read() as view:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + branch)
            if oid is None:
                raise NotFound(f"no thread {thread_id!r} in this tenant (its branch would be {branch})")
            commit = Commit.from_object(oid, view.commit(oid))
        return Thread(thread_id=thread_id, branch=branch, commit=commit)

    def threads(self) -> list[Thread]:
        """The work of :meth:`Repo.threads`."""
        found: list[Thread] = []
        with self._handle.read() as view:
            for name, oid in view.refs.branches(view.txn):
                if not is_thread_branch(name):
                    continue
                commit = Commit.from_object(oid, view.commit(oid))
                thread_id = thread_id_of(name)
                if thread_id is None:  # a digest: the first checkpoint on the branch names the thread
                    thread_id = _named_by_a_checkpoint(view, commit.tree, name)
                found.append(Thread(thread_id=thread_id, branch=name, commit=commit))
        return found


def _named_by_a_checkpoint(view: View, tree: str, branch: str) -> str | None:
    """The thread id the first readable checkpoint on a thread's branch keeps, if any."""
    for _, value in view.tree.items(bytes.fromhex(tree), prefix=branch + "/"):
        try:
            thread_id = checkpoint_thread_id(view.node(value).content)
        except Redacted:
            continue  # erased: its id is gone with it
        if thread_id is not None:
            return thread_id
    return None
