"""Walking history: commits newest first, and the versions of one id.

Both stream: the commit walk reads a batch of commits per short read
transaction, and the per-id walk jumps between versions through the change
index instead of reading every commit.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from mnemosyne.errors import InvalidInput, Redacted
from mnemosyne.history.revisions import Rev, label, resolve
from mnemosyne.index.view import View
from mnemosyne.model.objects import Commit, CommitObject, Node
from mnemosyne.model.times import micros

BATCH = 256


OpenView = Callable[[], AbstractContextManager[View]]


def commits(open_view: OpenView, tip: bytes, limit: int | None = None) -> Iterator[Commit]:
    """Yield the commits reachable from ``tip``, newest record time first."""
    if limit is not None and limit <= 0:
        return
    # Record time strictly increases from parent to child, so a heap ordered by
    # it yields a topological order.
    heap: list[tuple[int, bytes]] = []
    seen = {tip}
    pending: tuple[bytes, CommitObject] | None = None
    emitted = 0
    with open_view() as view:
        first = view.commit(tip)
    pending = (tip, first)
    size = 8  # small first batches: the first commits come out at once
    while pending is not None:
        batch: list[Commit] = []
        size = min(size * 2, BATCH)
        with open_view() as view:
            while pending is not None and len(batch) < size:
                oid, obj = pending
                batch.append(Commit.from_object(oid, obj))
                pending = None
                for parent in obj.parents:
                    if parent not in seen:
                        seen.add(parent)
                        parent_obj = view.commit(parent)
                        heapq.heappush(heap, (-micros(parent_obj.record_time), parent))
                if heap:
                    _, next_oid = heapq.heappop(heap)
                    pending = (next_oid, view.commit(next_oid))
        for commit in batch:
            yield commit
            emitted += 1
            if limit is not None and emitted >= limit:
                return


def changes_of(view: View, node_id: str, tip: bytes) -> Iterator[tuple[bytes, bytes | None]]:
    """Yield ``(commit, new hash or None)`` for each change of ``node_id`` in ``tip``'s history.

    Newest first; candidates come from the change index and are kept when they
    are ancestors of ``tip``. A merge that took the value from another side is
    reported as the commit that wrote it, once: that commit's own entry, which
    comes later, is not repeated.
    """
    top = view.graph.entry(view.txn, tip).generation
    seen: set[bytes] = set()
    for _, commit, new in view.changes.versions(view.txn, node_id, max_generation=top):
        if commit in seen or not view.graph.is_ancestor(view.txn, commit, tip):
            continue
        writer = origin(view, node_id, commit, new)
        seen.add(writer)
        yield writer, new


def origin(view: View, node_id: str, commit: bytes, value: bytes | None) -> bytes:
    """The commit that actually wrote ``value`` at ``commit``.

    For a merge that took the value unchanged from another parent, that is the
    commit on the other side that wrote it (followed through nested merges).
    """
    parents = view.graph.entry(view.txn, commit).parents
    for parent in parents[1:]:
        if view.tree.get(view.commit(parent).tree, node_id) == value:
            for writer, written in changes_of(view, node_id, parent):
                if written == value:
                    return writer
                break
    return commit


def nodes(open_view: OpenView, root: bytes | None, prefix: str, after: str | None = None) -> Iterator[Node]:
    """Yield the nodes of tree ``root`` under ``prefix`` in id order, a batch per read.

    With ``after``, only the ids that sort after it (the next page of a listing).
    """
    if root is None:
        return
    while True:
        batch: list[Node] = []
        with open_view() as view:
            for key, value in view.tree.items(root, prefix=prefix, start=after or ""):
                if key == after:
                    continue
                try:
                    batch.append(view.node(value))
                except Redacted:
                    continue  # erased: listings never show it
                if len(batch) >= BATCH:
                    break
        yield from batch
        if len(batch) < BATCH:
            return
        after = batch[-1].id


def bisect(open_view: OpenView, predicate: Callable[[Commit], bool], good: Rev, bad: Rev) -> Commit:
    """Binary search of ``bad``'s first-parent line after ``good`` for where ``predicate`` turns true.

    Commits are reached through skip pointers, so only about log2(n) commits are
    read and tested.
    """
    with open_view() as view:
        good_oid = resolve(view, good)
        bad_oid = resolve(view, bad)
        low = view.graph.entry(view.txn, good_oid).depth
        high = view.graph.entry(view.txn, bad_oid).depth
        if low >= high or view.graph.first_parent_at(view.txn, bad_oid, low) != good_oid:
            raise InvalidInput(f"{label(good)} is not an ancestor of {label(bad)} along first parents")

    def at_depth(depth: int) -> Commit:
        with open_view() as view:
            oid = view.graph.first_parent_at(view.txn, bad_oid, depth)
            return Commit.from_object(oid, view.commit(oid))

    if not predicate(at_depth(high)):
        raise InvalidInput(f"the predicate does not hold at {label(bad)}: nothing to find")
    if predicate(at_depth(low)):
        raise InvalidInput(f"the predicate already holds at {label(good)}: pick an earlier good revision")
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(at_depth(middle)):
            high = middle
        else:
            low = middle
    return at_depth(high)
