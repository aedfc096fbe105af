"""Rebuilding the recall indexes from the stored node versions alone."""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne import codec
from mnemosyne.errors import CorruptObject
from mnemosyne.kv.base import Space, WriteTxn
from mnemosyne.objects import Node
from mnemosyne.recall import index
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.text import content_hash
from mnemosyne.view import WriteView

_NODE_TAG = b"\xa6node@1"


def requeue_all(txn: WriteTxn, scope: bytes) -> int:
    """Forget the derived postings and queue every stored node version again.

    Vectors stay (they are keyed by content and model, and cost model time),
    except those of contents no stored version has any more (collected by
    ``gc``, which rebuilds through here). Returns how many versions were queued.
    """
    index.clear(txn, scope, vectors=False)
    count = 0
    contents: set[bytes] = set()
    for key, data in txn.scan(Space.OBJECTS, scope):
        if data[1:8] == _NODE_TAG:
            oid = key[len(scope) :]
            txn.put(Space.RECALL, scope + b"q" + oid, b"")
            count += 1
            try:
                node = codec.decode(data, oid)
            except CorruptObject:
                continue  # fsck reports it; its vector may go and come back once repaired
            if isinstance(node, Node):
                contents.add(content_hash(node))
    index.keep_vectors_of(txn, scope, contents)
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
