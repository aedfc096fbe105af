"""Rebuilding the recall indexes from the stored node versions alone."""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne.index.view import WriteView
from mnemosyne.model.codec import NODE_TAG
from mnemosyne.model.objects import Node
from mnemosyne.recall import recall_index
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.postings import bulk
from mnemosyne.recall.postings_writer import Writer
from mnemosyne.recall.recall_index import RecallIndex


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
    txn = view.txn
    recall = RecallIndex(view.stores.scope)
    vectors = vectors or not recall.vectors_current(txn)
    end = recall.clear(txn, vectors=vectors, rebuilding=True)
    # Counted by kind tag alone: hashing and decoding every node twice would double the work.
    total = sum(data[1:8] == NODE_TAG for _, data in view.objects.scan(txn)) if progress else 0
    writer = Writer(txn, recall.postings, fresh=True)
    fresh = recall_index.FreshVectors() if vectors else None
    documents = 0
    contents: set[bytes] = set()
    nodes: list[tuple[bytes, Node]] = []

    def step() -> None:
        nonlocal documents
        contents.update(
            recall_index.index_nodes(txn, recall, writer, embedder, nodes, recall_index.BATCH, fresh)
        )
        documents += len(nodes)  # each stored version once: the scan yields every key once
        nodes.clear()
        if progress is not None:
            progress(documents, total)

    for oid, node in recall_index.stored_nodes(view):
        if node is not None:
            nodes.append((oid, node))
            if len(nodes) == recall_index.BATCH:
                step()
    step()
    writer.close()
    recall.postings.drop_numbers(txn, end)
    if fresh is None:
        recall.vectors.keep_only(txn, contents)
    else:
        fresh.close()
    return documents
