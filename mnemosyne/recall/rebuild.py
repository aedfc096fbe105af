"""Rebuilding the recall indexes from the stored node versions alone."""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne.kv.base import WriteTxn
from mnemosyne.objects import Node
from mnemosyne.recall import index, postings
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.postings import bulk
from mnemosyne.view import WriteView


def requeue_all(txn: WriteTxn, scope: bytes) -> int:
    """Forget the derived postings and queue every stored node version again.

    Vectors stay (they are keyed by content and model, and cost model time),
    except those of contents no stored version has any more (collected by
    ``gc``, which rebuilds through here). Returns how many versions were queued.
    """
    return index.requeue(txn, scope)


@bulk()
def rebuild(
    view: WriteView,
    embedder: Embedder | None,
    vectors: bool,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Rebuild postings (and, with ``vectors``, every embedding) in one transaction.

    The stored versions are read straight from the object store, a batch at a
    time, rather than queued and read back.

    Returns:
        How many node versions were indexed.
    """
    txn, scope = view.txn, view.stores.scope
    vectors = vectors or not index.format_current(txn, scope)
    end = index.clear(txn, scope, vectors=vectors, rebuilding=True)
    total = sum(1 for _ in index.stored_nodes(txn, scope)) if progress is not None else 0
    writer = postings.Writer(txn, scope, fresh=True)
    fresh = index.FreshVectors() if vectors else None
    documents: set[bytes] = set()
    contents: set[bytes] = set()
    nodes: list[tuple[bytes, Node]] = []

    def step() -> None:
        contents.update(index.index_nodes(txn, scope, writer, embedder, nodes, index.BATCH, fresh))
        documents.update(oid for oid, _ in nodes)
        nodes.clear()
        if progress is not None:
            progress(len(documents), total)

    for oid, node in index.stored_nodes(txn, scope):
        if node is not None:
            nodes.append((oid, node))
            if len(nodes) == index.BATCH:
                step()
    step()
    writer.close()
    postings.drop_numbers(txn, scope, end)
    if fresh is None:
        index.keep_vectors_of(txn, scope, contents)
    else:
        fresh.close()
    return len(documents)
