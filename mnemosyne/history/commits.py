"""The write path of a commit: apply puts and removals to a branch tip, atomically.

Runs inside one write transaction: the tip is read there, so concurrent plain
commits never lose each other's work; the ref moves by compare-and-swap and the
derived indexes are written in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import Any

import msgspec

from mnemosyne.errors import ClaimConflict, InvalidInput, NotFound, RefConflict
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index import claims
from mnemosyne.index.build import index_commit
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import ClaimPolicy
from mnemosyne.model.ids import new_id
from mnemosyne.model.objects import (
    NO_ID,
    Claim,
    Commit,
    CommitObject,
    Node,
    VerifyingCommitObject,
    has_id,
)
from mnemosyne.model.results import CommitResult
from mnemosyne.model.times import rfc3339
from mnemosyne.store.refs import BRANCH_PREFIX, TICK
from mnemosyne.store.tree_diff import Change

_id_of = attrgetter("id")
_kind_of = attrgetter("kind")
_first = itemgetter(0)
_third = itemgetter(2)


def record_commit(
    view: WriteView,
    branch: str,
    tip: bytes | None,
    root: bytes,
    changes: Sequence[Change],
    written: dict[bytes, Node],
    *,
    parents: tuple[bytes, ...],
    author: str,
    message: str,
    meta: dict[str, Any] | None,
    now: datetime,
    contradictions: tuple[bytes, ...] = (),
    reason: str = "commit",
    verified: tuple[str, ...] = (),
) -> Commit:
    """Store a commit of ``root``, index it, and move ``branch`` from ``tip`` to it.

    Record time is ``now``, nudged past every parent's record time and the branch's
    last reflog entry, so it strictly increases along the branch.
    """
    if not isinstance(author, str) or not isinstance(message, str):
        # msgspec encodes any type; a commit that does not decode would break the branch.
        raise InvalidInput("the author and message of a commit must be strings")
    txn = view.txn
    ref = BRANCH_PREFIX + branch
    when = now
    for parent in parents:
        parent_time = view.commit(parent).record_time
        if when <= parent_time:
            when = parent_time + TICK
    when = view.refs.next_time(txn, ref, when)
    obj = (
        VerifyingCommitObject(root, parents, when, author, message, meta or None, contradictions, verified)
        if verified
        else CommitObject(root, parents, when, author, message, meta or None, contradictions)
    )
    oid = view.objects.put(txn, obj)
    index_commit(view, oid, obj, changes, written)
    # Recall indexes catch up lazily, at the next search: a commit only queues what
    # it wrote (rebuilding the other indexes queues nothing; reindex requeues all).
    # filter(None, ...) keeps the new hashes (removals have None), in C.
    view.stores.queue.add(txn, list(filter(None, map(_third, changes))))
    summary = message.splitlines()[0] if message else ""
    view.refs.update(txn, ref, tip, oid, when=when, author=author, reason=f"{reason}: {summary}")
    return Commit.from_object(oid, obj)


def apply_commit(
    view: WriteView,
    *,
    branch: str,
    parent: Rev | None,
    nodes: list[Node],
    removals: list[str],
    author: str,
    message: str,
    meta: dict[str, Any] | None,
    allow_empty: bool,
    on_claim_conflict: ClaimPolicy,
    now: datetime,
) -> CommitResult:
    """Commit ``nodes`` and ``removals`` on top of ``branch``'s current tip.

    Nodes without an id get a generated one (time-ordered, from ``now``). When
    nothing would change and ``allow_empty`` is off, nothing is written and the
    result is the tip as it was (``created`` False): a retried write is a no-op.

    Raises:
        RefConflict: ``parent`` names a commit other than the tip.
        NotFound: no branch ``branch`` (only HEAD's may be absent: a new
            store's); a removal names an id that is not in the branch (in a
            commit that changes nothing else, only an id never written: removing
            an id removed before is a retry).
        InvalidInput: an id appears twice; nothing to commit on a branch with no
            commits yet.
        ClaimConflict: see :func:`claim_conflicts`.
    """
    # Loops over every node run in C where they can (map, zip, itemgetter): an import
    # of a million nodes passes through each of them.
    if NO_ID in map(_id_of, nodes):  # only NO_ID is empty: an explicit "" is refused
        nodes = [node if has_id(node) else msgspec.structs.replace(node, id=new_id(now)) for node in nodes]
    put_ids = tuple(map(_id_of, nodes))
    if removals or len(set(put_ids)) < len(put_ids):
        seen: set[str] = set()
        for node_id in put_ids + tuple(removals):
            if node_id in seen:
                raise InvalidInput(f"{node_id} appears more than once in one commit")
            seen.add(node_id)
    txn = view.txn
    ref = BRANCH_PREFIX + branch
    present, tip = view.refs.state(txn, ref)
    if not present and branch != view.refs.head_branch(txn):
        # As git: a commit never creates a branch, so a mistyped name cannot start one.
        raise NotFound(f"no branch {branch!r}: create it first (branch(), or mnemo branch {branch})")
    if parent is not None:
        expected = resolve(view, parent)
        if tip != expected:
            raise RefConflict(
                f"branch {branch} moved: expected {expected.hex()[:7]}, "
                f"found {tip.hex()[:7] if tip else 'no commits'}"
            )
    base = view.commit(tip).tree if tip is not None else view.empty_tree()
    writes_claims = "claim" in map(_kind_of, nodes)  # once: most commits (and imports) write none
    replaced: list[str] = []
    if writes_claims:
        # The tip's claim tree, read only for claims: index_commit reads the entry anyway.
        claim_root = view.graph.entry(txn, tip).claims if tip is not None else b""
        replaced = claim_conflicts(view, claim_root, nodes, removals, on_claim_conflict)
    # Hashed first, stored only once a commit will name them: a retried write stores
    # nothing, not even bytes an erasure removed since the first try.
    encoded = view.objects.encode_nodes(nodes)
    node_oids = list(map(_first, encoded))
    written: dict[bytes, Node] = dict(zip(node_oids, nodes, strict=True))
    edits: list[tuple[str, bytes | None]] = list(zip(put_ids, node_oids, strict=True))
    edits.extend((node_id, None) for node_id in removals + replaced)
    edits.sort(key=_first)  # by id alone: ids are unique, and comparing tuples is slower
    root, changes = view.tree.update(base, edits)
    removed = {key for key, _, new in changes if new is None} if removals or replaced else set()
    deleted_ids = tuple(i for i in removals if i in removed)
    missing = [i for i in removals if i not in removed]
    if missing and not changes:
        # A commit that changes nothing is a retry (a no-op below), if what it removes
        # was ever written: an id never seen anywhere is a mistake, not a retry.
        missing = [i for i in missing if next(view.changes.versions(txn, i), None) is None]
    if missing:
        raise NotFound(f"cannot remove {missing[0]}: it is not in branch {branch}")
    if not changes and not allow_empty:
        if tip is None:
            raise InvalidInput(f"nothing to commit: branch {branch!r} has no commits and nothing was given")
        # Nothing changes (a retried write): no commit, no objects; the tip as it is.
        current = Commit.from_object(tip, view.commit(tip))
        return _result(current, put_ids, deleted_ids, created=False)
    # Only versions the commit puts in the tree: one already there (a retried write
    # beside a new one) may be a version erased since, whose bytes must stay gone.
    if len(changes) - len(removed) < len(encoded):
        # Each put changes its id or nothing: fewer changes than puts, some are already there.
        entering = {new for _, _, new in changes if new is not None}
        encoded = [(oid, data) for oid, data in encoded if oid in entering]
    if writes_claims:
        # Erased claim bytes written again are readable again in every commit that named them.
        claims.restore_rewritten(view, written, map(_first, encoded))
    view.objects.put_encoded(txn, encoded)
    made = record_commit(
        view,
        branch,
        tip,
        root,
        changes,
        written,
        parents=(tip,) if tip is not None else (),
        author=author,
        message=message,
        meta=meta,
        now=now,
    )
    # A put whose id had a version and still has one replaced it; "~" in diff.
    replaced_ids = {key for key, old, new in changes if old is not None and new is not None}
    modified_ids = tuple(i for i in put_ids if i in replaced_ids) if replaced_ids else ()
    return _result(made, put_ids, deleted_ids, created=True, modified_ids=modified_ids)


def apply_verify(
    view: WriteView, *, branch: str, ids: tuple[str, ...], author: str, message: str, now: datetime
) -> Commit:
    """Record that the versions of ``ids`` current at ``branch``'s tip were re-confirmed.

    One commit whose tree is the tip's (no node changes, so no hash does) and whose
    record time is the verification time; it names the ids it verified.

    Raises:
        NotFound: the branch has no commits, or an id is not in it (nothing is written).
    """
    tip = view.refs.read(view.txn, BRANCH_PREFIX + branch)
    if tip is None:
        raise NotFound(f"branch {branch!r} has no commits: nothing to verify")
    tree = view.commit(tip).tree
    for node_id in ids:
        if view.tree.get(tree, node_id) is None:
            raise NotFound(f"cannot verify {node_id}: it is not in branch {branch}")
    return record_commit(
        view,
        branch,
        tip,
        tree,
        [],
        {},
        parents=(tip,),
        author=author,
        message=message,
        meta=None,
        now=now,
        reason="verify",
        verified=ids,
    )


def _result(
    commit: Commit,
    put_ids: tuple[str, ...],
    deleted_ids: tuple[str, ...],
    created: bool,
    modified_ids: tuple[str, ...] = (),
) -> CommitResult:
    # asdict, in C: the same shallow map of the commit's fields as a getattr per field.
    return CommitResult(
        **msgspec.structs.asdict(commit),
        put_ids=put_ids,
        modified_ids=modified_ids,
        deleted_ids=deleted_ids,
        created=created,
    )


def claim_conflicts(
    view: View, root: bytes, nodes: list[Node], removals: list[str], policy: ClaimPolicy
) -> list[str]:
    """Check new claims against claims with the same start; return ids to remove.

    Raises:
        ClaimConflict: when the policy is ``"refuse"`` and values disagree, or when
            claims written in this one commit disagree with each other.
    """
    if "claim" not in map(_kind_of, nodes):
        return []  # a note has no claim to conflict (most commits: no set of ids to build)
    written = {n.id for n in nodes}
    gone = set(removals)
    by_start: dict[str, Node] = {}
    to_remove: list[str] = []
    for node in nodes:
        claim = node.content
        if not isinstance(claim, Claim):
            continue
        start = claims.claim_key("", claim)
        other = by_start.get(start)
        if other is not None and isinstance(other.content, Claim) and other.content.value != claim.value:
            raise ClaimConflict(
                f"claims {other.id} and {node.id} on {claim.subject}/{claim.predicate} both start at "
                f"{rfc3339(claim.valid_from)} with different values"
            )
        by_start[start] = node
        for other_id, other_hash in claims.same_start(view, root, claim):
            if other_id == node.id or other_id in written or other_id in gone:
                continue
            existing = view.node(other_hash).content
            if not isinstance(existing, Claim) or existing.value == claim.value:
                continue
            if policy == "refuse":
                raise ClaimConflict(
                    f"claim {node.id} starts at {rfc3339(claim.valid_from)} like {other_id} on "
                    f"{claim.subject}/{claim.predicate} with a different value; correct {other_id}, "
                    "or commit with a claim-conflict policy: replace or keep"
                )
            if policy == "replace" and other_id not in to_remove:
                to_remove.append(other_id)
    return to_remove
