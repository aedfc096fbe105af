"""The recall indexes: BM25 postings and embedding vectors, derived and rebuildable.

Commits only enqueue the node versions they write (one small entry per commit,
see :mod:`mnemosyne.index.recall_queue`), so
writing stays cheap; a search on a writable handle first catches up: it indexes
the queued versions (see :mod:`mnemosyne.recall.postings`) and embeds contents
that have no vector yet (see :mod:`mnemosyne.recall.vectors`), a batch at a time.
A rebuild (:mod:`mnemosyne.recall.rebuild`) reads the stored versions directly.

Keys of this module (behind the tenant scope), in the ``recall`` keyspace:
``q`` sequence → queued versions · ``f`` → the layout's format number. An index written
in an older layout (no ``f`` key, yet totals or models present) is dropped and
every stored version queued again at the next catch-up or erasure; until then
read-only handles refuse to search it rather than misread it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.index.recall_queue import TAG as QUEUE
from mnemosyne.index.recall_queue import RecallQueue
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Node
from mnemosyne.recall import postings
from mnemosyne.recall import vectors as vector_store
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.postings import Accept, bulk, lexical, versions_with_content
from mnemosyne.recall.text import content_hash, text_of
from mnemosyne.recall.vectors import MODEL, VectorCache, models, semantic
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

__all__ = [
    "Accept",
    "VectorCache",
    "catch_up",
    "check_format",
    "clear",
    "embed",
    "format_current",
    "index_nodes",
    "lexical",
    "models",
    "needs_catch_up",
    "requeue",
    "semantic",
    "unindex_node",
    "versions_with_content",
]

_FORMAT = b"f"
FORMAT = b"2"
"""The layout written by this version: numbered documents, postings segments, vector blocks."""
BATCH = 256
"""Versions read and texts embedded per step."""


def format_current(txn: ReadTxn, scope: bytes) -> bool:
    """Whether the tenant's recall index is in this version's layout (or empty)."""
    found = txn.get(Space.RECALL, scope + _FORMAT)
    if found is not None:
        return found == FORMAT
    # Older layouts wrote totals as soon as they indexed, and a model key as they embedded.
    if txn.get(Space.RECALL, scope + postings.STATS) is not None:
        return False
    return next(iter(txn.scan(Space.RECALL, scope + MODEL)), None) is None


def check_format(txn: ReadTxn, scope: bytes) -> None:
    """Refuse to read an index in an older layout.

    Raises:
        InvalidInput: the index predates this version (a writable handle rebuilds it).
    """
    if not format_current(txn, scope):
        raise InvalidInput(
            "the recall index was written by an older version: search once from a writable "
            "handle, or run 'mnemo reindex', to rebuild it"
        )


def stamp(txn: WriteTxn, scope: bytes) -> None:
    """Mark the tenant's recall index as written in this version's layout."""
    txn.put(Space.RECALL, scope + _FORMAT, FORMAT)


# -- writing ----------------------------------------------------------------------


def needs_catch_up(txn: ReadTxn, scope: bytes, embedder: Embedder | None) -> bool:
    """Whether versions are queued, the index's layout is old, or the model is new here."""
    if RecallQueue(scope).any(txn):
        return True
    if not format_current(txn, scope):
        return True
    if embedder is None or txn.get(Space.RECALL, scope + MODEL + embedder.model_id.encode()) is not None:
        return False
    return next(iter(txn.scan(Space.RECALL, scope + postings.DOC)), None) is not None


def stored_nodes(txn: ReadTxn, scope: bytes) -> Iterator[tuple[bytes, Node | None]]:
    """Every stored node version; None for one whose bytes do not verify or decode."""
    for key, data in txn.scan(Space.OBJECTS, scope):
        if data[1:8] != codec.NODE_TAG:
            continue
        oid = key[len(scope) :]
        node: Node | None = None
        if codec.object_id(data) == oid:
            try:
                decoded = codec.decode(data, oid)
            except CorruptObject:
                decoded = None  # fsck reports it; its vector may go and come back once repaired
            node = decoded if isinstance(decoded, Node) else None
        yield oid, node


def requeue(txn: WriteTxn, scope: bytes) -> int:
    """Forget the derived postings and queue every stored node version again.

    Vectors stay (they are keyed by content and model, and cost model time),
    except those of contents no stored version has any more. Returns how many
    versions were queued.
    """
    clear(txn, scope, vectors=False)
    oids: list[bytes] = []
    contents: set[bytes] = set()
    for oid, node in stored_nodes(txn, scope):
        oids.append(oid)
        if node is not None:
            contents.add(content_hash(node))
    RecallQueue(scope).add(txn, oids)
    vector_store.keep_only(txn, scope, contents)
    return len(oids)


def unindex_node(txn: WriteTxn, scope: bytes, oid: bytes, node: Node) -> None:
    """Remove every trace of one node version from the recall indexes, but the queue.

    Its vector goes too when no other version has the same content. The eraser
    takes its versions out of the queue with :meth:`RecallQueue.drop`, once for all.
    """
    if not format_current(txn, scope):
        requeue(txn, scope)  # drops the old layout whole, vectors included
    postings.remove(txn, scope, oid, node)
    chash = content_hash(node)
    if not versions_with_content(txn, scope, chash):
        for model in models(txn, scope):
            vector_store.drop(txn, scope, model, [chash])


def index_nodes(
    txn: WriteTxn,
    scope: bytes,
    writer: postings.Writer,
    embedder: Embedder | None,
    nodes: list[tuple[bytes, Node]],
    batch: int,
    fresh: FreshVectors | None = None,
) -> list[bytes]:
    """Index ``nodes`` and embed their new contents; return their content hashes."""
    hashes = writer.add(nodes)
    if embedder is not None and nodes:
        _embed_contents(txn, scope, embedder, hashes, [node for _, node in nodes], batch, fresh)
    return hashes


class FreshVectors:
    """Vectors cleared in this transaction: what was embedded since, and the model's writer.

    So no content is looked up, and the map (keyed by random content hashes) is
    written once, by :meth:`close`, in key order.
    """

    def __init__(self) -> None:
        self.embedded: set[bytes] = set()
        self._writer: vector_store.Writer | None = None

    def writer(self, txn: WriteTxn, scope: bytes, model: str) -> vector_store.Writer:
        """The model's vector writer (one model per rebuild)."""
        if self._writer is None:
            self._writer = vector_store.Writer(txn, scope, model, defer_map=True)
        return self._writer

    def close(self) -> None:
        """Write the map entries."""
        if self._writer is not None:
            self._writer.close()


@bulk()
def catch_up(view: WriteView, embedder: Embedder | None) -> int:
    """Index every queued node version and embed contents that lack a vector.

    ``embedder`` embeds new contents (None: postings only). Returns how many node
    versions were indexed.
    """
    txn, scope, batch = view.txn, view.stores.scope, BATCH
    if not format_current(txn, scope):
        requeue(txn, scope)
    stamp(txn, scope)
    if embedder is not None and txn.get(Space.RECALL, scope + MODEL + embedder.model_id.encode()) is None:
        # A model new to this tenant: embed what was indexed before it came.
        embed(txn, scope, embedder, [node for _, node in _indexed(view)], batch)
    pending = RecallQueue(scope).queued(txn)
    RecallQueue(scope).clear(txn)  # all taken: the transaction writes every one of them or nothing
    writer = postings.Writer(txn, scope)
    count = 0
    for start in range(0, len(pending), batch):
        fresh: list[tuple[bytes, Node]] = []
        for oid in pending[start : start + batch]:
            if postings.document(txn, scope, oid) is not None:
                continue  # indexed already (written again by a later commit)
            try:
                fresh.append((oid, view.node(oid)))
            except NotFound:
                continue  # erased or collected since it was queued
        index_nodes(txn, scope, writer, embedder, fresh, batch)
        count += len(fresh)
    writer.close()
    return count


def _indexed(view: View) -> Iterator[tuple[bytes, Node]]:
    """Every indexed node version that can still be read."""
    prefix = view.stores.scope + postings.DOC
    for key, _ in view.txn.scan(Space.RECALL, prefix):
        oid = key[len(prefix) :]
        try:
            yield oid, view.node(oid)
        except NotFound:
            continue


def embed(txn: WriteTxn, scope: bytes, embedder: Embedder, nodes: list[Node], batch: int = BATCH) -> int:
    """Store vectors for the contents of ``nodes`` that have none under this model."""
    return _embed_contents(txn, scope, embedder, [content_hash(node) for node in nodes], nodes, batch)


def _embed_contents(
    txn: WriteTxn,
    scope: bytes,
    embedder: Embedder,
    hashes: list[bytes],
    nodes: list[Node],
    batch: int,
    fresh: FreshVectors | None = None,
) -> int:
    model = embedder.model_id
    txn.put(Space.RECALL, scope + MODEL + model.encode(), str(embedder.dim).encode())
    missing: dict[bytes, Node] = {}
    for chash, node in zip(hashes, nodes, strict=True):
        if chash in missing:
            continue
        if fresh is None:
            if not vector_store.has_vector(txn, scope, model, chash):
                missing[chash] = node
        elif chash not in fresh.embedded:
            fresh.embedded.add(chash)
            missing[chash] = node
    items = list(missing.items())
    if not items:
        return 0
    writer = fresh.writer(txn, scope, model) if fresh is not None else vector_store.Writer(txn, scope, model)
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        found = np.asarray(embedder([text_of(node) for _, node in chunk]), dtype=np.float32)
        if found.shape != (len(chunk), embedder.dim):
            raise InvalidInput(
                f"embedder {model} returned shape {found.shape}, not ({len(chunk)}, {embedder.dim})"
            )
        norms = np.linalg.norm(found, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        writer.store([chash for chash, _ in chunk], (found / norms).astype(np.float32))
    return len(items)


def clear(txn: WriteTxn, scope: bytes, vectors: bool, rebuilding: bool = False) -> int:
    """Drop the derived recall entries of a tenant (and its vectors, when asked).

    Vectors in an older layout go whatever is asked: they could not be read.
    ``rebuilding`` leaves the document-number records for a rebuild to
    overwrite from 0 up (cheaper than deleting them first), which then drops
    those it did not reach with :func:`postings.drop_numbers`.

    Returns:
        The next document number the index had (0 unless ``rebuilding``).
    """
    current = format_current(txn, scope)
    vectors = vectors or not current
    rebuilding = rebuilding and current
    end = postings.stats(txn, scope).next if rebuilding else 0
    if vectors:
        vector_store.clear(txn, scope)  # first: it reads the model keys
    seq = postings.last_change(txn, scope)
    if current:
        # Family by family: the number records may stay, and are not read for nothing.
        families = [QUEUE, postings.DOC, postings.TERM, postings.CONTENT, postings.STATS, postings.CHANGES]
        families += [_FORMAT, *([] if rebuilding else [postings.NUMBER]), *([MODEL] if vectors else [])]
    else:
        families = [b""]  # an older layout: everything goes
    for family in families:
        for key in [key for key, _ in txn.scan(Space.RECALL, scope + family)]:
            txn.delete(Space.RECALL, key)
    # The change log goes on counting from where it was, so every handle sees the ``*``.
    txn.put(Space.RECALL, scope + postings.CHANGES + (seq + 1).to_bytes(8, "big"), b"*")
    stamp(txn, scope)
    return end
