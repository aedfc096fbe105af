"""When a version was last confirmed: written, or verified since, in a snapshot's ancestry.

Both come from one reverse prefix scan of the change index, each entry kept when
its commit is an ancestor of the snapshot's commit (O(log n) on first-parent
history), so staleness costs O(versions of the id), never a history walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from mnemosyne.index.view import View


def confirmed_by(view: View, node_id: str, value: bytes, tip: bytes) -> bytes | None:
    """The newest commit in ``tip``'s history that wrote or verified version ``value`` of ``node_id``.

    A merge that took the version from another side did not confirm it: the
    commit on that side that wrote (or verified) it did, and comes later in the
    scan, as it is an ancestor too. Only a version no earlier commit holds (a
    merge's own resolution) is confirmed by the merge. None when the change index
    knows no such commit (it is behind: ``reindex``).
    """
    graph = view.graph
    top = graph.shape(view.txn, tip).generation
    merged: bytes | None = None
    for _, commit, found, verified in view.changes.entries_of(view.txn, node_id, max_generation=top):
        if found != value or not graph.is_ancestor(view.txn, commit, tip):
            continue
        if not verified and len(graph.shape(view.txn, commit).parents) > 1:
            merged = merged or commit
            continue
        return commit
    return merged


def confirmed_at(view: View, node_id: str, value: bytes, tip: bytes) -> datetime | None:
    """The record time of :func:`confirmed_by`'s commit: when version ``value`` was last confirmed."""
    commit = confirmed_by(view, node_id, value, tip)
    return view.commit(commit).record_time if commit is not None else None


def verifications(
    view: View,
    node_id: str,
    tip: bytes,
    entries: Iterable[tuple[int, bytes, bytes | None, bool]] | None = None,
) -> Iterator[tuple[int, bytes, bytes]]:
    """Yield ``(generation, commit, hash verified)`` of each verification of ``node_id`` in ``tip``'s history.

    Newest first. ``entries``: the id's change-index entries up to ``tip``'s generation, read already.
    """
    if entries is None:
        top = view.graph.shape(view.txn, tip).generation
        entries = view.changes.entries_of(view.txn, node_id, max_generation=top)
    for generation, commit, value, verified in entries:
        if verified and value is not None and view.graph.is_ancestor(view.txn, commit, tip):
            yield generation, commit, value
