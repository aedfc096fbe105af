"""Rebuilding the recall indexes from the stored node versions alone."""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne.index.view import WriteView
from mnemosyne.model.codec import NODE_TAG
from mnemosyne.model.objects import Node
from mnemosyne.recall import index, postings
from mnemosyne.recall import vectors as vector_store
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.postings import bulk
from mnemosyne.store.kv.base import Space


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
    # Counted by kind tag alone: hashing and decoding every node twice would double the work.
    total = sum(data[1:8] == NODE_TAG for _, data in txn.scan(Space.OBJECTS, scope)) if progress else 0
    writer = postings.Writer(txn, scope, fresh=True)
    fresh = index.FreshVectors() if vectors else None
    documents = 0
    contents: set[bytes] = set()
    nodes: list[tuple[bytes, Node]] = []

    def step() -> None:
        nonlocal documents
        contents.update(index.index_nodes(txn, scope, writer, embedder, nodes, index.BATCH, fresh))
        documents += len(nodes)  # each stored version once: the scan yields every key once
        nodes.clear()
        if progress is not None:
            progress(documents, total)

    for oid, node in index.stored_nodes(txn, scope):
        if node is not None:
            nodes.append((oid, node))
            if len(nodes) == index.BATCH:
                step()
    step()
    writer.close()
    postings.drop_numbers(txn, scope, end)
    if fresh is None:
        vector_store.keep_only(txn, scope, contents)
    else:
        fresh.close()
    return documents
