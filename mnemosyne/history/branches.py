"""Branch operations: create, delete, reset, merge; each one write transaction.

Every ref move is a compare-and-swap with a reflog entry, so as-of reads see
resets, deletions and merges exactly as they happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import msgspec

from mnemosyne.errors import InvalidInput, MergeConflict, NotFound
from mnemosyne.history.commits import record_commit
from mnemosyne.history.merge import (
    ThreeWay,
    contradictions,
    merge_bases,
    record,
    three_way,
)
from mnemosyne.history.queries import readable
from mnemosyne.history.revisions import Rev, label, resolve
from mnemosyne.index import claims
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import Choice, MergeStrategy
from mnemosyne.model.objects import Claim, Commit, Node, has_id
from mnemosyne.model.results import Conflict, ConflictKind, Contradiction, MergeResult
from mnemosyne.store.prolly import EMPTY_ID
from mnemosyne.store.refs import BRANCH_PREFIX

Resolution = Choice | Node
"""How one conflict is resolved: a side, the base, deletion, or a node to write."""


def create(
    view: WriteView, name: str, start: Rev | None, now: datetime, author: str, *, orphan: bool = False
) -> Commit | None:
    """Create branch ``name`` at ``start`` (default: HEAD); return the commit it starts at.

    From HEAD on a branch with no commits yet, the new branch has none either (as
    ``git switch -c`` does): the first commit on it starts it, and None is returned.
    An ``orphan`` branch has no commits whatever HEAD has: its first commit is a
    new root (an unrelated history).
    """
    ref = BRANCH_PREFIX + name
    if view.refs.exists(view.txn, ref) or view.refs.head_branch(view.txn) == name:
        raise InvalidInput(f"branch {name!r} already exists")
    when = view.refs.next_time(view.txn, ref, now)
    if orphan and start is not None:
        raise InvalidInput("an orphan branch starts with no commits: it takes no start revision")
    head = BRANCH_PREFIX + view.refs.head_branch(view.txn)
    if not view.refs.exists(view.txn, head):
        # HEAD's branch exists only as HEAD's target (a new store): keep it a branch to
        # switch back to once HEAD moves.
        since = view.refs.next_time(view.txn, head, now)
        view.refs.create_unborn(view.txn, head, when=since, author=author, reason="branch: no commits yet")
    if orphan:
        view.refs.create_unborn(view.txn, ref, when=when, author=author, reason="branch: orphan")
        return None
    if start is None and view.refs.read(view.txn, head) is None:
        view.refs.create_unborn(
            view.txn, ref, when=when, author=author, reason="branch: from HEAD (no commits)"
        )
        return None
    oid = resolve(view, "HEAD" if start is None else start)  # "" is no revision, not HEAD
    origin = label(start) if start is not None else "HEAD"
    view.refs.update(view.txn, ref, None, oid, when=when, author=author, reason=f"branch: from {origin}")
    return Commit.from_object(oid, view.commit(oid))


def delete(view: WriteView, name: str, now: datetime, author: str) -> Commit | None:
    """Delete branch ``name``; return the commit it pointed at (None: it had none). Its reflog stays."""
    ref = BRANCH_PREFIX + name
    if not view.refs.exists(view.txn, ref):
        raise NotFound(f"no branch named {name!r}")
    if view.refs.head_branch(view.txn) == name:
        raise InvalidInput(f"cannot delete {name!r}: it is the current branch (switch first)")
    tip = view.refs.read(view.txn, ref)
    when = view.refs.next_time(view.txn, ref, now)
    view.refs.update(view.txn, ref, tip, None, when=when, author=author, reason="branch: deleted")
    return Commit.from_object(tip, view.commit(tip)) if tip is not None else None


def switch(view: WriteView, name: str) -> None:
    """Point HEAD at ``name``."""
    if not view.refs.exists(view.txn, BRANCH_PREFIX + name) and view.refs.head_branch(view.txn) != name:
        raise NotFound(f"no branch named {name!r}")
    view.refs.set_head(view.txn, name)


def reset(view: WriteView, branch: str, to: Rev, now: datetime, author: str) -> Commit:
    """Move ``branch`` to revision ``to``."""
    ref = BRANCH_PREFIX + branch
    if not view.refs.exists(view.txn, ref) and view.refs.head_branch(view.txn) != branch:
        raise NotFound(f"no branch named {branch!r}")
    tip = view.refs.read(view.txn, ref)  # None: a branch with no commits yet starts here
    oid = resolve(view, to)
    when = view.refs.next_time(view.txn, ref, now)
    view.refs.update(view.txn, ref, tip, oid, when=when, author=author, reason=f"reset: to {label(to)}")
    return Commit.from_object(oid, view.commit(oid))


def _virtual_base(view: WriteView, bases: list[bytes]) -> bytes:
    """One base tree for criss-cross histories: the bases merged pairwise.

    Where two bases disagree irreconcilably, the value of their own common ancestor
    stands in the virtual base, so the real merge reports the conflict to the user.
    """
    tree = view.commit(bases[0]).tree
    for other in bases[1:]:
        inner = merge_bases(view, bases[0], other)
        inner_tree = view.commit(inner[0]).tree if inner else view.empty_tree()
        step = three_way(view, inner_tree, tree, view.commit(other).tree, later_is_theirs=True)
        _store(view, step.merged)
        edits = dict(step.edits)
        for node_id, *_ in step.conflicts:
            edits[node_id] = view.tree.get(inner_tree, node_id)
        tree, _ = view.tree.update(tree, sorted(edits.items()))
    return tree


def _conflict(
    view: View, entry: tuple[str, ConflictKind, bytes | None, bytes | None, bytes | None]
) -> Conflict:
    node_id, kind, base, ours, theirs = entry

    def load(oid: bytes | None) -> Node | None:
        return readable(view, oid) if oid is not None else None  # erased: no node, the hash kept

    def hex_of(oid: bytes | None) -> str | None:
        return oid.hex() if oid is not None else None

    return Conflict(
        node_id,
        kind,
        load(base),
        load(ours),
        load(theirs),
        base_hash=hex_of(base),
        ours_hash=hex_of(ours),
        theirs_hash=hex_of(theirs),
    )


def merge(
    view: WriteView,
    *,
    source: Rev,
    into: str,
    resolutions: Mapping[str, Resolution] | None,
    strategy: MergeStrategy | None,
    message: str | None,
    author: str,
    now: datetime,
    allow_unrelated: bool = False,
) -> MergeResult:
    """Merge revision ``source`` into branch ``into`` (three-way, per id).

    Histories with no commit in common are refused unless ``allow_unrelated``
    (as git refuses them): merging a whole other memory is rarely what was meant.
    A branch with no commits yet is not unrelated: it fast-forwards.
    """
    txn = view.txn
    ref = BRANCH_PREFIX + into
    ours = view.refs.read(txn, ref)
    theirs = resolve(view, source)
    if resolutions is not None and (
        not isinstance(resolutions, Mapping) or not all(isinstance(key, str) for key in resolutions)
    ):
        raise InvalidInput("resolutions must map ids to 'ours', 'theirs', 'base', 'delete' or a Node")
    wanted = dict(resolutions or {})
    if strategy not in (None, "ours", "theirs"):
        raise InvalidInput("strategy must be 'ours' or 'theirs'")

    def no_conflicts_expected() -> None:
        if wanted:
            raise MergeConflict(f"stale resolutions: {', '.join(sorted(wanted))} are not in conflict")

    name = label(source)
    if ours is None and not view.refs.exists(txn, ref) and into != view.refs.head_branch(txn):
        raise NotFound(f"no branch named {into!r} to merge into")
    previous = Commit.from_object(ours, view.commit(ours)) if ours is not None else None
    if ours is None or view.graph.is_ancestor(txn, ours, theirs):
        no_conflicts_expected()
        if ours != theirs:
            when = view.refs.next_time(txn, ref, now)
            view.refs.update(
                txn, ref, ours, theirs, when=when, author=author, reason=f"merge {name}: fast-forward"
            )
        return MergeResult(
            commit=Commit.from_object(theirs, view.commit(theirs)),
            conflicts=[],
            contradictions=[],
            fast_forward=ours != theirs,
            up_to_date=ours == theirs,
            previous=previous,
        )
    if view.graph.is_ancestor(txn, theirs, ours):
        no_conflicts_expected()
        return MergeResult(
            commit=previous,
            conflicts=[],
            contradictions=[],
            up_to_date=True,
            previous=previous,
        )

    ours_obj = view.commit(ours)
    theirs_obj = view.commit(theirs)
    bases = merge_bases(view, ours, theirs)
    if not bases and not allow_unrelated:
        raise InvalidInput(
            f"refusing to merge unrelated histories: {name} and {into} have no commit in common; "
            "merge them anyway with --allow-unrelated-histories (allow_unrelated_histories=True)"
        )
    base_tree = _virtual_base(view, bases) if bases else view.empty_tree()
    plan = three_way(
        view, base_tree, ours_obj.tree, theirs_obj.tree, theirs_obj.record_time > ours_obj.record_time
    )
    in_conflict = {entry[0]: entry for entry in plan.conflicts}
    stale = sorted(set(wanted) - set(in_conflict))
    if stale:
        raise MergeConflict(f"stale resolutions: {', '.join(stale)} are not in conflict")
    unresolved = [entry for entry in plan.conflicts if entry[0] not in wanted and strategy is None]
    if unresolved:
        if wanted:
            names = ", ".join(entry[0] for entry in unresolved)
            raise MergeConflict(f"{len(unresolved)} conflicts left unresolved: {names}")
        pairs = contradictions(view.node, plan.ours_changes, plan.theirs_changes, lambda _i, _h: True)
        return MergeResult(
            commit=None,
            conflicts=[_conflict(view, entry) for entry in plan.conflicts],
            contradictions=[_contradiction(a, b, None) for a, b in pairs],
            previous=previous,
        )
    written = _resolve(view, plan, in_conflict, wanted, strategy)
    root, changes = view.tree.update(ours_obj.tree, sorted(plan.edits.items()))
    pairs = contradictions(
        view.node, plan.ours_changes, plan.theirs_changes, lambda i, h: view.tree.get(root, i) == h
    )
    records = record(view, pairs)
    commit = record_commit(
        view,
        into,
        ours,
        root,
        changes,
        written,
        parents=(ours, theirs),
        author=author,
        message=message or f"Merge {name} into {into}",
        meta=None,
        now=now,
        contradictions=records,
        reason=f"merge {name}",
    )
    found = [_contradiction(a, b, record) for (a, b), record in zip(pairs, records, strict=True)]
    return MergeResult(commit=commit, conflicts=[], contradictions=found, previous=previous)


def _contradiction(a: Node, b: Node, record: bytes | None) -> Contradiction:
    claim = a.content
    assert isinstance(claim, Claim)
    return Contradiction(claim.subject, claim.predicate, (a, b), record.hex() if record is not None else None)


def _resolve(
    view: WriteView,
    plan: ThreeWay,
    in_conflict: Mapping[str, tuple[str, str, bytes | None, bytes | None, bytes | None]],
    wanted: dict[str, Resolution],
    strategy: MergeStrategy | None,
) -> dict[bytes, Node]:
    """Turn resolutions into edits on top of ours; store merged and supplied nodes."""
    written: dict[bytes, Node] = dict(plan.merged)
    for node_id, (_, _, base, _, theirs) in in_conflict.items():
        choice = wanted.get(node_id, strategy)
        if choice == "ours":
            continue
        if choice == "theirs":
            plan.edits[node_id] = theirs
        elif choice == "base":
            plan.edits[node_id] = base
        elif choice == "delete":
            plan.edits[node_id] = None
        elif isinstance(choice, Node):
            node = choice if has_id(choice) else msgspec.structs.replace(choice, id=node_id)
            if node.id != node_id:
                raise InvalidInput(f"the node resolving {node_id} has id {node.id}")
            oid = bytes.fromhex(node.hash)
            written[oid] = node
            plan.edits[node_id] = oid
        else:
            raise InvalidInput(f"resolution for {node_id} must be ours, theirs, base, delete or a Node")
    _store(view, written)
    return written


def _store(view: WriteView, nodes: dict[bytes, Node]) -> None:
    """Store node versions by hash; erased claim versions among them are indexed again where named."""
    claims.restore_rewritten(view, nodes, list(nodes))
    stored = view.objects.put_nodes(view.txn, list(nodes.values()))
    assert stored == list(nodes)


def inverse(view: View, rev: Rev, tip: bytes) -> tuple[bytes, str, list[Node], list[str]]:
    """What undoing commit ``rev`` on top of ``tip`` writes: ``(commit, summary, puts, removals)``.

    Raises:
        InvalidInput: ``rev`` is a merge commit.
        MergeConflict: an id it changed has changed again since.
    """
    oid = resolve(view, rev)
    obj = view.commit(oid)
    if len(obj.parents) > 1:
        raise InvalidInput("reverting a merge commit is not supported")
    base = view.commit(obj.parents[0]).tree if obj.parents else EMPTY_ID
    tip_root = view.commit(tip).tree
    puts: list[Node] = []
    removals: list[str] = []
    for key, old, new in view.tree.diff(base, obj.tree):
        if view.tree.get(tip_root, key) != new:
            raise MergeConflict(f"cannot revert {oid.hex()[:7]}: {key} has changed since")
        if old is None:
            removals.append(key)
        else:
            puts.append(view.node(old))
    summary = obj.message.splitlines()[0] if obj.message else ""
    return oid, summary, puts, removals
