"""Walking history: commits newest first, and the versions of one id.

Both stream: the commit walk reads a batch of commits per short read
transaction, and the per-id walk jumps between versions through the change
index instead of reading every commit.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

from mnemosyne.errors import InvalidInput
from mnemosyne.history.revisions import Rev, label, resolve
from mnemosyne.index.view import View
from mnemosyne.model.objects import Commit, CommitObject, Node, TreeChunk
from mnemosyne.model.times import micros
from mnemosyne.store.tree_chunking import AVERAGE_CHUNK

T = TypeVar("T")

BATCH = 256
"""Nodes (and commits) a listing reads per short read transaction."""
ID_BATCH = 4096
"""Ids a listing of ids alone reads per read transaction."""


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


def changes_of(
    view: View,
    node_id: str,
    tip: bytes,
    versions: Iterable[tuple[int, bytes, bytes | None]] | None = None,
) -> Iterator[tuple[bytes, bytes | None]]:
    """Yield ``(commit, new hash or None)`` for each change of ``node_id`` in ``tip``'s history.

    Newest first; candidates come from the change index and are kept when they
    are ancestors of ``tip``. A merge that took the value from another side is
    reported as the commit that wrote it, once: that commit's own entry, which
    comes later, is not repeated. ``versions``: the id's changes up to ``tip``'s
    generation (``ChangeIndex.versions``), read already.
    """
    if versions is None:
        top = view.graph.shape(view.txn, tip).generation
        versions = view.changes.versions(view.txn, node_id, max_generation=top)
    seen: set[bytes] = set()
    for _, commit, new in versions:
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
    parents = view.graph.shape(view.txn, commit).parents
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
    return _paged(open_view, root, prefix, after, node_batch)


def node_batch(view: View, root: bytes, prefix: str, after: str | None) -> tuple[list[Node], str | None]:
    """The next :data:`BATCH` nodes for :func:`nodes`, and the id to read on after (None: no more).

    The chunks are read a level at a time and the nodes all at once: a few round
    trips on PostgreSQL, however many chunks and nodes the batch holds.
    """
    keys, values, ended = entries(view, root, prefix, after, BATCH)
    found = view.objects.nodes(view.txn, values)
    # An erased version is left out: listings never show it.
    return [node for node in found if node is not None], None if ended else keys[-1]


def ids(open_view: OpenView, root: bytes | None, prefix: str, after: str | None = None) -> Iterator[str]:
    """Yield the ids in tree ``root`` under ``prefix`` (after ``after``) in order, reading no node."""
    return _paged(open_view, root, prefix, after, id_batch)


def _paged(
    open_view: OpenView,
    root: bytes | None,
    prefix: str,
    after: str | None,
    batch_of: Callable[[View, bytes, str, str | None], tuple[list[T], str | None]],
) -> Iterator[T]:
    """What ``batch_of`` reads, a batch per short read transaction, until it says there is no more."""
    if root is None:
        return
    while True:
        with open_view() as view:
            batch, after = batch_of(view, root, prefix, after)
        yield from batch
        if after is None:
            return


def id_batch(view: View, root: bytes, prefix: str, after: str | None) -> tuple[list[str], str | None]:
    """The next :data:`ID_BATCH` ids for :func:`ids`, and the id to read on after (None: no more)."""
    keys, _, ended = entries(view, root, prefix, after, ID_BATCH)
    return keys, None if ended else keys[-1]


def entries(
    view: View, root: bytes, prefix: str, after: str | None, count: int
) -> tuple[list[str], list[bytes], bool]:
    """Up to ``count`` entries of tree ``root`` under ``prefix`` (after ``after``), and whether that is all.

    Returns the keys and the values in key order, and True when no entry under
    ``prefix`` follows them. The chunks are read a level at a time, those not
    cached in one read per level, rather than one read each (PostgreSQL).
    """
    keys: list[str] = []
    values: list[bytes] = []
    upper = _successor(prefix)
    while True:
        # The least text after ``after`` is ``after`` + NUL: the next pass starts past it.
        begin = prefix if after is None else max(prefix, after + "\x00")
        leaves, ended = _leaves(view, root, begin, upper, count - len(keys))
        for chunk in leaves:
            found = chunk.keys
            if not found:
                continue
            i = 0 if found[0] >= begin else bisect_left(found, begin)
            j = len(found) if upper is None or found[-1] < upper else bisect_left(found, upper, i)
            keys += found[i:j]
            values += chunk.values[i:j]
            if j < len(found):
                ended = True  # past the prefix: nothing under it follows
                break
        if len(keys) > count:
            del keys[count:], values[count:]
            return keys, values, False
        if ended or len(keys) == count:
            return keys, values, ended
        after = leaves[-1].keys[-1]  # read on from the last leaf read


def _leaves(
    view: View, root: bytes, begin: str, upper: str | None, count: int
) -> tuple[list[TreeChunk], bool]:
    """The leaves holding the first (about ``count``) entries from ``begin`` on, read a level at a time.

    Returns them in order, and True when they run to the end of the tree or to ``upper``.
    """
    level = [root]
    ended = True
    load = view.objects.chunk_loader(view.txn)
    while True:
        view.objects.prefetch(view.txn, level)
        chunks = [load(oid) for oid in level]
        height = chunks[0].level
        if not height:
            return chunks, ended
        # A child at this height holds about AVERAGE_CHUNK ** height entries.
        wanted = count // AVERAGE_CHUNK**height + 2
        below: list[bytes] = []
        for chunk in chunks:
            keys = chunk.keys
            start = bisect_left(keys, begin)
            # Up to the first child that runs to ``upper`` or past: the last one needed.
            stop = len(keys) if upper is None else min(bisect_left(keys, upper, start) + 1, len(keys))
            take = min(stop, start + wanted - len(below))
            below += chunk.values[start:take]
            if take < stop:
                ended = False
                break
            if stop < len(keys) or (upper is not None and keys and keys[-1] >= upper):
                break
        if not below:
            return [], True  # ``begin`` is past the tree's last key
        level = below


def _successor(prefix: str) -> str | None:
    """The least text greater than every text starting with ``prefix``; None when there is none."""
    stripped = prefix.rstrip(chr(0x10FFFF))
    if not stripped:
        return None
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)


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
