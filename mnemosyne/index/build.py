"""Derived indexes of one commit, written in the commit's own transaction.

One function serves both the commit path and rebuilding (``reindex``), so the
two can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from mnemosyne.history.merge import still_open
from mnemosyne.index import claims
from mnemosyne.index.graph import GraphEntry
from mnemosyne.index.view import WriteView
from mnemosyne.model.objects import CommitObject, Node


def index_commit(
    view: WriteView,
    oid: bytes,
    commit: CommitObject,
    changes: Sequence[tuple[str, bytes | None, bytes | None]],
    written: dict[bytes, Node],
    claims_possible: bool = True,
) -> GraphEntry:
    """Add a commit to the commit graph, change index and claim index.

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
    entry = view.graph.add(view.txn, oid, commit.parents, claim_root, open_records)
    view.changes.add_many(view.txn, entry.generation, oid, [(node_id, new) for node_id, _, new in changes])
    return entry
