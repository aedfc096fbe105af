"""Derived indexes: written for each commit in its own transaction, and rebuilt from the commits.

One function (:func:`index_commit`) serves both the commit path and rebuilding
(``reindex``), so the two can never disagree. The commit graph, the change
index and the claim index can always be rebuilt from the commits that refs and
retained reflog entries reach; :func:`rebuild` does it into scratch space, so
``fsck`` can compare without writing, and :func:`reindex` writes the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mnemosyne.index import claims
from mnemosyne.index.graph import GraphEntry
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.model.objects import CommitObject, ContradictionObject, Node, verified_ids
from mnemosyne.store.kv.base import WriteTxn
from mnemosyne.store.kv.overlay import Overlay
from mnemosyne.store.prolly import Load, Tree
from mnemosyne.store.tree_diff import Change, TreeDiff


def still_open(view: View, tree: bytes, oid: bytes) -> bool:
    """Whether both claims of a contradiction record are still in the snapshot unchanged."""
    obj = view.objects.load(view.txn, oid)
    assert isinstance(obj, ContradictionObject)
    return all(view.tree.get(tree, node_id) == value for node_id, value in obj.claims)


def index_commit(
    view: WriteView,
    oid: bytes,
    commit: CommitObject,
    changes: Sequence[tuple[str, bytes | None, bytes | None]],
    written: dict[bytes, Node],
    claims_possible: bool = True,
) -> GraphEntry:
    """Add a commit to the commit graph, change index (its changes and verifications) and claim index.

    Args:
        view: where to write.
        oid: the commit's id.
        commit: the commit.
        changes: ``(id, old hash, new hash)`` against the first parent.
        written: nodes the commit wrote, by hash (spares reading them back).
        claims_possible: False when the caller knows the tenant stores no claim at all.
    """
    parents = [view.graph.entry(view.txn, p) for p in commit.parents]
    parent_claims = parents[0].claims if parents else b""
    claim_root = claims.update(view, parent_claims, changes, written) if claims_possible else parent_claims
    carried = {record for parent in parents for record in parent.open} | set(commit.contradictions)
    open_records = tuple(sorted(r for r in carried if still_open(view, commit.tree, r)))
    entry = view.graph.add(view.txn, oid, commit.parents, claim_root, open_records, parents)
    view.changes.add_changes(view.txn, entry.generation, oid, changes)
    if verifying := verified_ids(commit):
        changed = {node_id for node_id, _, _ in changes}
        confirmed = [
            (node_id, value)
            for node_id in verifying
            # A write is itself a confirmation; an id gone from the tree has nothing to confirm.
            if node_id not in changed and (value := view.tree.get(commit.tree, node_id)) is not None
        ]
        view.changes.add_verified(view.txn, entry.generation, oid, confirmed)
    return entry


def ref_tips(view: View) -> set[bytes]:
    """Every commit a branch or a retained reflog entry points at, in this tenant.

    An entry's ``old`` is the ``new`` of the entry before it, so the ``new`` sides
    name everything; once the earlier entries expire, history they alone reached
    is no longer kept.
    """
    tips = {oid for _, oid in view.refs.branches(view.txn)}
    tips.update(entry.new for entry in view.refs.every_entry(view.txn) if entry.new)
    return tips


def topological(view: View, tips: set[bytes]) -> list[bytes]:
    """The commits reachable from ``tips``, parents before children."""
    order: list[bytes] = []
    done: set[bytes] = set()
    for tip in sorted(tips):
        stack: list[tuple[bytes, bool]] = [(tip, False)]
        while stack:
            oid, expanded = stack.pop()
            if oid in done:
                continue
            if expanded:
                done.add(oid)
                order.append(oid)
                continue
            stack.append((oid, True))
            for parent in view.commit(oid).parents:
                if parent not in done:
                    stack.append((parent, False))
    return order


class Rebuilt:
    """The derived indexes the reachable commits call for, as stored entries.

    Attributes:
        graph: the commit graph's entries.
        changes: the change index's entries.
        chunks: claim-tree chunks the rebuild needed that the store lacks: id → bytes.
    """

    def __init__(
        self, graph: dict[bytes, bytes], changes: dict[bytes, bytes], chunks: dict[bytes, bytes]
    ) -> None:
        self.graph = graph
        self.changes = changes
        self.chunks = chunks

    def matches(self, view: View) -> tuple[int, int, int]:
        """``(missing, extra, different)`` entries of the stored indexes against this rebuild."""
        missing = extra = differ = 0
        for expected, actual in (
            (self.graph, view.graph.entries(view.txn)),
            (self.changes, view.changes.entries(view.txn)),
        ):
            if expected == actual:  # nearly always: one comparison in C
                continue
            missing += len(expected.keys() - actual.keys())
            extra += len(actual.keys() - expected.keys())
            differ += sum(1 for k in expected.keys() & actual.keys() if expected[k] != actual[k])
        return missing, extra, differ


def tree_changes(view: View, old_tree: bytes | None, new_tree: bytes) -> list[Change]:
    """``(id, old value, new value)`` of every id that differs; from no tree (None), every id added."""
    if old_tree is None:
        return [(key, None, value) for key, value in view.tree.items(new_tree)]
    return list(view.tree.diff(old_tree, new_tree))


def commit_changes(view: View, commit: CommitObject) -> list[Change]:
    """What ``commit`` changed against its first parent (a root commit: everything in it)."""
    return tree_changes(view, view.commit(commit.parents[0]).tree if commit.parents else None, commit.tree)


def rebuild(
    view: View,
    claims_possible: bool = True,
    *,
    commits: Iterable[tuple[bytes, CommitObject]] | None = None,
    chunks: Load | None = None,
    replaced: Load | None = None,
) -> Rebuilt:
    """Rebuild the derived indexes of the reachable commits without touching the store.

    Args:
        view: the store to read.
        claims_possible: False when the caller knows the store holds no claim at all.
        commits: ``(id, commit)`` of every commit refs and retained reflog entries
            reach, parents first (by default found and read here). ``fsck`` passes
            a walk that checks each commit's tree as it hands the commit on.
        chunks: where each commit's diff against its first parent reads the
            commit's tree chunks; by default the view's loader, which verifies each
            chunk's hash and keeps it in the handle's cache. ``fsck`` has verified
            every object already and passes a loader that only decodes.
        replaced: where those diffs read the parent's tree chunks (by default
            ``chunks``): the chunks the commit replaced, in a history without branches
            read this once (see :class:`~mnemosyne.store.tree_diff.TreeDiff`).
    """
    from mnemosyne.store.kv.memory import MemoryKV  # scratch space: only rebuilds need it

    scratch = MemoryKV()
    if commits is None:
        order = topological(view, ref_tips(view))
        commits = ((oid, view.commit(oid)) for oid in order)  # as the replay reaches each, not all at once
    stores = view.stores
    tree = view.tree if chunks is None else Tree(chunks)
    differ: Tree | TreeDiff = tree
    if replaced is not None:
        differ = TreeDiff(view.objects.chunk_loader(view.txn) if chunks is None else chunks, replaced)

    def replay(txn: WriteTxn) -> Rebuilt:
        target = WriteView(Stores(stores.scope), Overlay(txn, view.txn))
        for oid, commit in commits:
            if commit.parents:
                changes = list(differ.diff(view.commit(commit.parents[0]).tree, commit.tree))
            else:
                changes = [(key, None, value) for key, value in tree.items(commit.tree)]
            index_commit(target, oid, commit, changes, {}, claims_possible)
        made = dict(Stores(stores.scope).objects.scan(txn))
        # Only chunks the rebuilt claim trees name: an update may write a chunk it then
        # replaces (a root of one child, collapsed), which no tree needs.
        needed: set[bytes] = set()
        for _, entry in target.graph.scan(txn):
            pending = [entry.claims] if entry.claims else []
            while pending:
                oid = pending.pop()
                if oid in needed:
                    continue
                needed.add(oid)
                chunk = target.chunk(oid)
                if chunk.level:
                    pending.extend(chunk.values)
        lacking = {oid: data for oid, data in made.items() if oid in needed}
        return Rebuilt(target.graph.entries(txn), target.changes.entries(txn), lacking)

    return scratch.transact(replay)


def unindex_unreachable(view: WriteView, reached: set[bytes]) -> int:
    """Drop the commit-graph and change-index entries of every indexed commit not in ``reached``.

    What :func:`reindex` would leave, at a cost in the commits dropped rather than
    in the whole history: a commit not reached has no reached descendant (its
    descendants would reach it), so every kept entry, claim tree and open record,
    all functions of a commit's ancestry, is what a rebuild gives. A dropped
    commit's change-index keys come from diffing it against its first parent, as
    when it was indexed; so its objects (and its first parent's tree) must still
    be stored: call this before removing them.

    Args:
        view: where to write.
        reached: ids of the commits refs and retained reflog entries reach (any
            superset made of them and of other, non-commit object ids will do).

    Returns:
        How many commits were dropped from the indexes.

    Raises:
        MnemoError: if a dropped commit or a tree it needs cannot be read (the caller
            then rebuilds instead).
    """
    dropped = [(oid, entry) for oid, entry in view.graph.scan(view.txn) if oid not in reached]
    for oid, entry in dropped:
        commit = view.commit(oid)
        ids = {node_id for node_id, _, _ in commit_changes(view, commit)}
        ids.update(verified_ids(commit))
        view.changes.remove(view.txn, entry.generation, oid, ids)
    view.graph.remove(view.txn, [oid for oid, _ in dropped])
    return len(dropped)


def reindex(view: WriteView, claims_possible: bool = True) -> int:
    """Rebuild the commit graph, change and claim indexes in place; return the entries written.

    ``claims_possible``: False when the caller knows the rebuild can meet no claim
    (see :func:`index_commit`).
    """
    rebuilt = rebuild(view, claims_possible)
    for oid, data in rebuilt.chunks.items():  # claim-tree chunks the store lacked
        view.objects.put_raw(view.txn, oid, data)
    view.graph.replace(view.txn, rebuilt.graph)
    view.changes.replace(view.txn, rebuilt.changes)
    return len(rebuilt.graph) + len(rebuilt.changes)
