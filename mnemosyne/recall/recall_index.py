"""The recall indexes: BM25 postings and embedding vectors, derived and rebuildable.

Commits only enqueue the node versions they write (one small entry per commit,
see :mod:`mnemosyne.index.recall_queue`), so writing stays cheap; a search on a
writable handle first catches up: it indexes the queued versions (see
:mod:`mnemosyne.recall.postings`) and embeds contents that have no vector yet
(see :mod:`mnemosyne.recall.vectors`), a batch at a time. A rebuild
(:mod:`mnemosyne.recall.rebuild`) reads the stored versions directly.

This module owns one key of the ``recall`` keyspace, ``f`` → the layout's format
number. An index written in an older layout (no ``f`` key, yet totals or models
present) is dropped and every stored version queued again at the next catch-up
or erasure; until then read-only handles refuse to search it rather than misread it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress

import numpy as np

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.index.recall_queue import RecallQueue
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Node, decode_object
from mnemosyne.model.results import PendingRecall
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.postings import Postings, bulk
from mnemosyne.recall.postings_writer import Writer
from mnemosyne.recall.text import content_hash, forget_words, text_of
from mnemosyne.recall.vectors import VectorStore
from mnemosyne.recall.vectors import Writer as VectorWriter
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

_FORMAT = b"f"
FORMAT = b"5"
"""The layout written by this version: numbered documents, postings segments, vector blocks,
the words of ids among a document's words, a summary of each word's segments, and words
stemmed, split at "_"."""
_POSTINGS_STALE = (b"2", b"3", b"4")
"""Layouts this version reads and upgrades by re-indexing postings alone: their vectors
are laid out as this version's (layout 2 lacked id words, layout 3 segment summaries,
layout 4 kept words unstemmed)."""
BATCH = 256
"""Versions read and texts embedded per step."""


class Layout:
    """Which layout one tenant's recall keyspace is written in (the ``f`` key)."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def stamped(self, txn: ReadTxn) -> bytes | None:
        """The stored format number, or None."""
        return txn.get(Space.RECALL, self.scope + _FORMAT)

    def stamp(self, txn: WriteTxn) -> None:
        """Mark the keyspace as written in this version's layout."""
        txn.put(Space.RECALL, self.scope + _FORMAT, FORMAT)

    def wipe(self, txn: WriteTxn) -> None:
        """Delete every key of the tenant's recall keyspace, whatever layout wrote it."""
        for key in [key for key, _ in txn.scan(Space.RECALL, self.scope)]:
            txn.discard(Space.RECALL, key)


class RecallIndex:
    """One tenant's recall indexes: postings, vectors, the queue and the layout stamp."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope
        self.postings = Postings(scope)
        self.vectors = VectorStore(scope)
        self.queue = RecallQueue(scope)
        self.layout = Layout(scope)

    def format_current(self, txn: ReadTxn) -> bool:
        """Whether the index is in this version's layout (or empty)."""
        found = self.layout.stamped(txn)
        if found is not None:
            return found == FORMAT
        # Older layouts wrote totals as soon as they indexed, and a model key as they embedded.
        return not self.postings.has_totals(txn) and not self.vectors.models(txn)

    def vectors_current(self, txn: ReadTxn) -> bool:
        """Whether the index is readable, its vectors kept by an upgrade.

        True for this version's layout, and for one whose postings alone are stale
        (see ``_POSTINGS_STALE``).
        """
        return self.format_current(txn) or self.layout.stamped(txn) in _POSTINGS_STALE

    def unstemmed(self, txn: ReadTxn) -> bool:
        """Whether the postings are of a layout before 5, whose words are not stemmed."""
        return self.layout.stamped(txn) in _POSTINGS_STALE

    def check_format(self, txn: ReadTxn) -> None:
        """Refuse to read an index in a layout this version cannot read.

        Raises:
            InvalidInput: the index predates this version (a writable handle rebuilds it).
        """
        if not self.vectors_current(txn):
            raise InvalidInput(
                "the recall index was written by an older version: search once from a writable "
                "handle, or run 'mnemo reindex', to rebuild it"
            )

    def needs_catch_up(self, txn: ReadTxn, embedder: Embedder | None) -> bool:
        """Whether versions are queued, the index's layout is old, or the model is new here.

        Also when the tenant has vectors but no index identity yet (written by an
        older version): the catch-up makes one, which a saved index is named by.
        """
        if self.queue.any(txn) or not self.format_current(txn):
            return True
        if embedder is None:
            return False
        if self.vectors.has_model(txn, embedder.model_id):
            return self.vectors.identity(txn) is None
        return self.postings.any_document(txn)

    def pending(self, view: View, embedder: Embedder | None) -> PendingRecall:
        """What :func:`catch_up` would do now: how many versions it indexes and embeds, at most."""
        txn = view.txn
        model = embedder.model_id if embedder is not None else None
        if not self.format_current(txn):
            # Counted by kind tag alone, as a rebuild counts them: decoding every node is the work itself.
            stored = sum(data[1:8] == codec.NODE_TAG for _, data in view.objects.scan(txn))
            return PendingRecall(
                versions=stored, embeddings=stored if model else 0, model=model, rebuild=True
            )
        queued = len(self.queue.queued(txn))
        if model is None:
            return PendingRecall(versions=queued)
        earlier = 0 if self.vectors.has_model(txn, model) else sum(1 for _ in self.postings.documents(txn))
        return PendingRecall(versions=queued, embeddings=queued + earlier, model=model)

    def clear(self, txn: WriteTxn, vectors: bool, rebuilding: bool = False) -> int:
        """Drop the derived recall entries of the tenant (and its vectors, when asked).

        An older layout goes whole, vectors included: it could not be read
        (one whose postings alone are stale keeps its vectors).
        ``rebuilding`` leaves the document-number records for a rebuild to
        overwrite from 0 up (cheaper than deleting them first), which then drops
        those it did not reach with :meth:`Postings.drop_numbers`.

        Returns:
            The next document number the index had (0 unless ``rebuilding``).
        """
        if not self.vectors_current(txn):
            seq = self.postings.last_change(txn)
            self.vectors.clear(txn)  # first: it reads the model keys, and keeps its logs counting
            self.layout.wipe(txn)
            self.postings.restart_after(txn, seq)
            self.layout.stamp(txn)
            return 0
        end = self.postings.stats(txn).next if rebuilding else 0
        if vectors:
            self.vectors.clear(txn)
            self.vectors.forget_models(txn)
        self.queue.clear(txn)
        self.postings.clear(txn, keep_numbers=rebuilding)
        self.layout.stamp(txn)
        return end

    def requeue(self, view: WriteView) -> int:
        """Forget the derived postings and queue every stored node version again.

        Vectors stay (they are keyed by content and model, and cost model time),
        except those of contents no stored version has any more. Returns how many
        versions were queued.
        """
        self.clear(view.txn, vectors=False)
        oids: list[bytes] = []
        contents: set[bytes] = set()
        for oid, node in stored_nodes(view):
            oids.append(oid)
            if node is not None:
                contents.add(content_hash(node))
        self.queue.add(view.txn, oids)
        self.vectors.keep_only(view.txn, contents)
        return len(oids)

    def unindex(self, view: WriteView, oid: bytes, node: Node) -> None:
        """Remove every trace of one node version from the recall indexes, but the queue.

        Its vector goes too when no other version has the same content. The eraser
        takes its versions out of the queue with :meth:`RecallQueue.drop`, once for all.
        """
        txn = view.txn
        if not self.format_current(txn):
            self.requeue(view)  # drops an old layout (vectors too, unless they are current)
        self.postings.remove(txn, oid, node)
        forget_words()
        chash = content_hash(node)
        if not self.postings.versions_with_content(txn, chash):
            for model in self.vectors.models(txn):
                self.vectors.drop(txn, model, [chash])


def stored_nodes(view: View) -> Iterator[tuple[bytes, Node | None]]:
    """Every stored node version; None for one whose bytes do not verify or decode."""
    for oid, data in view.objects.scan(view.txn):
        if data[1:8] != codec.NODE_TAG:
            continue
        node: Node | None = None
        if codec.object_id(data) == oid:
            try:
                decoded = decode_object(data, oid)
            except CorruptObject:
                decoded = None  # fsck reports it; its vector may go and come back once repaired
            node = decoded if isinstance(decoded, Node) else None
        yield oid, node


def index_nodes(
    txn: WriteTxn,
    index: RecallIndex,
    writer: Writer,
    embedder: Embedder | None,
    nodes: list[tuple[bytes, Node]],
    batch: int,
    fresh: FreshVectors | None = None,
) -> list[bytes]:
    """Index ``nodes`` and embed their new contents; return their content hashes."""
    hashes = writer.add(nodes)
    if embedder is not None and nodes:
        _embed_contents(txn, index, embedder, hashes, [node for _, node in nodes], batch, fresh)
    return hashes


class FreshVectors:
    """Vectors cleared in this transaction: what was embedded since, and the model's writer.

    So no content is looked up, and the map (keyed by random content hashes) is
    written once, by :meth:`close`, in key order.
    """

    def __init__(self) -> None:
        self.embedded: set[bytes] = set()
        self._writer: VectorWriter | None = None

    def writer(self, txn: WriteTxn, store: VectorStore, model: str) -> VectorWriter:
        """The model's vector writer (one model per rebuild)."""
        if self._writer is None:
            self._writer = store.writer(txn, model, defer_map=True)
        return self._writer

    def close(self) -> None:
        """Write the map entries."""
        if self._writer is not None:
            self._writer.close()


def _stored(view: WriteView, oids: list[bytes]) -> list[tuple[bytes, Node]]:
    """The versions of ``oids`` still stored, read at once; erased or collected since queued: left out."""
    try:
        nodes = view.objects.nodes(view.txn, oids)  # one round trip on PostgreSQL
    except NotFound:  # one of them is gone (collected): one by one, to leave out only those
        found: list[tuple[bytes, Node]] = []
        for oid in oids:
            with suppress(NotFound):
                found.append((oid, view.node(oid)))
        return found
    return [(oid, node) for oid, node in zip(oids, nodes, strict=True) if node is not None]


@bulk()
def catch_up(
    view: WriteView, embedder: Embedder | None, progress: Callable[[int, int], None] | None = None
) -> int:
    """Index every queued node version and embed contents that lack a vector.

    ``embedder`` embeds new contents (None: postings only). ``progress`` is called
    with (done, total) after each batch: versions gone through, of how many
    (:attr:`PendingRecall.total`). Returns how many node versions were indexed.
    """
    txn, batch = view.txn, BATCH
    index = RecallIndex(view.stores.scope)
    if not index.format_current(txn):
        index.requeue(view)
    index.layout.stamp(txn)
    if embedder is not None and index.vectors.has_model(txn, embedder.model_id):
        index.vectors.ensure_identity(txn)
    earlier: list[bytes] = []
    if embedder is not None and not index.vectors.has_model(txn, embedder.model_id):
        # A model new to this tenant: embed what was indexed before it came.
        index.vectors.set_model(txn, embedder.model_id, embedder.dim)
        earlier = list(index.postings.documents(txn))
    pending = index.queue.queued(txn)
    index.queue.clear(txn)  # all taken: the transaction writes every one of them or nothing
    total, done = len(earlier) + len(pending), 0
    for start in range(0, len(earlier), batch):
        assert embedder is not None  # earlier is empty without one
        embed(
            txn, index, embedder, [node for _, node in _readable(view, earlier[start : start + batch])], batch
        )
        done += len(earlier[start : start + batch])
        if progress is not None:
            progress(done, total)
    writer = Writer(txn, index.postings)
    count = 0
    for start in range(0, len(pending), batch):
        part = pending[start : start + batch]
        indexed = index.postings.indexed(txn, part)  # written again by a later commit
        fresh = _stored(view, [oid for oid in part if oid not in indexed])
        index_nodes(txn, index, writer, embedder, fresh, batch)
        count += len(fresh)
        done += len(pending[start : start + batch])
        if progress is not None:
            progress(done, total)
    writer.close()
    return count


def _readable(view: View, oids: list[bytes]) -> Iterator[tuple[bytes, Node]]:
    """Those of the node versions ``oids`` that can still be read."""
    for oid in oids:
        try:
            yield oid, view.node(oid)
        except NotFound:
            continue


def embed(
    txn: WriteTxn, index: RecallIndex, embedder: Embedder, nodes: list[Node], batch: int = BATCH
) -> int:
    """Store vectors for the contents of ``nodes`` that have none under this model."""
    return _embed_contents(txn, index, embedder, [content_hash(node) for node in nodes], nodes, batch)


def _embed_contents(
    txn: WriteTxn,
    index: RecallIndex,
    embedder: Embedder,
    hashes: list[bytes],
    nodes: list[Node],
    batch: int,
    fresh: FreshVectors | None = None,
) -> int:
    model = embedder.model_id
    store = index.vectors
    store.set_model(txn, model, embedder.dim)
    store.ensure_identity(txn)
    missing: dict[bytes, Node] = {}
    # Looked up at once: on PostgreSQL a round trip each.
    there = store.with_vectors(txn, model, list(dict.fromkeys(hashes))) if fresh is None else set()
    for chash, node in zip(hashes, nodes, strict=True):
        if chash in missing:
            continue
        if fresh is None:
            if chash not in there:
                missing[chash] = node
        elif chash not in fresh.embedded:
            fresh.embedded.add(chash)
            missing[chash] = node
    items = list(missing.items())
    if not items:
        return 0
    writer = fresh.writer(txn, store, model) if fresh is not None else store.writer(txn, model)
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
