"""Erasure: the one deliberate way bytes leave history.

``forget`` deletes the stored bytes of node versions (content, provenance, meta)
and writes an append-only redaction record per version under its hash. Trees and
commits keep naming the hash, so every other object still verifies; reading the
erased version raises ``Redacted`` with who, when and why. Ids are keys and stay.
LMDB reuses freed pages but does not scrub them: erasure that must leave no bytes
on disk is followed by ``gc(compact=True)``.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from mnemosyne.admin.fsck import reindex
from mnemosyne.errors import NotFound, Redacted
from mnemosyne.index import recall_queue as recall_queue
from mnemosyne.index.view import WriteView
from mnemosyne.model.objects import Claim, Node, Redaction
from mnemosyne.recall import index as recall_index
from mnemosyne.recall.search import scrub_reads
from mnemosyne.store.kv.base import Space

_encoder = msgspec.msgpack.Encoder()


def versions_of(view: WriteView, node_id: str) -> list[bytes]:
    """Every version of ``node_id`` ever committed in this tenant, newest first.

    Read from the change index, so versions on every branch, and on commits only
    the reflog still reaches, are found without walking history.
    """
    seen: list[bytes] = []
    for _, _, value in view.changes.versions(view.txn, node_id):
        if value is not None and value not in seen:
            seen.append(value)
    return seen


def erase(
    view: WriteView, node_id: str, hashes: list[bytes], *, author: str, reason: str, now: datetime
) -> tuple[list[Redaction], bool]:
    """Delete the bytes of ``hashes`` (versions of ``node_id``) and record each erasure.

    Versions already erased are skipped (their first record stands: records are
    append-only).

    Returns:
        The new redaction records, and whether an erased version was a claim (the
        claim index, whose keys hold subject and predicate, must then be rebuilt).
    """
    records: list[Redaction] = []
    had_claim = False
    scope = view.stores.scope
    for oid in hashes:
        earlier = view.objects.redaction(view.txn, oid)
        if earlier is not None and view.txn.get(Space.OBJECTS, scope + oid) is None:
            continue  # erased already, and not written again since
        try:
            node = view.node(oid)
        except (NotFound, Redacted):
            continue
        if node.id != node_id:
            raise NotFound(f"version {oid.hex()[:12]} belongs to {node.id}, not {node_id}")
        had_claim = had_claim or isinstance(node.content, Claim)
        record = Redaction(id=node_id, hash=oid.hex(), time=now, author=author, reason=reason)
        recall_index.unindex_node(view.txn, scope, oid, node)
        view.txn.delete(Space.OBJECTS, scope + oid)
        view.txn.put(Space.REDACTIONS, scope + oid, _encoder.encode(record), overwrite=False)
        view.objects.forget_cached(oid)
        # The same bytes written again after an erasure go again; the first record stands.
        records.append(earlier or record)
    recall_queue.drop(view.txn, scope, [bytes.fromhex(r.hash) for r in records])
    scrub_reads(view.txn, scope, {r.hash for r in records})
    return records, had_claim


def refresh_claim_index(view: WriteView) -> None:
    """Rebuild the derived indexes so no claim-tree key names an erased claim.

    The old claim-tree chunks become unreachable; ``gc`` removes them.
    """
    reindex(view.stores, view.txn)


def expired_versions(view: WriteView, now: datetime) -> dict[str, list[bytes]]:
    """Every stored node version past its ``expires_at``, by id (reads every object)."""
    found: dict[str, list[bytes]] = {}
    scope = view.stores.scope
    for key, _ in view.txn.scan(Space.OBJECTS, scope):
        oid = key[len(scope) :]
        obj = view.objects.load(view.txn, oid)
        if isinstance(obj, Node) and obj.expires_at is not None and obj.expires_at <= now:
            found.setdefault(obj.id, []).append(oid)
    return found
