"""The receiving side of a transfer: what a store does with the objects, records and commits it is sent.

Each function runs inside one write transaction of the receiving tenant (a
:class:`~mnemosyne.index.view.WriteView`): :func:`apply_redactions` erases here
what the sender erased, :func:`store_objects` writes a batch of objects, each
hashed on arrival, and :func:`index_commits` enters the received commits in the
derived indexes. :class:`Received` keeps, between those transactions, what the
stored commits changed against their first parents, so indexing does not read
their trees again. :mod:`mnemosyne.admin.transfer` drives them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from mnemosyne.admin.erase import claim_keys, erase, unindex_claims
from mnemosyne.admin.sending import DIFFS
from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, NotFound
from mnemosyne.index.build import commit_changes, index_commit
from mnemosyne.index.view import WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, Redaction, TreeChunk, decode_object
from mnemosyne.store.object_store import decode_redaction
from mnemosyne.store.tree_diff import Change, TreeDiff

Objects = Iterable[tuple[bytes, bytes | None]]
"""``(id, stored bytes)`` of objects sent; None where the sender lacks one."""

_KNOWN_TAGS = tuple(
    codec.encode(tag) for tag in ("node@1", "tree@1", "commit@1", "commit@2", "contradiction@1")
)
"""How the tags of the object kinds this version reads begin an encoded object (msgpack strings)."""


class Received:
    """What commits changed against their first parents, as the receiving side found storing them.

    Each commit that arrives is compared with its first parent right then, from
    the tree chunks of the same batch (just hashed and decoded) and those stored
    before: ``finish`` then indexes it without reading, hashing and decoding its
    chunks again. Computed by the receiver from objects it verified, never taken
    from a sender, and the same whichever transfer brings the commit (ids name
    content): so a served store keeps one per tenant across a push's requests.
    At most :data:`~mnemosyne.admin.sending.DIFFS` changes are kept, the oldest
    dropped first; what is not kept, ``finish`` computes.
    """

    def __init__(self) -> None:
        self._diffs: dict[bytes, list[Change]] = {}
        self._changes = 0
        self._lock = threading.Lock()  # a served store's requests run in threads

    def keep(self, found: dict[bytes, list[Change]]) -> None:
        """Keep what a committed transaction's commits changed."""
        with self._lock:
            for oid, changes in found.items():
                if oid not in self._diffs:
                    self._diffs[oid] = changes
                    self._changes += len(changes)
            while self._changes > DIFFS and self._diffs:
                oldest = next(iter(self._diffs))
                self._changes -= len(self._diffs.pop(oldest))

    def known(self, commits: list[bytes]) -> dict[bytes, list[Change]]:
        """What is kept of ``commits``."""
        with self._lock:
            return {oid: self._diffs[oid] for oid in commits if oid in self._diffs}

    def drop(self, commits: Iterable[bytes]) -> None:
        """Forget ``commits`` (indexed now)."""
        with self._lock:
            for oid in commits:
                changes = self._diffs.pop(oid, None)
                if changes is not None:
                    self._changes -= len(changes)

    def __len__(self) -> int:
        return len(self._diffs)


def apply_redactions(view: WriteView, records: list[tuple[bytes, bytes]]) -> int:
    """Erase here what the sender erased, keeping its records; return how many were new here."""
    keys: dict[str, dict[bytes, str]] = {}
    erased: list[Redaction] = []
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
            found = claim_keys(view, record.id, [key])  # read before the bytes go
            made, _, claim = erase(
                view, record.id, [key], author=record.author, reason=record.reason, now=record.time
            )
            if claim:
                keys.setdefault(record.id, {}).update(found)
                erased.extend(made)
            if made:
                applied += 1
                continue
        view.objects.put_raw_redaction(view.txn, key, data)
        applied += 1
    if erased:
        # No claim-index key may name an erased claim: the commits that held one lose it
        # (as forget does, ADR 36), rather than every index being rebuilt.
        unindex_claims(view, keys, erased)
    return applied


def store_objects(
    objects: Objects, compare: bool, view: WriteView
) -> tuple[int, int, dict[bytes, list[Change]]]:
    """Write one batch of objects, each hashed on arrival; ``(objects written, bytes, changes)``.

    ``compare``: decode the tree chunks and commits on the way (their bytes are
    at hand and hashed), and compare each commit not indexed here yet with its
    first parent: the changes found, by commit (see :class:`Received`), at most
    :data:`~mnemosyne.admin.sending.DIFFS` in all (a batch of commits that each
    replace a large tree leaves the rest to ``finish``, which keeps none).
    """
    store, txn = view.objects, view.txn
    written = size = 0
    chunks: dict[bytes, TreeChunk] = {}
    commits: dict[bytes, CommitObject] = {}
    found: dict[bytes, list[Change]] = {}
    budget = DIFFS
    # A tenant that never erased anything has no redaction record to look up per node.
    erased = store.erasures(txn) > 0
    indexed: set[bytes] = set()
    if compare:
        objects = list(objects)  # a request's batch, in memory already
        # Which commits are indexed here, asked once (on PostgreSQL a round trip each).
        indexed = view.graph.indexed(
            txn, [oid for oid, data in objects if data is not None and data[1:].startswith(codec.COMMIT_TAGS)]
        )
    for oid, data in objects:
        if data is None:
            raise CorruptObject(f"{oid.hex()} is missing from the sending store (run 'mnemo fsck' there)")
        if codec.object_id(data) != oid:
            raise CorruptObject(f"object {oid.hex()} does not match its hash: nothing of it was stored")
        if not data[1:].startswith(_KNOWN_TAGS):  # after a one-byte array header, as we encode them
            newer = codec.describe_tag(data)
            if newer is not None:
                raise InvalidInput(f"object {oid.hex()}: {newer}; upgrade Mnemosyne to receive it")
            decode_object(data, oid)  # raises CorruptObject for what is no object at all
        if erased and data[1:8] == codec.NODE_TAG and store.redaction(txn, oid) is not None:
            continue  # erased here: the bytes never come back
        if store.put_raw(txn, oid, data):
            written += 1
            size += len(data)
        if compare and data[1:8] != codec.NODE_TAG:
            changes = _compare(view, oid, data, chunks, commits, indexed)
            if changes is not None and len(changes) > budget:
                compare = False  # enough held for one batch: finish compares the rest
            elif changes is not None:
                found[oid] = changes
                budget -= len(changes)
    return written, size, found


def _compare(
    view: WriteView,
    oid: bytes,
    data: bytes,
    chunks: dict[bytes, TreeChunk],
    commits: dict[bytes, CommitObject],
    indexed: set[bytes],
) -> list[Change] | None:
    """Keep a chunk of the batch decoded; a commit's changes against its first parent, if they can be found.

    The batch's own chunks and commits come from here, never from the store's
    cache: a transaction that rolls back leaves nothing decoded behind. What
    cannot be compared now (a parent or chunk missing, bytes that do not decode)
    is left for ``finish``, which reports it.
    """
    try:
        obj = decode_object(data, oid)
        if isinstance(obj, TreeChunk):
            chunks[oid] = obj
        elif isinstance(obj, CommitObject):
            commits[oid] = obj
            if obj.parents and oid not in indexed:  # not sent again to no purpose
                parent = commits.get(obj.parents[0]) or view.commit(obj.parents[0])
                stored = view.objects.chunk_loader(view.txn)

                def load(key: bytes) -> TreeChunk:
                    chunk = chunks.get(key)
                    return chunk if chunk is not None else stored(key)

                return list(TreeDiff(load).diff(parent.tree, obj.tree))
    except (MnemoError, ValueError, TypeError, LookupError):
        pass  # whatever is wrong with these objects, finish compares them again and reports it
    return None


def index_commits(
    view: WriteView, commits: list[bytes], diffs: dict[bytes, list[Change]] | None = None
) -> int:
    """Index the received commits (parents first) and queue their versions for recall.

    ``diffs``: what some of them changed against their first parents, known
    already (:func:`plan_objects`); the others are compared here.

    Raises:
        NotFound: an object of theirs is missing (a ``gc`` ran meanwhile?): run the transfer again.
    """
    count = 0
    # Read at once, not one commit at a time: on PostgreSQL a round trip each.
    done = view.graph.indexed(view.txn, commits)  # by a transfer that ran beside this one
    queued: list[bytes] = []
    for oid in commits:
        if oid in done:
            continue
        done.add(oid)
        try:
            commit = view.commit(oid)
            changes = diffs.get(oid) if diffs else None
            if changes is None:
                changes = commit_changes(view, commit)
        except NotFound as missing:
            raise NotFound(
                f"commit {oid.hex()[:12]} cannot be indexed: {missing} (a gc ran during the transfer?); "
                "run it again"
            ) from None
        index_commit(view, oid, commit, changes, {})
        queued += [new for _, _, new in changes if new is not None and view.objects.contains(view.txn, new)]
        count += 1
    view.stores.queue.add(view.txn, queued)  # one look-up of the queue's end for them all
    return count
