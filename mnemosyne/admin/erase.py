"""Erasure: the one deliberate way bytes leave history.

``forget`` deletes the stored bytes of node versions (content, provenance, meta)
and writes an append-only redaction record per version under its hash. Trees and
commits keep naming the hash, so every other object still verifies; reading the
erased version raises ``Redacted`` with who, when and why. Ids are keys and stay.
Every derived index drops what it held of the version in the same transaction,
and the current branch drops the id in a normal commit when it held an erased
version. LMDB reuses freed pages but does not scrub them: erasure that must
leave no bytes on disk is followed by ``gc(compact=True)``.
"""

from __future__ import annotations

from datetime import datetime

from mnemosyne.errors import InvalidInput, NotFound, Redacted
from mnemosyne.history.commits import apply_commit
from mnemosyne.index import claims
from mnemosyne.index.view import WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Claim, Commit, Node, Redaction
from mnemosyne.model.reports import ForgetReport
from mnemosyne.store.refs import BRANCH_PREFIX


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


def claim_keys(view: WriteView, node_id: str, hashes: list[bytes]) -> dict[bytes, str]:
    """The claim index keys of the readable claim versions of ``node_id`` among ``hashes``, by hash.

    Read before erasing: a key holds the claim's subject, predicate and start.
    """
    found: dict[bytes, str] = {}
    for oid in hashes:
        try:
            node = view.node(oid)
        except (NotFound, Redacted):
            continue
        if node.id == node_id and isinstance(node.content, Claim):
            found[oid] = claims.claim_key(node_id, node.content)
    return found


def unindex_claims(view: WriteView, keys: dict[str, dict[bytes, str]], records: list[Redaction]) -> None:
    """Take the claim versions just erased (``records``) out of every commit's claim tree.

    ``keys``: :func:`claim_keys` of each id, read before erasing. Done before the
    branch drops the ids, so that commit starts from claim trees without them.
    """
    gone = {bytes.fromhex(r.hash) for r in records}
    claims.forget_versions(
        view, {node_id: {h: k for h, k in found.items() if h in gone} for node_id, found in keys.items()}
    )


def erase(
    view: WriteView, node_id: str, hashes: list[bytes], *, author: str, reason: str, now: datetime
) -> tuple[list[Redaction], list[Redaction], bool]:
    """Delete the bytes of ``hashes`` (versions of ``node_id``) and record each erasure.

    Returns:
        The new redaction records; the first records of versions erased before
        (they stand: records are append-only); and whether an erased version was
        a claim (the claim index, whose keys hold subject and predicate, must then
        drop it: :func:`unindex_claims`).
    """
    from mnemosyne.recall.reads import ReadLog
    from mnemosyne.recall.recall_index import RecallIndex  # numpy: loaded when something is erased

    records: list[Redaction] = []
    before: list[Redaction] = []
    had_claim = False
    txn = view.txn
    recall = RecallIndex(view.stores.scope)
    for oid in hashes:
        earlier = view.objects.redaction(txn, oid)
        if earlier is not None and not view.objects.contains(txn, oid):
            before.append(earlier)
            continue  # erased already, and not written again since
        try:
            node = view.node(oid)
        except (NotFound, Redacted):
            continue
        if node.id != node_id:
            raise NotFound(f"version {oid.hex()[:12]} belongs to {node.id}, not {node_id}")
        had_claim = had_claim or isinstance(node.content, Claim)
        recall.unindex(view, oid, node)
        # The same bytes written again after an erasure go again; the first record stands.
        records.append(
            view.objects.erase(
                txn, oid, Redaction(id=node_id, hash=oid.hex(), time=now, author=author, reason=reason)
            )
        )
    erased = [bytes.fromhex(r.hash) for r in records]
    recall.queue.drop(txn, erased)
    ReadLog(view.stores.scope).scrub(txn, {r.hash for r in records})
    return records, before, had_claim


def expired_versions(view: WriteView, now: datetime) -> dict[str, list[bytes]]:
    """Every stored node version past its ``expires_at``, by id (reads every node)."""
    found: dict[str, list[bytes]] = {}
    for oid, data in view.objects.scan(view.txn):
        if data[1:8] != codec.NODE_TAG:
            continue
        obj = view.objects.load(view.txn, oid)
        if isinstance(obj, Node) and obj.expires_at is not None and obj.expires_at <= now:
            found.setdefault(obj.id, []).append(oid)
    return found


def forget(
    view: WriteView, node_ids: list[str], version: str | None, *, reason: str, author: str, now: datetime
) -> ForgetReport:
    """Erase every version of each of ``node_ids`` (or the one ``version`` names); see the module docstring.

    Every id is looked up before anything is erased, and all of it happens in the
    caller's one transaction, so several ids go together or not at all, and the
    current branch drops them in one commit.

    Raises:
        NotFound: an id has no such version in this tenant.
        InvalidInput: an ambiguous or malformed version prefix.
    """
    found = {node_id: _versions_named(view, node_id, version) for node_id in node_ids}
    return _erase_all(view, found, author, reason, f"forget {', '.join(found)}: {reason}", now)


def _versions_named(view: WriteView, node_id: str, version: str | None) -> list[bytes]:
    versions = versions_of(view, node_id)
    if version is not None:
        wanted = version.lower()
        if len(wanted) < 4 or any(c not in "0123456789abcdef" for c in wanted):
            raise InvalidInput(f"version {version!r} is not a hash or a prefix of at least 4 hex characters")
        versions = [v for v in versions if v.hex().startswith(wanted)]
        if len(versions) > 1:
            raise InvalidInput(f"version {version!r} is ambiguous; give more hex characters")
    if not versions:
        raise NotFound(f"{node_id} has no {'such version' if version else 'versions'} in this store")
    return versions


def forget_expired(view: WriteView, *, reason: str, author: str, now: datetime) -> ForgetReport:
    """Erase every node version past its ``expires_at`` at ``now``."""
    found = expired_versions(view, now)
    return _erase_all(view, found, author, reason, f"forget expired: {reason}", now)


def _erase_all(
    view: WriteView, found: dict[str, list[bytes]], author: str, reason: str, message: str, now: datetime
) -> ForgetReport:
    """Erase the versions ``found`` (by id), drop them from the claim trees, then from the branch."""
    records: list[Redaction] = []
    before: list[Redaction] = []
    keys: dict[str, dict[bytes, str]] = {}
    any_claim = False
    for node_id, versions in found.items():
        keys[node_id] = claim_keys(view, node_id, versions)  # read before the bytes go
        erased, earlier, had_claim = erase(view, node_id, versions, author=author, reason=reason, now=now)
        records.extend(erased)
        before.extend(earlier)
        any_claim = any_claim or had_claim
    if any_claim:
        unindex_claims(view, keys, records)  # no claim-tree key names an erased claim
    commit = drop_erased(view, {k: set(v) for k, v in found.items()}, author, message, now)
    return ForgetReport(redactions=records, already_erased=before, commit=commit)


def drop_erased(
    view: WriteView, erased: dict[str, set[bytes]], author: str, message: str, now: datetime
) -> Commit | None:
    """Remove from the current branch the ids whose version there was erased; the commit, or None."""
    branch = view.refs.head_branch(view.txn)
    tip = view.refs.read(view.txn, BRANCH_PREFIX + branch)
    if tip is None:
        return None
    root = view.commit(tip).tree
    gone = sorted(i for i, hashes in erased.items() if view.tree.get(root, i) in hashes)
    if not gone:
        return None
    made = apply_commit(
        view,
        branch=branch,
        parent=None,
        nodes=[],
        removals=gone,
        author=author,
        message=message,
        meta=None,
        allow_empty=False,
        on_claim_conflict="refuse",
        now=now,
    )
    return Commit.from_object(bytes.fromhex(made.id), view.commit(bytes.fromhex(made.id)))
