"""Garbage collection: remove objects no ref or retained reflog entry reaches.

An object is removed only after it has been unreachable for a grace period
(recorded the first time a collection finds it unreachable), so a writer that has
just stored objects for a commit it has not published yet never loses them.
Reflogs are kept forever by default because as-of reads depend on them;
``expire_reflog`` prunes entries older than a horizon (the newest entry of each
ref always stays, so current reads keep working).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from mnemosyne.admin.fsck import ref_tips, reindex, topological
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import TreeChunk
from mnemosyne.store.kv.base import Space
from mnemosyne.store.prolly import EMPTY
from mnemosyne.store.refs import time_key

_PENDING = b"gc-pending/"


class GcReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a collection did.

    Attributes:
        objects_removed: objects deleted (unreachable for longer than the grace period).
        bytes_removed: their stored size.
        commits_removed: how many of them were commits.
        pending: unreachable objects kept until their grace period ends.
        reflog_entries_removed: reflog entries pruned by ``expire_reflog``.
        compacted: whether the store file was rewritten without free pages.
        file_bytes_before: the store file's size before compaction (when compacted).
        file_bytes_after: its size after.
    """

    objects_removed: int
    bytes_removed: int
    commits_removed: int
    pending: int
    reflog_entries_removed: int
    compacted: bool = False
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None


def reachable(view: View) -> set[bytes]:
    """Objects reachable from refs and reflogs.

    Follows commits, their trees, nodes and contradiction records, and the claim
    trees the commit-graph index keeps for each commit.
    """
    commits = topological(view, ref_tips(view))
    live: set[bytes] = set(commits)
    live.add(codec.object_id(codec.encode(EMPTY)))
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


def expire_reflogs(view: WriteView, horizon: datetime) -> int:
    """Delete reflog entries older than ``horizon``, keeping each ref's newest entry."""
    scope = view.stores.scope
    newest: dict[bytes, bytes] = {}
    old: list[bytes] = []
    cutoff = time_key(horizon)
    for key, _ in view.txn.scan(Space.REFLOG, scope):
        # <ref name> 00 <8-byte time>: the time may itself contain zero bytes.
        name, stamp = key[len(scope) : -9], key[-8:]
        newest[name] = key
        if stamp < cutoff:
            old.append(key)
    doomed = [key for key in old if key not in set(newest.values())]
    for key in doomed:
        view.txn.delete(Space.REFLOG, key)
    return len(doomed)


def collect(view: WriteView, *, grace: timedelta, now: datetime, expire_reflog: timedelta | None) -> GcReport:
    """Remove objects unreachable for longer than ``grace``; see the module docstring."""
    txn = view.txn
    scope = view.stores.scope
    pruned = expire_reflogs(view, now - expire_reflog) if expire_reflog is not None else 0
    live = reachable(view)
    pending_prefix = _PENDING + scope
    removed = removed_bytes = removed_commits = pending = 0
    doomed: list[bytes] = []
    for key, data in txn.scan(Space.OBJECTS, scope):
        oid = key[len(scope) :]
        if oid in live:
            continue
        seen = txn.get(Space.META, pending_prefix + oid)
        first = datetime.fromtimestamp(int.from_bytes(seen, "big") / 1e6, tz=now.tzinfo) if seen else now
        if now - first >= grace:
            doomed.append(oid)
            removed_bytes += len(data)
            if data[1:10] == b"\xa8commit@1":
                removed_commits += 1
        else:
            pending += 1
            if seen is None:
                micros = int(now.timestamp() * 1e6)
                txn.put(Space.META, pending_prefix + oid, micros.to_bytes(8, "big"))
    for oid in doomed:
        txn.delete(Space.OBJECTS, scope + oid)
        txn.delete(Space.META, pending_prefix + oid)
        view.objects.forget_cached(oid)
        removed += 1
    # Objects reachable again (a ref moved back to them) leave the pending list.
    for key, _ in list(txn.scan(Space.META, pending_prefix)):
        if key[len(pending_prefix) :] in live:
            txn.delete(Space.META, key)
    if removed_commits:
        # Index entries of removed commits would name missing objects.
        reindex(view.stores, txn)
    return GcReport(
        objects_removed=removed,
        bytes_removed=removed_bytes,
        commits_removed=removed_commits,
        pending=pending,
        reflog_entries_removed=pruned,
    )
