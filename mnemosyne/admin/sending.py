"""What the sending side of a transfer computes from one snapshot of its tenant.

The candidate commits (a walk of the commit graph from the tips down to where
the receiver's tips reach), the objects they add to their parents' trees
(descending only into chunks that differ), and the stored bytes of objects in
bounded parts. The sender in this process
(:class:`~mnemosyne.admin.transfer.LocalSender`) and a served store answering
a client both use them.
"""

from __future__ import annotations

import heapq
from contextlib import suppress

from mnemosyne.errors import MnemoError
from mnemosyne.index.build import commit_changes
from mnemosyne.index.graph import Shape
from mnemosyne.index.view import View
from mnemosyne.store.tree_diff import Change

DIFFS = 1 << 18
"""Changes a sender in this process keeps for the receiver at most (the rest it diffs itself)."""

AHEAD = 64
"""Commits whose trees planning on a remote store reads ahead together (:func:`_read_ahead`):
what they open, about 2,000 chunks, stays in the handle's cache until planned."""


def candidates(view: View, tips: list[bytes], common: list[bytes]) -> list[tuple[bytes, tuple[bytes, ...]]]:
    """``(id, parents)`` of the commits ``tips`` reach and ``common`` do not, parents first.

    A walk by generation, newest first (every child comes before its parents), of
    both sides at once: a commit reached from ``common`` marks its ancestors, and
    the walk stops once no commit left to visit is wanted. So it reads the
    commits wanted, and those of ``common``'s history down to the oldest of them:
    their shapes, which a handle keeps (a served store, or one that made the
    commits, reads none of them again; on PostgreSQL each read is a round trip).
    """
    graph, txn = view.graph, view.txn
    shapes: dict[bytes, Shape] = {}
    reached: dict[bytes, bool] = {}  # commit -> reached from common
    queue: list[tuple[int, bytes]] = []
    wanted = 0

    def visit(oid: bytes, known: bool) -> None:
        nonlocal wanted
        before = reached.get(oid)
        if before is None:
            shape = shapes[oid] = graph.shape(txn, oid)  # every commit visited is in this snapshot
            reached[oid] = known
            heapq.heappush(queue, (-shape.generation, oid))
            wanted += not known
        elif known and not before:
            reached[oid] = True
            wanted -= 1

    for oid in common:
        visit(oid, True)
    for oid in tips:
        visit(oid, False)
    found: list[tuple[bytes, tuple[bytes, ...]]] = []
    while wanted:
        _, oid = heapq.heappop(queue)
        known = reached[oid]
        parents = shapes[oid].parents
        if not known:
            wanted -= 1
            found.append((oid, parents))
        for parent in parents:
            visit(parent, known)
    found.reverse()
    return found


def plan_objects(
    view: View,
    commits: list[bytes],
    skip: set[bytes],
    diffs: dict[bytes, list[Change]] | None = None,
    queued: set[bytes] | None = None,
) -> list[bytes]:
    """Ids of the objects ``commits`` (parents first) add to their parents' trees, children first.

    ``skip``: versions never to send (erased on either side). Each commit's tree
    is compared with its parents' trees, which the receiver has or receives
    first; a chunk found in both, or queued already, is not descended into.

    ``diffs``, when given, receives what each commit with parents changed against
    its first parent (:func:`~mnemosyne.index.build.commit_changes`), up to
    :data:`DIFFS` changes in all: compared right after planning, the chunks are
    read from the cache, and a receiver in this process indexes the commits
    without reading and comparing its copies of them again.

    ``queued``, when given, holds the ids planned by earlier calls (a history
    planned in parts, parents first): they are not listed again, and this call's
    are added.
    """
    if queued is None:
        queued = set()
    objects: list[bytes] = []
    kept = sum(map(len, diffs.values())) if diffs else 0  # what earlier parts kept counts too
    for at, oid in enumerate(commits):
        if at % AHEAD == 0 and view.txn.remote:
            _read_ahead(view, commits[at : at + AHEAD])
        commit = view.commit(oid)
        bases = [view.commit(parent).tree for parent in commit.parents]
        _plan_tree(view, commit.tree, bases, skip, queued, objects)
        if diffs is not None and bases and kept < DIFFS:
            diffs[oid] = commit_changes(view, commit)
            kept += len(diffs[oid])
        for record in (*commit.contradictions, oid):
            if record not in queued:
                queued.add(record)
                objects.append(record)
    return objects


def _read_ahead(view: View, commits: list[bytes]) -> None:
    """Read what planning ``commits`` will open, all their trees a level at a time together.

    For a store whose reads wait on a server (``txn.remote``): the commits, their
    parents, the root chunks of their trees, then level by level the chunks that
    differ from the parents' and those of the parents' they stand beside, each
    level of every tree in one read, where planning each tree by itself reads
    each level of each on its own (a round trip each). It reads what
    :func:`_plan_tree` would, except that it skips nothing planned already (a
    chunk two commits share is read once all the same). Best effort: what cannot
    be read is left for planning to find and report.
    """
    txn, objects = view.txn, view.objects
    try:
        objects.prefetch(txn, commits)
        loaded = [view.commit(oid) for oid in commits]
        parents = [parent for commit in loaded for parent in commit.parents]
        objects.prefetch(txn, parents)
        pairs = [(commit.tree, [view.commit(parent).tree for parent in commit.parents]) for commit in loaded]
        objects.prefetch(txn, [root for tree, bases in pairs for root in (tree, *bases)])
        # Per tree: the chunks still to open on its side and on its parents', by level.
        walks: list[tuple[dict[int, set[bytes]], dict[int, set[bytes]]]] = []
        for tree, bases in pairs:
            if tree not in bases:
                old: dict[int, set[bytes]] = {}
                for base in bases:
                    old.setdefault(view.chunk(base).level, set()).add(base)
                walks.append(({view.chunk(tree).level: {tree}}, old))
    except MnemoError:
        return
    while walks:
        steps: list[tuple[dict[int, set[bytes]], dict[int, set[bytes]], int, set[bytes], set[bytes]]] = []
        for new, old in walks:
            level = max(new)
            top = max(old, default=-1)
            if top > level:  # the parents' side is taller: open its top first, as planning does
                steps.append((new, old, top, set(), old.pop(top)))
            else:
                ours, theirs = new.pop(level), old.pop(level, set())
                steps.append((new, old, level, ours - theirs, theirs - ours))
        objects.prefetch(txn, [oid for _, _, _, differ, opened in steps for oid in (*differ, *opened)])
        walks = []
        for new, old, level, differ, opened in steps:
            if level:
                for side, chunks in ((new, differ), (old, opened)):
                    below = side.setdefault(level - 1, set())
                    for oid in chunks:
                        with suppress(MnemoError):
                            below.update(view.chunk(oid).values)
            if new:
                walks.append((new, old))


def _plan_tree(
    view: View, root: bytes, bases: list[bytes], skip: set[bytes], queued: set[bytes], objects: list[bytes]
) -> None:
    """Queue the chunks and nodes of the tree at ``root`` that the trees at ``bases`` lack, children first.

    Level by level from the top: a chunk's level is part of its content, so a
    chunk of one tree equal to one of the other at the same level holds the same
    subtree, and only chunks that differ are opened, on both sides.
    """
    if root in queued or root in bases:
        return
    new: dict[int, dict[bytes, None]] = {}
    old: dict[int, dict[bytes, None]] = {}
    new.setdefault(view.chunk(root).level, {})[root] = None
    for base in bases:
        old.setdefault(view.chunk(base).level, {})[base] = None
    found: dict[int, list[bytes]] = {}
    nodes: list[bytes] = []
    old_nodes: set[bytes] = set()
    while new:
        level = max(new)
        while old and max(old) > level:  # above every new chunk: open them
            top = max(old)
            _open(view, old.pop(top), top, old, old_nodes)
        ours = new.pop(level)
        theirs = old.pop(level, {})
        differ = [oid for oid in ours if oid not in theirs and oid not in queued]
        _open(view, {oid: None for oid in theirs if oid not in ours}, level, old, old_nodes)
        view.objects.prefetch(view.txn, differ)
        for oid in differ:
            chunk = view.chunk(oid)
            found.setdefault(level, []).append(oid)
            if level:
                new.setdefault(level - 1, {}).update(dict.fromkeys(chunk.values))
            else:
                nodes.extend(chunk.values)
    # Set differences in C: a differing leaf lists mostly nodes the bases hold too. In
    # sorted order, so that the same trees always plan the same list.
    fresh = sorted(set(nodes).difference(queued, old_nodes, skip))
    queued.update(fresh)
    objects.extend(fresh)
    for level in sorted(found):
        for oid in found[level]:
            if oid not in queued:
                queued.add(oid)
                objects.append(oid)


def _open(
    view: View, chunks: dict[bytes, None], level: int, into: dict[int, dict[bytes, None]], nodes: set[bytes]
) -> None:
    """Replace ``chunks`` (of ``level``) by their children: chunks one level down, or nodes."""
    if not chunks:
        return
    view.objects.prefetch(view.txn, list(chunks))
    for oid in chunks:
        values = view.chunk(oid).values
        if level:
            into.setdefault(level - 1, {}).update(dict.fromkeys(values))
        else:
            nodes.update(values)


def read_some(
    view: View, ids: list[bytes], limit: int
) -> tuple[list[bytes], list[bytes | None], list[bytes]]:
    """The stored bytes of ``ids`` from the start, up to about ``limit`` bytes (at least one).

    Returns:
        ``(ids answered, their bytes or None, those of them erased here)``: a
        missing object with a redaction record was erased since it was offered.
    """
    answered: list[bytes] = []
    data: list[bytes | None] = []
    erased: list[bytes] = []
    size = 0
    for start in range(0, len(ids), 256):
        batch = ids[start : start + 256]
        for oid, raw in zip(batch, view.objects.raw_many(view.txn, batch), strict=True):
            if answered and size + len(raw or b"") > limit:
                return answered, data, erased
            answered.append(oid)
            data.append(raw)
            size += len(raw or b"")
            if raw is None and view.objects.redaction(view.txn, oid) is not None:
                erased.append(oid)
    return answered, data, erased
