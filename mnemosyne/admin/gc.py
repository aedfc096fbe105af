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

from mnemosyne.errors import MnemoError
from mnemosyne.index.build import ref_tips, reindex, topological, unindex_unreachable
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Node, TreeChunk, decode_object
from mnemosyne.model.reports import GcReport
from mnemosyne.store.prolly import EMPTY_ID

_COMMIT_TAGS = (b"\xa8commit@1", b"\xa8commit@2")


def reachable(view: View) -> set[bytes]:
    """Objects reachable from refs and reflogs.

    Follows commits, their trees, nodes and contradiction records, and the claim
    trees the commit-graph index keeps for each commit.
    """
    commits = topological(view, ref_tips(view))
    live: set[bytes] = set(commits)
    live.add(EMPTY_ID)
    for oid in commits:
        commit = view.commit(oid)
        live.update(commit.contradictions)
        roots = [commit.tree]
        claims_root = view.graph.entry(view.txn, oid).claims
        if claims_root:
            roots.append(claims_root)
        for root in roots:
            _mark_tree(view, root, live)
    return live


def _lost(view: View, live: set[bytes], present: int) -> bool:
    """Whether a reachable object is neither stored (``present`` of ``live`` are) nor erased."""
    if present >= len(live):
        return False
    erased = sum(1 for oid, _ in view.objects.redactions(view.txn) if oid in live)
    return present + erased < len(live)


def _mark_tree(view: View, root: bytes, live: set[bytes]) -> None:
    stack = [root]
    while stack:
        oid = stack.pop()
        if oid in live:
            continue
        live.add(oid)
        chunk = view.objects.load(view.txn, oid)
        assert isinstance(chunk, TreeChunk)
        if chunk.level:
            stack.extend(chunk.values)
        else:
            live.update(chunk.values)


def collect(view: WriteView, *, grace: timedelta, now: datetime, expire_reflog: timedelta | None) -> GcReport:
    """Remove objects unreachable for longer than ``grace``; see the module docstring."""
    txn = view.txn
    pending_marks = view.stores.pending
    pruned = view.refs.expire(txn, now - expire_reflog) if expire_reflog is not None else 0
    live = reachable(view)
    removed_bytes = removed_commits = pending = present = 0
    doomed: list[bytes] = []
    nodes: dict[bytes, Node] = {}
    for oid, data in view.objects.scan(txn):
        if oid in live:
            present += 1
            continue
        seen = pending_marks.first_seen(txn, oid)
        if now - (seen or now) >= grace:
            doomed.append(oid)
            removed_bytes += len(data)
            if data[1:10] in _COMMIT_TAGS:
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
