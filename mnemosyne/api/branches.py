"""Branch methods of ``Repo``: create, delete, switch, reset, merge, ancestry, bisect."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mnemosyne.api.handle import RepoCore
from mnemosyne.history import branches as branching
from mnemosyne.history import walk
from mnemosyne.history.branches import MergeResult, Resolution, Strategy
from mnemosyne.history.revisions import resolve
from mnemosyne.index.view import WriteView
from mnemosyne.model.objects import Commit
from mnemosyne.store.refs import check_branch_name


class BranchMethods(RepoCore):
    """What ``Repo`` offers for branches (see :mod:`mnemosyne.history.branches`)."""

    # -- branches --------------------------------------------------------------

    @property
    def head(self) -> str:
        """The name of the current branch."""
        with self._view() as view:
            return view.refs.head_branch(view.txn)

    def branches(self) -> list[str]:
        """Names of the branches that have commits, sorted."""
        with self._view() as view:
            names = [name for name, _ in view.refs.branches(view.txn)]
        return names

    def branch_tips(self) -> list[tuple[str, Commit]]:
        """Each branch with the commit at its tip, sorted by name."""
        with self._view() as view:
            return [
                (name, Commit.from_object(oid, view.commit(oid)))
                for name, oid in view.refs.branches(view.txn)
            ]

    def branch(self, name: str, start: str | None = None, *, author: str = "unknown") -> Commit:
        """Create branch ``name`` at ``start`` (default: HEAD); return the commit it points at.

        Raises:
            InvalidInput: a bad name, or the branch exists.
            NotFound: ``start`` does not resolve (or HEAD has no commits yet).
        """
        check_branch_name(name)
        return self._write(lambda view: branching.create(view, name, start, self._now(), author))

    def delete_branch(self, name: str, *, author: str = "unknown") -> Commit:
        """Delete a branch; return the commit it pointed at. Its reflog stays (as-of reads).

        Raises:
            NotFound: no such branch.
            InvalidInput: it is the current branch.
        """
        check_branch_name(name)
        return self._write(lambda view: branching.delete(view, name, self._now(), author))

    def switch(self, name: str) -> None:
        """Make ``name`` the current branch.

        Raises:
            NotFound: no such branch.
        """
        check_branch_name(name)
        self._write(lambda view: branching.switch(view, name))

    def reset(self, branch: str, to: str, *, author: str = "unknown") -> Commit:
        """Move ``branch`` to revision ``to`` (reflogged, so as-of reads stay honest)."""
        check_branch_name(branch)
        return self._write(lambda view: branching.reset(view, branch, to, self._now(), author))

    def merge(
        self,
        source: str,
        into: str | None = None,
        resolutions: Mapping[str, Resolution] | None = None,
        strategy: Strategy | None = None,
        message: str | None = None,
        *,
        author: str = "unknown",
    ) -> MergeResult:
        """Merge revision ``source`` into branch ``into`` (default: the current branch).

        Fast-forwards when possible; otherwise merges three ways per id against the
        merge base (see :mod:`mnemosyne.history.merge` for the table). With conflicts and no
        resolutions nothing is written and ``commit`` is None: call again with
        ``resolutions`` ({id: "ours" | "theirs" | "base" | "delete" | Node}) or a
        ``strategy`` ("ours" | "theirs") for every conflict.

        Raises:
            MergeConflict: resolutions name ids not in conflict, or leave some unresolved.
            NotFound: ``source`` or ``into`` does not exist.
        """
        if into is not None:
            check_branch_name(into)

        def work(view: WriteView) -> MergeResult:
            return branching.merge(
                view,
                source=source,
                into=into or view.refs.head_branch(view.txn),
                resolutions=resolutions,
                strategy=strategy,
                message=message,
                author=author,
                now=self._now(),
            )

        return self._write(work)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether revision ``ancestor`` is reachable from ``descendant`` (or is it)."""
        with self._view() as view:
            return view.graph.is_ancestor(view.txn, resolve(view, ancestor), resolve(view, descendant))

    def bisect(self, predicate: Callable[[Commit], bool], good: str, bad: str) -> Commit:
        """The first commit after ``good`` on ``bad``'s first-parent line where ``predicate`` holds.

        Binary search: about log2(n) evaluations of ``predicate`` for n commits
        between the two, found through skip pointers without walking them all.
        ``predicate`` receives a commit; read the memory there with ``at=commit.id``.

        Raises:
            InvalidInput: ``good`` is not a first-parent ancestor of ``bad``, the
                predicate is false at ``bad`` or already true at ``good``.
        """
        return walk.bisect(self._view, predicate, good, bad)
