"""Integrity checks and rebuilding of derived indexes.

The commit graph and the change index are derived: they can always be rebuilt
from the commits reachable from refs and reflogs. ``fsck`` re-hashes every
object, checks that refs, reflogs, commits and trees point at objects that exist,
and compares the derived indexes with a fresh rebuild.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from mnemosyne.errors import CorruptObject, MnemoError
from mnemosyne.index.build import index_commit
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, TreeChunk
from mnemosyne.recall.check import check as recall_check
from mnemosyne.recall.index import requeue
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn
from mnemosyne.store.kv.memory import MemoryKV


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing fsck found wrong.

    Attributes:
        kind: ``corrupt`` (bytes do not match the hash or do not decode),
            ``missing`` (something points at an object that is not stored),
            ``index`` (a derived index disagrees with the objects).
        object: hex id of the object concerned, when there is one.
        message: one line for people.
    """

    kind: str
    object: str | None
    message: str


class FsckReport(msgspec.Struct, frozen=True, kw_only=True):
    """The result of :func:`fsck`.

    Attributes:
        ok: True when no problem was found.
        problems: what was found.
        objects: how many objects were re-hashed.
        commits: how many reachable commits were checked.
    """

    ok: bool
    problems: list[Problem]
    objects: int
    commits: int


def ref_tips(view: View) -> set[bytes]:
    """Every commit a branch or a retained reflog entry points at, in this tenant.

    An entry's ``old`` is the ``new`` of the entry before it, so the ``new`` sides
    name everything; once the earlier entries expire, history they alone reached
    is no longer kept.
    """
    tips = {oid for _, oid in view.refs.branches(view.txn)}
    for _, value in view.txn.scan(Space.REFLOG, view.stores.scope):
        entry = view.refs.decode_entry(value)
        if entry.new:
            tips.add(entry.new)
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


class _Overlay:
    """Writes go to a scratch store; reads other than of indexes fall back to the real one.

    Derived-index reads see only the scratch store, so a rebuild never trusts
    the entries it is replacing.
    """

    def __init__(self, scratch: WriteTxn, real: ReadTxn) -> None:
        self.scratch = scratch
        self.real = real

    def get(self, space: Space, key: bytes) -> bytes | None:
        found = self.scratch.get(space, key)
        if found is None and space is not Space.INDEX:
            found = self.real.get(space, key)
        return found

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.scratch.scan(space, prefix, start, reverse)

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        if space is Space.OBJECTS and not overwrite and self.real.get(space, key) is not None:
            return False
        return self.scratch.put(space, key, value, overwrite)

    def delete(self, space: Space, key: bytes) -> bool:
        return self.scratch.delete(space, key)

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        return sum(self.put(space, key, value, overwrite) for key, value in items)


def rebuild(view: View, claims_possible: bool = True) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    """Rebuild the derived indexes of the reachable commits without touching the store.

    Returns:
        The index entries the commits call for, and the objects (claim-tree
        chunks) the rebuild needed that the store lacks, both keyed as stored.
    """
    scratch = MemoryKV()
    order = topological(view, ref_tips(view))

    def replay(txn: WriteTxn) -> None:
        target = WriteView(view.stores, _Overlay(txn, view.txn))
        for oid in order:
            commit = view.commit(oid)
            if commit.parents:
                changes = list(view.tree.diff(view.commit(commit.parents[0]).tree, commit.tree))
            else:
                changes = [(key, None, value) for key, value in view.tree.items(commit.tree)]
            index_commit(target, oid, commit, changes, {}, claims_possible)

    scratch.transact(replay)
    scope = view.stores.scope
    with scratch.read() as txn:
        return dict(txn.scan(Space.INDEX, scope)), dict(txn.scan(Space.OBJECTS, scope))


def _index_entries(txn: ReadTxn, scope: bytes) -> Iterator[tuple[bytes, bytes]]:
    return txn.scan(Space.INDEX, scope)


def reindex(stores: Stores, txn: WriteTxn) -> int:
    """Rebuild the derived indexes; return the number of entries written."""
    view = WriteView(stores, txn)
    expected, objects = rebuild(view)
    stale = [key for key, _ in _index_entries(txn, stores.scope)]
    for key in stale:
        txn.delete(Space.INDEX, key)
    for key, value in expected.items():
        txn.put(Space.INDEX, key, value)
    for key, value in objects.items():
        txn.put(Space.OBJECTS, key, value, overwrite=False)
    # The recall postings are derived too: queue every version, the next search indexes.
    requeue(txn, stores.scope)
    return len(expected)


def fsck(view: View) -> FsckReport:
    """Check one tenant's objects, refs and derived indexes."""
    problems: list[Problem] = []
    scope = view.stores.scope
    count = 0
    claims_possible = False  # no stored object holds a claim: the rebuild skips the claim index
    for key, data in view.txn.scan(Space.OBJECTS, scope):
        count += 1
        oid = key[len(scope) :]
        claims_possible = claims_possible or codec.CLAIM_TAG in data
        if codec.object_id(data) != oid:
            problems.append(Problem(kind="corrupt", object=oid.hex(), message="bytes do not match the hash"))
            continue
        try:
            codec.decode(data, oid)
        except CorruptObject as exc:
            problems.append(Problem(kind="corrupt", object=oid.hex(), message=str(exc)))

    bad = {p.object for p in problems}
    tips = ref_tips(view)
    commits: list[bytes] = []
    seen_chunks: set[bytes] = set()
    for oid in sorted(tips):
        if oid.hex() in bad:
            continue
        if view.txn.get(Space.OBJECTS, scope + oid) is None:
            problems.append(
                Problem(kind="missing", object=oid.hex(), message="a ref or reflog names a missing commit")
            )
    try:
        commits = topological(view, {t for t in tips if t.hex() not in bad})
    except MnemoError as exc:
        problems.append(Problem(kind="missing", object=None, message=f"history cannot be walked: {exc}"))
    for oid in commits:
        commit = view.commit(oid)
        _check_tree(view, commit, seen_chunks, problems, bad)
    if not any(p.kind != "index" for p in problems):
        try:
            expected, lacking = rebuild(view, claims_possible)
        except MnemoError as exc:
            problems.append(Problem(kind="index", object=None, message=f"cannot rebuild indexes: {exc}"))
        else:
            actual = dict(_index_entries(view.txn, scope))
            if lacking:
                problems.append(
                    Problem(
                        kind="index",
                        object=None,
                        message=f"{len(lacking)} claim-index chunks are missing; run 'mnemo reindex'",
                    )
                )
            if actual != expected:
                missing = len(expected.keys() - actual.keys())
                extra = len(actual.keys() - expected.keys())
                differ = sum(1 for k in expected.keys() & actual.keys() if expected[k] != actual[k])
                problems.append(
                    Problem(
                        kind="index",
                        object=None,
                        message=f"derived indexes disagree with the objects ({missing} missing, "
                        f"{extra} extra, {differ} different entries); run 'mnemo reindex'",
                    )
                )
    problems.extend(Problem(kind="index", object=None, message=line) for line in recall_check(view))
    return FsckReport(ok=not problems, problems=problems, objects=count, commits=len(commits))


def _check_tree(
    view: View, commit: CommitObject, seen: set[bytes], problems: list[Problem], bad: set[str | None]
) -> None:
    stack = [commit.tree]
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid.hex() in bad:
            continue
        # Ask storage, not the object cache: the cache may hold chunks never stored.
        data = view.txn.get(Space.OBJECTS, view.stores.scope + oid)
        if data is None:
            problems.append(Problem(kind="missing", object=oid.hex(), message="a tree names a missing chunk"))
            continue
        # Decoded here without the cache: one pass over every chunk would evict the
        # chunks the index rebuild reads again and again. (The scan above verified hashes.)
        chunk = codec.decode(data, oid)
        if not isinstance(chunk, TreeChunk):
            problems.append(Problem(kind="corrupt", object=oid.hex(), message="expected a tree chunk"))
            continue
        if chunk.level:
            stack.extend(chunk.values)
            continue
        for value in chunk.values:
            if value not in seen:
                seen.add(value)
                if (
                    value.hex() not in bad
                    and view.txn.get(Space.OBJECTS, view.stores.scope + value) is None
                    and view.objects.redaction(view.txn, value) is None  # erased on purpose
                ):
                    problems.append(
                        Problem(kind="missing", object=value.hex(), message="a tree names a missing node")
                    )
