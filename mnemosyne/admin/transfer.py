"""Moving history between two stores by hash: the sending side's objects the receiving side lacks.

One transfer copies what the receiving tenant lacks of the history some tips
reach, then moves refs there. It runs in four steps, each in the receiving
store's own transactions, so a transfer killed at any point leaves both stores
consistent and running it again completes it:

1. **Have/want.** The commits to send are those the tips reach in the sender's
   commit graph that the receiver has not indexed (its commit graph holds only
   commits whose whole history is stored), found by walking the sender's graph
   entries and stopping at every commit the receiver has: a no-op transfer
   reads one entry per tip.
2. **Redactions.** Every redaction record of the sender the receiver lacks is
   applied first: the receiver erases those versions' bytes (and what its
   derived indexes hold of them, as ``forget`` does) and keeps the record. The
   receiver never stores a version it has a redaction record for, so erasure
   travels one way only: bytes never come back.
3. **Objects**, children before parents (nodes, then tree chunks bottom-up,
   contradiction records, then the commit, commits parents first), in
   transactions of at most :data:`BATCH` objects. A chunk the receiver has is
   never descended into: whoever stored it stored its children first. Every
   object's bytes are hashed on arrival and must match their id. Objects of an
   interrupted transfer are unreachable until the refs move, so ``gc`` collects
   them after its grace period if no rerun comes.
4. **Indexes and refs**, in one transaction: the new commits enter the commit
   graph, change and claim indexes (computed here, never copied), their
   versions are queued for recall, and the caller's ref moves run last
   (compare-and-swap, reflogged). Derived indexes are rebuilt, never received.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from mnemosyne.admin.erase import erase
from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.index.build import commit_changes, index_commit, reindex
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import decode_object
from mnemosyne.store.object_store import decode_redaction

T = TypeVar("T")

_KNOWN_TAGS = tuple(
    codec.encode(tag) for tag in ("node@1", "tree@1", "commit@1", "commit@2", "contradiction@1")
)
"""How the tags of the object kinds this version reads begin an encoded object (msgpack strings)."""

BATCH = 20_000
"""Objects written per transaction of the receiving store (bounded work to redo after a crash)."""


class Receiver(Protocol):
    """One tenant of the receiving store, as a transfer sees it: a way to read and to write.

    The API's tenant handle is one: every transaction it opens checks first that
    the tenant is still the one it was bound to.
    """

    def read(self) -> AbstractContextManager[View]:
        """A view of one snapshot of the tenant."""
        ...

    def write(self, fn: Callable[[WriteView], T]) -> T:
        """Run ``fn`` in one write transaction of the tenant (it may run again)."""
        ...


class Plan:
    """What one transfer sends.

    Attributes:
        commits: the commits the receiver lacks, parents first.
        objects: ids of the objects to send, children before parents.
        redactions: ``(hash, stored record)`` of the sender's redactions the receiver lacks.
    """

    def __init__(
        self, commits: list[bytes], objects: list[bytes], redactions: list[tuple[bytes, bytes]]
    ) -> None:
        self.commits = commits
        self.objects = objects
        self.redactions = redactions


class Sent:
    """What a transfer did on the receiving side.

    Attributes:
        commits: commits the receiver indexed.
        objects: objects written (those an interrupted run wrote before are not counted again).
        bytes: their stored size.
        redactions: redaction records received.
    """

    def __init__(self) -> None:
        self.commits = 0
        self.objects = 0
        self.bytes = 0
        self.redactions = 0


def transfer(
    source: View, target: Receiver, tips: Iterable[bytes], move: Callable[[WriteView], T]
) -> tuple[Sent, T]:
    """Send what ``target`` lacks of the history ``tips`` reach in ``source``, then run ``move``.

    ``source`` is one snapshot of the sending tenant, held for the whole
    transfer; ``move`` runs in the final transaction of the receiver, after the
    new commits are indexed, and moves its refs (it may raise to refuse: the
    objects stay, unreachable, and nothing else changes).

    Raises:
        CorruptObject: an object's bytes do not match its id, or the sender lacks
            an object its history names (and has no redaction record for it).
        InvalidInput: an object of a newer format, or a malformed redaction record.
    """
    tips = list(tips)
    try:
        return _send(source, target, tips, move, thorough=False)
    except _Incomplete:
        # A gc between interrupted transfers removed objects below a chunk the receiver
        # kept (each object's grace starts when gc first saw it): this time look below
        # every chunk the receiver has, and send what is missing there.
        try:
            return _send(source, target, tips, move, thorough=True)
        except _Incomplete as again:
            raise NotFound(f"{again}; run 'mnemo fsck' on the receiving store") from None


class _Incomplete(NotFound):
    """The receiver lacks an object below a chunk it holds: the plan trusted too much."""


def _send(
    source: View, target: Receiver, tips: list[bytes], move: Callable[[WriteView], T], *, thorough: bool
) -> tuple[Sent, T]:
    with target.read() as have:
        plan = _plan(source, have, tips, thorough)
    sent = Sent()
    if plan.redactions:
        sent.redactions = target.write(lambda view: _apply_redactions(view, plan.redactions))
    for start in range(0, len(plan.objects), BATCH):
        batch = plan.objects[start : start + BATCH]
        written, size = target.write(functools.partial(_store, source, batch))
        sent.objects += written
        sent.bytes += size

    def finish(view: WriteView) -> tuple[int, T]:
        try:
            indexed = _index(view, plan.commits)
        except NotFound as missing:
            raise _Incomplete(str(missing)) from None
        return indexed, move(view)

    sent.commits, moved = target.write(finish)
    return sent, moved


# -- have/want -------------------------------------------------------------------


def missing_commits(source: View, have: View, tips: list[bytes]) -> list[bytes]:
    """The commits ``tips`` reach in ``source`` that ``have`` has not indexed, parents first."""
    order: list[bytes] = []
    visited: set[bytes] = set()
    for tip in tips:
        stack: list[tuple[bytes, bool]] = [(tip, False)]
        while stack:
            oid, expanded = stack.pop()
            if expanded:
                order.append(oid)
                continue
            if oid in visited or have.graph.has(have.txn, oid):
                continue
            visited.add(oid)
            stack.append((oid, True))
            # The sender's graph entry names the parents without decoding the commit.
            stack.extend((parent, False) for parent in reversed(source.graph.entry(source.txn, oid).parents))
    return order


def _plan(source: View, have: View, tips: list[bytes], thorough: bool = False) -> Plan:
    commits = missing_commits(source, have, tips)
    queued: set[bytes] = set()
    objects: list[bytes] = []
    seen: set[bytes] | None = set() if thorough else None
    theirs = {key for key, _ in have.objects.redactions(have.txn)}  # erased there: never sent

    def lacks(oid: bytes) -> bool:
        return oid not in queued and not have.objects.contains(have.txn, oid)

    for oid in commits:
        commit = source.commit(oid)
        _plan_tree(source, theirs, commit.tree, lacks, queued, objects, seen)
        for record in commit.contradictions:
            if lacks(record):
                _require(source, record)
                queued.add(record)
                objects.append(record)
        if lacks(oid):
            queued.add(oid)
            objects.append(oid)
    redactions = [(key, data) for key, data in source.objects.redactions(source.txn) if key not in theirs]
    return Plan(commits, objects, redactions)


def _plan_tree(
    source: View,
    erased_there: set[bytes],
    root: bytes,
    lacks: Callable[[bytes], bool],
    queued: set[bytes],
    objects: list[bytes],
    seen: set[bytes] | None = None,
) -> None:
    """Queue the chunks and nodes of a tree the receiver lacks, children first.

    Nodes the receiver erased (``erased_there``: the ids of its redaction records)
    are never sent back.

    A chunk the receiver has is taken to have everything below it, unless ``seen``
    is given (a thorough plan): then what is below it is checked too, once.
    """
    stack: list[tuple[bytes, bool]] = [(root, False)]
    while stack:
        oid, expanded = stack.pop()
        if expanded:
            queued.add(oid)
            objects.append(oid)
            continue
        if not lacks(oid):
            if seen is None or oid in seen or oid in queued:
                continue  # stored there with everything below it
            seen.add(oid)
        else:
            stack.append((oid, True))
        chunk = source.chunk(oid)
        if chunk.level:
            stack.extend((child, False) for child in chunk.values)
            continue
        for node in chunk.values:
            if not lacks(node) or node in erased_there:
                continue  # stored there, or erased there: never sent back
            if not source.objects.contains(source.txn, node):
                if source.objects.redaction(source.txn, node) is not None:
                    continue  # erased here: its redaction record travels instead
                raise CorruptObject(
                    f"{node.hex()} is missing from the sending store (run 'mnemo fsck' there)"
                )
            queued.add(node)
            objects.append(node)


def _require(source: View, oid: bytes) -> None:
    if not source.objects.contains(source.txn, oid):
        raise CorruptObject(f"{oid.hex()} is missing from the sending store (run 'mnemo fsck' there)")


# -- receiving ---------------------------------------------------------------------


def _apply_redactions(view: WriteView, records: list[tuple[bytes, bytes]]) -> int:
    """Erase here what the sender erased, keeping its records; return how many were new here."""
    had_claim = False
    applied = 0
    for key, data in records:
        try:
            record = decode_redaction(data)
        except Exception:  # msgspec's errors: a record this version cannot read
            raise InvalidInput(
                f"the redaction record of {key.hex()} cannot be read (a newer format?)"
            ) from None
        if record.hash != key.hex():
            raise InvalidInput(f"the redaction record of {key.hex()} names another version")
        if view.objects.redaction(view.txn, key) is not None:
            continue  # a transfer running beside this one brought it
        if view.objects.contains(view.txn, key):
            made, _, claim = erase(
                view, record.id, [key], author=record.author, reason=record.reason, now=record.time
            )
            had_claim = had_claim or claim
            if made:
                applied += 1
                continue
        view.objects.put_raw_redaction(view.txn, key, data)
        applied += 1
    if had_claim:
        reindex(view)  # no claim-index key may name an erased claim
    return applied


def _store(source: View, batch: list[bytes], view: WriteView) -> tuple[int, int]:
    """Write one batch of objects, each hashed on arrival; ``(objects written, bytes)``."""
    objects, txn = view.objects, view.txn
    written = size = 0
    for oid in batch:
        data = source.objects.raw(source.txn, oid)
        if data is None:
            raise CorruptObject(f"{oid.hex()} is missing from the sending store (run 'mnemo fsck' there)")
        if codec.object_id(data) != oid:
            raise CorruptObject(f"object {oid.hex()} does not match its hash: nothing of it was stored")
        if not data[1:].startswith(_KNOWN_TAGS):  # after a one-byte array header, as we encode them
            newer = codec.describe_tag(data)
            if newer is not None:
                raise InvalidInput(f"object {oid.hex()}: {newer}; upgrade Mnemosyne to receive it")
            decode_object(data, oid)  # raises CorruptObject for what is no object at all
        if data[1:8] == codec.NODE_TAG and objects.redaction(txn, oid) is not None:
            continue  # erased here: the bytes never come back
        if objects.put_raw(txn, oid, data):
            written += 1
            size += len(data)
    return written, size


def _index(view: WriteView, commits: list[bytes]) -> int:
    """Index the received commits (parents first) and queue their versions for recall."""
    count = 0
    for oid in commits:
        if view.graph.has(view.txn, oid):
            continue  # indexed by a transfer that ran beside this one
        try:
            commit = view.commit(oid)
        except NotFound:
            raise NotFound(
                f"commit {oid.hex()[:12]} went missing during the transfer (a gc ran?); run it again"
            ) from None
        changes = commit_changes(view, commit)
        index_commit(view, oid, commit, changes, {})
        view.stores.queue.add(
            view.txn,
            [new for _, _, new in changes if new is not None and view.objects.contains(view.txn, new)],
        )
        count += 1
    return count
