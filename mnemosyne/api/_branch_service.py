"""Branches: create, delete, switch, reset, merge, ancestry, bisect, threads: :class:`Repo`'s own methods.

The code that moves branches and merges (:mod:`mnemosyne.history.branches`, and
through it the commit path) is imported by the call that runs it, so opening a
``Repo`` to read does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mnemosyne.api._handle import Handle
from mnemosyne.api._renamed_keywords import UNSET, renamed
from mnemosyne.errors import InvalidInput, NotFound, Redacted
from mnemosyne.history import walk
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.defaults import DEFAULT_AUTHOR
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
    """The branches of one tenant.

    Its public methods are :class:`Repo`'s, signatures and docstrings included
    (``Repo`` delegates to them, ADR 63); :meth:`head` is the work of
    :attr:`Repo.head`, a property.
    """

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def head(self) -> str:
        """The name of the current branch (:attr:`Repo.head`)."""
        with self._handle.read() as view:
            return view.refs.head_branch(view.txn)

    def branches(self) -> list[str]:
        """Names of the branches that have commits, sorted."""
        with self._handle.read() as view:
            return [name for name, _ in view.refs.branches(view.txn)]

    def tip(self, branch: str) -> str | None:
        """The id of the commit at ``branch``'s tip, read without reading the commit.

        A cheap check of whether a branch moved (objects never change, so what was
        read at one tip stays true while the tip stays). None when the branch does
        not exist or has no commits yet.

        Raises:
            InvalidInput: ``branch`` is not a valid branch name.
        """
        check_branch_name(branch)
        with self._handle.read() as view:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + branch)
        return oid.hex() if oid is not None else None

    def freshness(self, branch: str) -> Freshness:
        """:meth:`tip` and :meth:`erasures` together, from one snapshot in one read.

        What a face that keeps what it read checks before serving it again: while
        both are unchanged, nothing it kept has moved or been erased (one round
        trip on PostgreSQL, where asking each apart costs two).

        Raises:
            InvalidInput: ``branch`` is not a valid branch name.
        """
        check_branch_name(branch)

        def read(view: View) -> Freshness:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + branch)
            erasures = view.objects.erasures(view.txn)
            return Freshness(tip=oid.hex() if oid is not None else None, erasures=erasures)

        return self._handle.view(read)

    def branch_tips(self) -> list[tuple[str, Commit]]:
        """Each branch with the commit at its tip, sorted by name."""
        with self._handle.read() as view:
            return [
                (name, Commit.from_object(oid, view.commit(oid)))
                for name, oid in view.refs.branches(view.txn)
            ]

    def branch(
        self,
        name: str,
        *,
        at: Rev | None = None,
        orphan: bool = False,
        author: str = DEFAULT_AUTHOR,
        start: Rev | None = UNSET,
    ) -> Commit | None:
        """Create branch ``name`` at revision ``at`` (default: HEAD); return the commit it starts at.

        From HEAD on a branch with no commits yet, the new branch has none either
        (as ``git switch -c`` does) and None is returned: the first commit on it
        starts it. An ``orphan`` branch has no commits whatever HEAD has (as
        ``git switch --orphan``): its first commit starts an unrelated history.
        ``start=`` is the old name of ``at=``.

        Raises:
            InvalidInput: a bad name, the branch exists, or ``orphan`` with ``at``.
            NotFound: ``at`` does not resolve.
        """
        at = renamed("start", "at", start, at)
        check_branch_name(name)
        handle = self._handle
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.create(view, name, at, handle.now(), author, orphan=orphan))

    def delete_branch(self, name: str, *, author: str = DEFAULT_AUTHOR) -> Commit | None:
        """Delete a branch; return the commit it pointed at (None: it had none). Its reflog stays.

        Raises:
            NotFound: no such branch.
            InvalidInput: it is the current branch.
        """
        check_branch_name(name)
        handle = self._handle
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.delete(view, name, handle.now(), author))

    def switch(self, name: str) -> None:
        """Make ``name`` the current branch.

        Raises:
            NotFound: no such branch.
        """
        check_branch_name(name)
        from mnemosyne.history import branches

        self._handle.write(lambda view: branches.switch(view, name))

    def reset(self, branch: str, to: Rev, *, author: str = DEFAULT_AUTHOR) -> Commit:
        """Move ``branch`` to revision ``to`` (reflogged, so as-of reads stay honest)."""
        check_branch_name(branch)
        handle = self._handle
        from mnemosyne.history import branches

        return handle.write(lambda view: branches.reset(view, branch, to, handle.now(), author))

    def merge(
        self,
        source: Rev,
        *,
        into: str | None = None,
        resolutions: Mapping[str, Resolution] | None = None,
        strategy: MergeStrategy | None = None,
        message: str | None = None,
        author: str = DEFAULT_AUTHOR,
        allow_unrelated_histories: bool = False,
    ) -> MergeResult:
        """Merge revision ``source`` into branch ``into`` (default: the current branch).

        Fast-forwards when possible; otherwise merges three ways per id against the
        merge base (see :mod:`mnemosyne.history.merge` for the table). With conflicts
        and no resolutions nothing is written and ``commit`` is None: call again with
        ``resolutions`` ({id: "ours" | "theirs" | "base" | "delete" | Node}) or a
        ``strategy`` ("ours" | "theirs") for every conflict.

        Histories with no commit in common (another store's, an orphan branch's)
        are refused, as git refuses them, unless ``allow_unrelated_histories``:
        then each id is merged against an empty base. A branch with no commits
        yet is not unrelated to anything: it fast-forwards.

        Raises:
            MergeConflict: resolutions name ids not in conflict, or leave some unresolved.
            NotFound: ``source`` or ``into`` does not exist.
            InvalidInput: the histories are unrelated and ``allow_unrelated_histories`` is off.
        """
        allow_unrelated = allow_unrelated_histories
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
        """Whether revision ``ancestor`` is reachable from ``descendant`` (or is it)."""
        with self._handle.read() as view:
            return view.graph.is_ancestor(view.txn, resolve(view, ancestor), resolve(view, descendant))

    def bisect(self, predicate: Callable[[Commit], bool], good: Rev, bad: Rev) -> Commit:
        """The first commit after ``good`` on ``bad``'s first-parent line where ``predicate`` holds.

        Binary search: about log2(n) evaluations of ``predicate`` for n commits
        between the two, found through skip pointers without walking them all.
        ``predicate`` receives a commit; read the memory there with ``at=commit``.

        Raises:
            InvalidInput: ``good`` is not a first-parent ancestor of ``bad``, the
                predicate is false at ``bad`` or already true at ``good``.
        """
        return walk.bisect(self._handle.read, predicate, good, bad)

    # -- LangGraph threads (ADR 28) ---------------------------------------------------

    def thread_branch(self, thread_id: str) -> str:
        """The branch that holds the LangGraph thread ``thread_id``, or that would.

        ``threads/`` and the id when it is plain (``chat-7``), else the id escaped,
        readable and reversible (``user@example.com`` → ``threads/_user_40example.com``;
        see docs/langgraph.md, "Finding a thread"). A thread written before that
        naming (``threads/_`` and a digest of the id) is found under its old name,
        and stays there. A plain id is answered without reading the store.

        Raises:
            InvalidInput: ``thread_id`` is not text.
        """
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
        """The LangGraph thread ``thread_id``: its branch and the commit at its tip.

        Raises:
            NotFound: the tenant has no such thread (the message names the branch it would have).
            InvalidInput: ``thread_id`` is not text.
        """
        branch = self.thread_branch(thread_id)
        with self._handle.read() as view:
            oid = view.refs.read(view.txn, BRANCH_PREFIX + branch)
            if oid is None:
                raise NotFound(f"no thread {thread_id!r} in this tenant (its branch would be {branch})")
            commit = Commit.from_object(oid, view.commit(oid))
        return Thread(thread_id=thread_id, branch=branch, commit=commit)

    def threads(self) -> list[Thread]:
        """Every LangGraph thread of the tenant (a branch ``threads/<segment>``), by branch name.

        Each with its id: read back from the branch name, or, when the name holds a
        digest (an id escaped past 80 characters, or a name from before the
        readable naming), from a checkpoint on the branch.
        """
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
