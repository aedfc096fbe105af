"""Garbage collection: remove objects no ref or retained reflog entry reaches.

An object is removed only after it has been unreachable for a grace period
(recorded the first time a collection finds it unreachable), so a writer that has
just stored objects for a commit it has not published yet never loses them.
Reflogs are kept forever by default because as-of reads depend on them;
``expire_reflog`` prunes entries older than a horizon (the newest entry of each
ref always stays, so current reads keep working).

The derived indexes follow in the same transaction, at a cost in what is removed:
the commit graph and change index drop the entries of every commit no longer
reached (:func:`~mnemosyne.index.build.unindex_unreachable`), the recall indexes
those of the versions collected.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice

from mnemosyne.errors import MnemoError
from mnemosyne.index.build import ref_tips, reindex, topological, unindex_unreachable
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Node, TreeChunk, decode_object
from mnemosyne.model.reports import GcReport
from mnemosyne.store.prolly import EMPTY_ID

_READ = 1024
"""Tree chunks (and commits' graph entries) marking reads at a time."""


def reachable(view: View) -> set[bytes]:
    """Objects reachable from refs and reflogs.

    Follows commits, their trees, nodes and contradiction records, and the claim
    trees the commit-graph index keeps for each commit.
    """
    commits = topological(view, ref_tips(view))
    live: set[bytes] = set(commits)
    live.add(EMPTY_ID)
    roots: list[bytes] = []
    for start in range(0, len(commits), _READ):
        part = commits[start : start + _READ]
        for oid, entry in zip(part, view.graph.entries_of(view.txn, part), strict=True):
            commit = view.commit(oid)
            live.update(commit.contradictions)
            roots.append(commit.tree)
            if entry.claims:
                roots.append(entry.claims)
    _mark_trees(view, roots, live)
    return live


def _lost(view: View, live: set[bytes], present: int) -> bool:
    """Whether a reachable object is neither stored (``present`` of ``live`` are) nor erased."""
    if present >= len(live):
        return False
    erased = sum(1 for oid, _ in view.objects.redactions(view.txn) if oid in live)
    return present + erased < len(live)


def _mark_trees(view: View, roots: list[bytes], live: set[bytes]) -> None:
    """Mark every chunk and node of the trees at ``roots``, all the trees a level at a time.

    The chunks of a level not marked yet are read :data:`_READ` at a time: on
    PostgreSQL a round trip for each such part, where it was one for each chunk.
    """
    level = [root for root in dict.fromkeys(roots) if root not in live]
    while level:
        live.update(level)
        below: list[bytes] = []
        for start in range(0, len(level), _READ):
            part = level[start : start + _READ]
            view.objects.prefetch(view.txn, part)
            for oid in part:
                chunk = view.objects.load(view.txn, oid)  # verified; a missing chunk stops gc
                assert isinstance(chunk, TreeChunk)
                if chunk.level:
                    below.extend(child for child in chunk.values if child not in live)
                else:
                    live.update(chunk.values)
        level = list(dict.fromkeys(below))


def collect(view: WriteView, *, grace: timedelta, now: datetime, expire_reflog: timedelta | None) -> GcReport:
    """Remove objects unreachable for longer than ``grace``; see the module docstring."""
    txn = view.txn
    pending_marks = view.stores.pending
    pruned = view.refs.expire(txn, now - expire_reflog) if expire_reflog is not None else 0
    live = reachable(view)
    removed_bytes = removed_commits = pending = present = 0
    doomed: list[bytes] = []
    nodes: dict[bytes, Node] = {}
    scan = view.objects.scan(txn)
    while part := list(islice(scan, _READ)):
        unreached = [(oid, data) for oid, data in part if oid not in live]
        present += len(part) - len(unreached)
        # When each was first found unreachable, read at once (on PostgreSQL a round trip each).
        found = pending_marks.first_seen_many(txn, [oid for oid, _ in unreached])
        for (oid, data), seen in zip(unreached, found, strict=True):
            if now - (seen or now) >= grace:
                doomed.append(oid)
                removed_bytes += len(data)
                if data[1:10] in codec.COMMIT_TAGS:
                    removed_commits += 1
                elif data[1:8] == codec.NODE_TAG and codec.object_id(data) == oid:
                    node = decode_object(data, oid)
                    if isinstance(node, Node):
                        nodes[oid] = node
            else:
                pending += 1
                if seen is None:
                    pending_marks.mark(txn, oid, now)
    full_rebuild = False
    if removed_commits:
        # Entries of removed commits would name missing objects: drop them while the
        # objects are still there to say which. A reachable object neither stored nor
        # erased (lost) keeps the full rebuild, whose claim index reads it and reports
        # it as before; so does a dropped commit that cannot be read back.
        full_rebuild = _lost(view, live, present)
        if not full_rebuild:
            try:
                unindex_unreachable(view, live)
            except MnemoError:
                full_rebuild = True
    if nodes:
        # The recall indexes forget the versions collected, as for erasure.
        from mnemosyne.recall.recall_index import RecallIndex  # numpy: loaded only when needed

        recall = RecallIndex(view.stores.scope)
        for oid, node in nodes.items():
            recall.unindex(view, oid, node)
        recall.queue.drop(txn, list(nodes))
    for oid in doomed:
        view.objects.remove(txn, oid)
        pending_marks.unmark(txn, oid)
    # Objects reachable again (a ref moved back to them) leave the pending list.
    for oid in list(pending_marks.marked(txn)):
        if oid in live:
            pending_marks.unmark(txn, oid)
    if full_rebuild:
        # Whether any stored object may hold a claim (the test fsck makes): when none
        # does, the rebuild skips the claim index rather than read back every node of
        # every commit to find none. Asked here, not in the scan above: this is rare.
        claims_possible = present < len(live) or any(
            codec.CLAIM_TAG in data for _, data in view.objects.scan(txn)
        )
        reindex(view, claims_possible=claims_possible)
    return GcReport(
        objects_removed=len(doomed),
        bytes_removed=removed_bytes,
        commits_removed=removed_commits,
        pending=pending,
        reflog_entries_removed=pruned,
    )
