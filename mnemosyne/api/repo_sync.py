"""The remotes part of :class:`~mnemosyne.api.repo.Repo`: clone, fetch, push and pull.

A mixin of ``Repo``'s methods that exchange history with other stores; the work
is done by :mod:`mnemosyne.api.remotes`, imported when first used.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mnemosyne.api.handle import Clock, Handle, system_clock
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.defaults import DEFAULT_AUTHOR, DEFAULT_TENANT

if TYPE_CHECKING:
    from mnemosyne.api.remotes import Remotes
    from mnemosyne.api.repo import Repo
    from mnemosyne.api.store import Location, Store
    from mnemosyne.history.branches import Resolution
    from mnemosyne.model.objects import Commit
    from mnemosyne.model.reports import PullReport, SyncReport


class RemoteMethods:
    """``Repo``'s methods for remotes (see :class:`~mnemosyne.api.repo.Repo`)."""

    store: Store
    _handle: Handle

    # -- remotes -------------------------------------------------------------

    @functools.cached_property
    def _remotes(self) -> Remotes:
        from mnemosyne.api.remotes import Remotes

        return Remotes(self.store, self._handle)

    @classmethod
    def clone(
        cls,
        source: Location | Store,
        path: Location,
        *,
        tenant: str = DEFAULT_TENANT,
        all_tenants: bool = False,
        clock: Clock = system_clock,
        author: str = DEFAULT_AUTHOR,
    ) -> Repo:
        """Create a store at ``path`` holding the history of the store at ``source``; open it.

        ``source`` becomes remote ``origin`` (an open ``Store`` may be given
        instead, for one not reachable by location: no remote is recorded then).
        Every branch arrives as a remote-tracking ref ``origin/BRANCH``, and the
        source's current branch as a local branch, checked out. One tenant is
        cloned (``tenant``), or every one with ``all_tenants``; the handle returned
        is bound to ``tenant``. A clone that fails leaves nothing at ``path``.

        Raises:
            InvalidInput: something is already at ``path``.
            NotFound: no store at ``source``, or it has no such tenant.
        """
        from mnemosyne.api import remotes

        return remotes.clone(source, path, tenant=tenant, all_tenants=all_tenants, clock=clock, author=author)

    def fetch(
        self,
        remote: str = "origin",
        *,
        store: Store | None = None,
        all_tenants: bool = False,
        author: str = DEFAULT_AUTHOR,
    ) -> SyncReport:
        """Bring in the history of a remote's branches, as remote-tracking refs ``REMOTE/BRANCH``.

        Exactly the objects this store lacks are copied, each hashed on arrival;
        redaction records come too, and what they erased there is erased here.
        Then every remote-tracking ref of ``remote`` moves to where its branch is
        (a ref whose branch is gone there is deleted), each move reflogged. Local
        branches never move: merge ``REMOTE/BRANCH``, or :meth:`pull`.

        Args:
            remote: the remote's name (see :meth:`Store.add_remote`).
            store: that remote, already open (then its location is not opened).
            all_tenants: fetch every tenant of the remote (created here when
                absent), not only this handle's.
            author: recorded in the reflog entries.

        Raises:
            NotFound: no such remote, or it has no tenant of this name.
            CorruptObject: an object's bytes do not match its hash.
        """
        return self._remotes.fetch(remote, store, all_tenants, author)

    def push(
        self,
        remote: str = "origin",
        branch: str | None = None,
        *,
        force: bool = False,
        store: Store | None = None,
        all_tenants: bool = False,
        author: str = DEFAULT_AUTHOR,
    ) -> SyncReport:
        """Send ``branch`` (default: the current one) to the remote and move its branch of that name there.

        The remote receives exactly the objects it lacks and every redaction
        record it lacks (erasing those versions' bytes there), then its branch
        moves by compare-and-swap in one transaction: only forward (a
        fast-forward) unless ``force``. Of two pushes racing to one branch,
        exactly one lands; the other raises ``RefConflict``: pull, then push again.
        The remote-tracking ref ``REMOTE/BRANCH`` here follows.

        Args:
            remote: the remote's name.
            branch: the branch to push, under the same name there.
            force: move the remote's branch even when commits leave its history.
            store: that remote, already open.
            all_tenants: push ``branch`` (default: each tenant's current branch) of
                every tenant; tenants without commits are skipped.
            author: recorded in the reflog entries on both sides.

        Raises:
            RefConflict: the remote's branch has commits this one lacks, without ``force``.
            NotFound: no such remote or branch.
            InvalidInput: the branch has no commits yet.
        """
        return self._remotes.push(remote, branch, force, store, all_tenants, author)

    def pull(
        self,
        remote: str = "origin",
        branch: str | None = None,
        *,
        store: Store | None = None,
        resolutions: Mapping[str, Resolution] | None = None,
        strategy: MergeStrategy | None = None,
        message: str | None = None,
        author: str = DEFAULT_AUTHOR,
    ) -> PullReport:
        """:meth:`fetch`, then :meth:`merge` ``REMOTE/BRANCH`` into the current branch.

        ``branch`` defaults to the current branch's name. The merge fast-forwards
        when it can; otherwise it is three-way, reports contradictions, and with
        conflicts writes nothing (``report.merge.conflicts``; the fetch stands):
        call again with ``resolutions`` or a ``strategy``, as for :meth:`merge`.

        Raises:
            NotFound: no such remote, or it has no such branch.
            MergeConflict: resolutions name ids not in conflict, or leave some unresolved.
        """
        return self._remotes.pull(remote, branch, store, author, message, strategy, resolutions)

    def remote_branches(self, remote: str | None = None) -> list[tuple[str, Commit]]:
        """Each remote-tracking ref (``REMOTE/BRANCH``, of ``remote`` only) with its commit, by name."""
        return self._remotes.tracking(remote)
