"""The refs a transfer moves: remote-tracking refs after a fetch or push, a branch a push moves.

A fetch makes ``refs/remotes/<remote>/*`` mirror the remote's branches; a push
moves the remote's branch by compare-and-swap, forward only unless forced, and
then the tracking ref that follows it. Each move is one reflog entry saying why.
"""

from __future__ import annotations

from datetime import datetime

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput, RefConflict
from mnemosyne.index.view import WriteView
from mnemosyne.model.objects import Commit
from mnemosyne.model.reports import RefUpdate
from mnemosyne.store import remote_config
from mnemosyne.store.refs import BRANCH_PREFIX, REMOTE_PREFIX, check_branch_name


def tracking_refs(handle: Handle, remote: str | None) -> list[tuple[str, Commit]]:
    """Each remote-tracking ref with its commit, by name (the work of :meth:`Repo.remote_branches`)."""
    if remote is not None:
        remote_config.check_remote_name(remote)
    with handle.read() as view:
        return [
            (short, Commit.from_object(oid, view.commit(oid)))
            for short, oid in view.refs.tracking(view.txn, remote)
        ]


def hex_of(oid: bytes | None) -> str | None:
    """A commit id as a report shows it (None: no commit)."""
    return oid.hex() if oid is not None else None


def track_one(
    view: WriteView, remote: str, branch: str, tip: bytes | None, now: datetime, author: str, why: str
) -> RefUpdate | None:
    """Move the remote-tracking ref ``remote/branch`` to ``tip`` (None: delete it); the update, if any."""
    short = f"{remote}/{branch}"
    ref = REMOTE_PREFIX + short
    old = view.refs.read(view.txn, ref)
    if old == tip:
        return None
    forced = old is not None and tip is not None and not view.graph.is_ancestor(view.txn, old, tip)
    how = "deleted there" if tip is None else "new" if old is None else "forced" if forced else "fast-forward"
    when = view.refs.next_time(view.txn, ref, now)
    view.refs.update(view.txn, ref, old, tip, when=when, author=author, reason=f"{why} {remote}: {how}")
    return RefUpdate(ref=short, old=hex_of(old), new=hex_of(tip), forced=forced)


def track(
    view: WriteView, remote: str, branches: list[tuple[str, bytes]], now: datetime, author: str
) -> list[RefUpdate]:
    """Make the remote-tracking refs of ``remote`` mirror its branches (gone ones are deleted).

    Raises:
        InvalidInput: the remote named a branch no branch may be named, or a tip
            this store does not hold (a served remote's answer is checked as input).
    """
    for name, tip in branches:
        check_branch_name(name)
        if not view.graph.has(view.txn, tip):
            raise InvalidInput(
                f"remote {remote!r} says its branch {name!r} is at {tip.hex()[:12]}, a commit it did not send"
            )
    wanted = dict(branches)
    gone = [short.split("/", 1)[1] for short, _ in view.refs.tracking(view.txn, remote)]
    moves = [(name, wanted.get(name)) for name in sorted(set(wanted) | set(gone))]
    found = [track_one(view, remote, name, tip, now, author, "fetch") for name, tip in moves]
    return [update for update in found if update is not None]


def move_branch(
    view: WriteView, remote: str, branch: str, tip: bytes, force: bool, now: datetime, author: str
) -> RefUpdate | None:
    """Move the remote's ``branch`` to ``tip`` by compare-and-swap: forward only, unless forced."""
    ref = BRANCH_PREFIX + branch
    old = view.refs.read(view.txn, ref)
    if old == tip:
        return None
    forced = old is not None and not view.graph.is_ancestor(view.txn, old, tip)
    if forced and not force:
        raise RefConflict(
            f"push to {remote} rejected: its branch {branch!r} has commits this one lacks (not a "
            f"fast-forward); pull, then push again (or push --force to drop them there)"
        )
    when = view.refs.next_time(view.txn, ref, now)
    how = "new branch" if old is None else "forced" if forced else "fast-forward"
    reason = f"push{' --force' if forced else ''}: {how}"
    view.refs.update(view.txn, ref, old, tip, when=when, author=author, reason=reason)
    return RefUpdate(ref=branch, old=hex_of(old), new=tip.hex(), forced=forced)
