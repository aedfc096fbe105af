"""The remotes' part of a :class:`~mnemosyne.api.repo.Repo`: fetch, push, pull and a served transfer's answer.

``Repo`` holds one :class:`RemoteOps` (over its store and its tenant handle)
and its ``fetch``, ``push``, ``pull``, ``remote_branches`` and
``answer_transfer`` are these methods, signatures and docstrings included
(ADR 63). The work is the porcelain's (:mod:`mnemosyne.api._remotes`, free
functions over two stores) and the served side's
(:mod:`mnemosyne.api._remote_side`); cloning, which opens a ``Repo``, is
:mod:`mnemosyne.api._repo_opening`'s. Both are imported by the call that uses
them, so that a ``Repo`` that never syncs (``mnemo show``) does not load the
transfer code (ADR 60).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mnemosyne.api._handle import Handle
from mnemosyne.api.locations import Location
from mnemosyne.api.store import Store
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.defaults import DEFAULT_AUTHOR

if TYPE_CHECKING:
    from mnemosyne.history.branches import Resolution
    from mnemosyne.model.objects import Commit
    from mnemosyne.model.reports import PullReport, SyncReport


class RemoteOps:
    """A tenant's exchanges with other stores: this store and the tenant's handle."""

    def __init__(self, store: Store, handle: Handle) -> None:
        self.store = store
        self._handle = handle

    def fetch(
        self,
        remote: str = "origin",
        *,
        store: Store | None = None,
        all_tenants: bool = False,
        author: str = DEFAULT_AUTHOR,
        token: str | None = None,
        token_file: Location | None = None,
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
                absent), not only this handle's (not over HTTP: a token reaches one).
            author: recorded in the reflog entries.
            token: for a remote served over HTTP, the token to send (a read
                token of this tenant there); default: the one in ``token_file``,
                else the one in the remote's token file. Ignored for other remotes.
            token_file: for a remote served over HTTP, a file holding the token to
                send this once, before the remote's own token file (which it does
                not replace); refused for other remotes.

        Raises:
            NotFound: no such remote, or it has no tenant of this name.
            CorruptObject: an object's bytes do not match its hash.
            AccessDenied: a served remote without a token, or one it refuses.
        """
        from mnemosyne.api import _remotes

        return _remotes.fetch(
            self.store,
            self._handle,
            remote,
            other=store,
            all_tenants=all_tenants,
            author=author,
            token=token,
            token_file=token_file,
        )

    def push(
        self,
        remote: str = "origin",
        branch: str | None = None,
        *,
        force: bool = False,
        store: Store | None = None,
        all_tenants: bool = False,
        author: str = DEFAULT_AUTHOR,
        token: str | None = None,
        token_file: Location | None = None,
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
                every tenant; tenants without commits are skipped (not over HTTP).
            author: recorded in the reflog entries on both sides (over HTTP, the
                default names the token's name there).
            token: for a remote served over HTTP, the token to send: a write
                token of this tenant there, or an admin one when the push carries
                erasures the remote lacks; default: the one in ``token_file``, else
                the one in the remote's token file.
            token_file: as for :meth:`fetch`.

        Raises:
            RefConflict: the remote's branch has commits this one lacks, without ``force``.
            NotFound: no such remote or branch.
            InvalidInput: the branch has no commits yet.
            AccessDenied: a served remote without a token, or one it refuses.
        """
        from mnemosyne.api import _remotes

        return _remotes.push(
            self.store,
            self._handle,
            remote,
            branch,
            force=force,
            other=store,
            all_tenants=all_tenants,
            author=author,
            token=token,
            token_file=token_file,
        )

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
        allow_unrelated_histories: bool = False,
        token: str | None = None,
        token_file: Location | None = None,
    ) -> PullReport:
        """:meth:`fetch`, then :meth:`merge` ``REMOTE/BRANCH`` into the current branch.

        ``branch`` defaults to the current branch's name. The merge fast-forwards
        when it can; otherwise it is three-way, reports contradictions, and with
        conflicts writes nothing (``report.merge.conflicts``; the fetch stands):
        call again with ``resolutions`` or a ``strategy``, as for :meth:`merge`.
        A remote branch with no commit in common with the current one (a
        mistyped remote: another agent's whole memory) is refused unless
        ``allow_unrelated_histories``; the current branch does not move, and
        the fetch stands (its objects and ``REMOTE/BRANCH``), as git keeps it.
        ``token`` and ``token_file`` are the fetch's (see :meth:`fetch`).

        Raises:
            NotFound: no such remote, or it has no such branch.
            MergeConflict: resolutions name ids not in conflict, or leave some unresolved.
            InvalidInput: the histories are unrelated and ``allow_unrelated_histories`` is off.
        """
        from mnemosyne.api import _remotes

        return _remotes.pull(
            self.store,
            self._handle,
            remote,
            branch,
            other=store,
            author=author,
            message=message,
            strategy=strategy,
            resolutions=resolutions,
            allow_unrelated=allow_unrelated_histories,
            token=token,
            token_file=token_file,
        )

    def remote_branches(self, remote: str | None = None) -> list[tuple[str, Commit]]:
        """Each remote-tracking ref (``REMOTE/BRANCH``, of ``remote`` only) with its commit, by name."""
        from mnemosyne.api._ref_moves import tracking_refs

        return tracking_refs(self._handle, remote)

    def answer_transfer(self, step: str, request: bytes, *, author: str = DEFAULT_AUTHOR) -> bytes:
        """This tenant's answer to one step of a fetch from it or a push to it over HTTP.

        What ``mnemo serve`` answers at ``POST /v1/tenants/{tenant}/transfer/{step}``:
        ``request`` and the answer are msgpack messages of
        :mod:`mnemosyne.admin.wire`. Steps ``offer``, ``plan`` and ``read`` send
        history (a fetch from here); ``survey``, ``lacking``, ``redact``, ``store``
        and ``finish`` receive it (a push here), each in a transaction of its
        own, objects hashed on arrival and the branch moved last by
        compare-and-swap. Deciding who may run which step is the caller's.

        Args:
            step: the step's name.
            request: its message.
            author: who moves a branch in ``finish`` when the message names nobody.

        Raises:
            InvalidInput: an unknown step, or a request that is not its message.
            NotFound: a commit or object asked for that is not here.
            RefConflict: ``finish`` would move the branch off commits it has, unforced.
            CorruptObject: an object sent does not match its hash.
        """
        from mnemosyne.api import _remote_side

        return _remote_side.answer(self._handle, step, request, author=author)
