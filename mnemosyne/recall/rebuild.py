"""Rebuilding the recall indexes from the stored node versions alone."""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne.kv.base import Space, WriteTxn
from mnemosyne.recall import index
from mnemosyne.recall.embedders import Embedder
from mnemosyne.view import WriteView

_NODE_TAG = b"\xa6node@1"


def requeue_all(txn: WriteTxn, scope: bytes) -> int:
    """Forget the derived postings and queue every stored node version again.

    Vectors stay (they are keyed by content and model, and cost model time);
    returns how many versions were queued.
    """
    index.clear(txn, scope, vectors=False)
    count = 0
    for key, data in txn.scan(Space.OBJECTS, scope):
        if data[1:8] == _NODE_TAG:
            txn.put(Space.RECALL, scope + b"q" + key[len(scope) :], b"")
            count += 1
    return count


def rebuild(
    view: WriteView,
    embedder: Embedder | None,
    vectors: bool,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Rebuild postings (and, with ``vectors``, every embedding) in one transaction."""
    scope = view.stores.scope
    if vectors:
        index.clear(view.txn, scope, vectors=True)
    total = requeue_all(view.txn, scope)
    return index.catch_up(view, view.txn, embedder, progress=progress, total=total)
