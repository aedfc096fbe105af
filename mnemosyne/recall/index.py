"""The recall indexes: BM25 postings and embedding vectors, derived and rebuildable.

Commits only enqueue the node versions they write (one small key each), so
writing stays cheap; a search on a writable handle first catches up: it indexes
the queued versions (postings, a document record, the content → versions map)
and embeds contents that have no vector yet. Vectors are keyed by (model id,
content hash): equal texts embed once, another model never disturbs them.

Keys (all behind the tenant scope), in the ``recall`` keyspace:
``q`` node hash (queued) · ``d`` node hash → [id, words, content hash] ·
``t`` word 00 node hash → (tf, words) · ``c`` content hash · node hash → id ·
``n`` → (documents, words) · ``m`` model id → dimension.
In the ``vectors`` keyspace: model 00 content hash → float32 vector, and
model 01 sequence → change (``+``/``-`` content hash, ``*`` start over), which
lets each handle refresh its in-memory matrix incrementally.
"""

from __future__ import annotations

import math
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import msgspec
import numpy as np
import numpy.typing as npt

from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.kv.base import ReadTxn, Space, WriteTxn
from mnemosyne.objects import Node
from mnemosyne.recall.embedders import Embedder, Vectors
from mnemosyne.recall.text import content_hash, text_of, words
from mnemosyne.view import View

_QUEUE, _DOC, _TERM, _CONTENT, _STATS, _MODEL = b"q", b"d", b"t", b"c", b"n", b"m"
_POSTING = struct.Struct(">II")
_STATS_FORMAT = struct.Struct(">QQ")
_DOC_CODEC = msgspec.msgpack.Decoder(tuple[str, int, bytes])
_ENCODER = msgspec.msgpack.Encoder()
K1, B = 1.2, 0.75
"""BM25 parameters (the usual ones)."""

Accept = Callable[[str, bytes], bool]
"""Whether a (node id, node hash) candidate may be returned: the snapshot check."""


# -- writing ----------------------------------------------------------------------


def enqueue(txn: WriteTxn, scope: bytes, node_hashes: Iterator[bytes] | list[bytes]) -> None:
    """Queue newly written node versions for indexing (called in the commit path).

    One small put per version and no read: a version indexed already is skipped
    when the queue is drained.
    """
    prefix = scope + _QUEUE
    for oid in node_hashes:
        txn.put(Space.RECALL, prefix + oid, b"")


def needs_catch_up(txn: ReadTxn, scope: bytes, embedder: Embedder | None) -> bool:
    """Whether versions are queued, or the embedder's model has not embedded this tenant yet."""
    if next(iter(txn.scan(Space.RECALL, scope + _QUEUE)), None) is not None:
        return True
    if embedder is None or txn.get(Space.RECALL, scope + _MODEL + embedder.model_id.encode()) is not None:
        return False
    return next(iter(txn.scan(Space.RECALL, scope + _DOC)), None) is not None


def queued(txn: ReadTxn, scope: bytes) -> list[bytes]:
    """Node versions waiting to be indexed."""
    prefix = scope + _QUEUE
    return [key[len(prefix) :] for key, _ in txn.scan(Space.RECALL, prefix)]


def _stats(txn: ReadTxn, scope: bytes) -> tuple[int, int]:
    data = txn.get(Space.RECALL, scope + _STATS)
    if data is None:
        return 0, 0
    docs, total = _STATS_FORMAT.unpack(data)
    return int(docs), int(total)


def index_node(txn: WriteTxn, scope: bytes, oid: bytes, node: Node) -> None:
    """Add one node version's postings, document record and content entry."""
    if txn.get(Space.RECALL, scope + _DOC + oid) is not None:
        return
    found = words(text_of(node))
    chash = content_hash(node)
    for word, tf in Counter(found).items():
        key = scope + _TERM + word.encode() + b"\x00" + oid
        txn.put(Space.RECALL, key, _POSTING.pack(tf, len(found)))
    txn.put(Space.RECALL, scope + _DOC + oid, _ENCODER.encode((node.id, len(found), chash)))
    txn.put(Space.RECALL, scope + _CONTENT + chash + oid, node.id.encode())
    docs, total = _stats(txn, scope)
    txn.put(Space.RECALL, scope + _STATS, _STATS_FORMAT.pack(docs + 1, total + len(found)))


def unindex_node(txn: WriteTxn, scope: bytes, oid: bytes, node: Node) -> None:
    """Remove every trace of one node version from the recall indexes.

    Its vector goes too when no other version has the same content.
    """
    txn.delete(Space.RECALL, scope + _QUEUE + oid)
    if txn.get(Space.RECALL, scope + _DOC + oid) is not None:
        found = words(text_of(node))
        for word in set(found):
            txn.delete(Space.RECALL, scope + _TERM + word.encode() + b"\x00" + oid)
        txn.delete(Space.RECALL, scope + _DOC + oid)
        docs, total = _stats(txn, scope)
        txn.put(
            Space.RECALL, scope + _STATS, _STATS_FORMAT.pack(max(docs - 1, 0), max(total - len(found), 0))
        )
    chash = content_hash(node)
    txn.delete(Space.RECALL, scope + _CONTENT + chash + oid)
    if next(iter(txn.scan(Space.RECALL, scope + _CONTENT + chash)), None) is None:
        for model in models(txn, scope):
            if txn.delete(Space.VECTORS, scope + model.encode() + b"\x00" + chash):
                _log(txn, scope, model, b"-" + chash)


def models(txn: ReadTxn, scope: bytes) -> list[str]:
    """The model ids that have vectors in this tenant."""
    prefix = scope + _MODEL
    return [key[len(prefix) :].decode() for key, _ in txn.scan(Space.RECALL, prefix)]


def _log(txn: WriteTxn, scope: bytes, model: str, change: bytes) -> None:
    prefix = scope + model.encode() + b"\x01"
    txn.put(Space.VECTORS, prefix + (_last_seq(txn, prefix) + 1).to_bytes(8, "big"), change)


def _last_seq(txn: ReadTxn, log: bytes) -> int:
    last = next(iter(txn.scan(Space.VECTORS, log, reverse=True)), None)
    return int.from_bytes(last[0][len(log) :], "big") if last else 0


def catch_up(
    view: View,
    txn: WriteTxn,
    embedder: Embedder | None,
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
    total: int | None = None,
) -> int:
    """Index every queued node version and embed contents that lack a vector.

    Args:
        view: reads node versions.
        txn: where the indexes are written.
        embedder: embeds new contents (None: postings only).
        batch: texts per embedder call.
        progress: called with (done, total) after each batch.
        total: the expected count, for ``progress``.

    Returns:
        How many node versions were indexed.
    """
    scope = view.stores.scope
    if embedder is not None and txn.get(Space.RECALL, scope + _MODEL + embedder.model_id.encode()) is None:
        # A model new to this tenant: embed what was indexed before it came.
        embed(txn, scope, embedder, [node for _, node in _indexed(view)], batch)
    pending = queued(txn, scope)
    expected = total if total is not None else len(pending)
    count = 0
    for start in range(0, len(pending), batch):
        fresh: list[Node] = []
        for oid in pending[start : start + batch]:
            txn.delete(Space.RECALL, scope + _QUEUE + oid)
            try:
                node = view.node(oid)
            except NotFound:
                continue  # erased or collected since it was queued
            index_node(txn, scope, oid, node)
            fresh.append(node)
            count += 1
        if embedder is not None and fresh:
            embed(txn, scope, embedder, fresh, batch)
        if progress is not None:
            progress(min(start + batch, len(pending)), expected)
    return count


def keep_vectors_of(txn: WriteTxn, scope: bytes, contents: set[bytes]) -> int:
    """Drop every vector whose content is not in ``contents``; return how many went."""
    dropped = 0
    for model in models(txn, scope):
        prefix = scope + model.encode() + b"\x00"
        orphans = [key for key, _ in txn.scan(Space.VECTORS, prefix) if key[len(prefix) :] not in contents]
        for key in orphans:
            txn.delete(Space.VECTORS, key)
            _log(txn, scope, model, b"-" + key[len(prefix) :])
        dropped += len(orphans)
    return dropped


def _indexed(view: View) -> Iterator[tuple[bytes, Node]]:
    """Every indexed node version that can still be read."""
    prefix = view.stores.scope + _DOC
    for key, _ in view.txn.scan(Space.RECALL, prefix):
        oid = key[len(prefix) :]
        try:
            yield oid, view.node(oid)
        except NotFound:
            continue


def embed(txn: WriteTxn, scope: bytes, embedder: Embedder, nodes: list[Node], batch: int = 256) -> int:
    """Store vectors for the contents of ``nodes`` that have none under this model."""
    model = embedder.model_id
    txn.put(Space.RECALL, scope + _MODEL + model.encode(), str(embedder.dim).encode())
    missing: dict[bytes, str] = {}
    for node in nodes:
        chash = content_hash(node)
        if chash not in missing and txn.get(Space.VECTORS, scope + model.encode() + b"\x00" + chash) is None:
            missing[chash] = text_of(node)
    items = list(missing.items())
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        vectors = np.asarray(embedder([text for _, text in chunk]), dtype=np.float32)
        if vectors.shape != (len(chunk), embedder.dim):
            raise InvalidInput(
                f"embedder {model} returned shape {vectors.shape}, not ({len(chunk)}, {embedder.dim})"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        vectors = (vectors / norms).astype(np.float32)
        for (chash, _), row in zip(chunk, vectors, strict=True):
            txn.put(Space.VECTORS, scope + model.encode() + b"\x00" + chash, row.tobytes())
            _log(txn, scope, model, b"+" + chash)
    return len(items)


def clear(txn: WriteTxn, scope: bytes, vectors: bool) -> None:
    """Drop the derived recall entries of a tenant (and its vectors, when asked).

    Each model's change log keeps counting up from where it was, after a ``*``
    entry that tells every handle's cached matrix to start over (a log that
    restarted at 1 would hide new vectors from handles that had read further).
    """
    restart = {model: _last_seq(txn, scope + model.encode() + b"\x01") for model in models(txn, scope)}
    spaces = [Space.RECALL, Space.VECTORS] if vectors else [Space.RECALL]
    for space in spaces:
        keys = [key for key, _ in txn.scan(space, scope)]
        if space is Space.RECALL and not vectors:
            keys = [k for k in keys if not k.startswith(scope + _MODEL)]
        for key in keys:
            txn.delete(space, key)
    if vectors:
        for model, seq in restart.items():
            log = scope + model.encode() + b"\x01"
            txn.put(Space.VECTORS, log + (seq + 1).to_bytes(8, "big"), b"*")


# -- reading ----------------------------------------------------------------------


def lexical(view: View, query: str, accept: Accept, limit: int) -> list[tuple[bytes, str, float]]:
    """BM25 over indexed and queued versions; the best ``limit`` accepted ones.

    Returns:
        ``(node hash, node id, score)``, best first.
    """
    txn = view.txn
    scope = view.stores.scope
    terms = sorted(set(words(query)))  # a fixed order: the same sums in every process
    if not terms:
        return []
    docs, total = _stats(txn, scope)
    pending = [(oid, view.node(oid)) for oid in _readable_queue(view)]
    pending_words = {oid: words(text_of(node)) for oid, node in pending}
    docs += len(pending)
    total += sum(len(w) for w in pending_words.values())
    average = total / docs if docs else 1.0
    scores: dict[bytes, float] = {}
    for term in terms:
        postings = [
            (key[-32:], *_POSTING.unpack(value))
            for key, value in txn.scan(Space.RECALL, scope + _TERM + term.encode() + b"\x00")
        ]
        postings += [
            (oid, found.count(term), len(found)) for oid, found in pending_words.items() if term in found
        ]
        if not postings:
            continue
        idf = math.log(1 + (docs - len(postings) + 0.5) / (len(postings) + 0.5))
        for oid, tf, length in postings:
            weight = tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
            scores[oid] = scores.get(oid, 0.0) + idf * weight
    pending_ids = {oid: node.id for oid, node in pending}
    out: list[tuple[bytes, str, float]] = []
    for oid, score in sorted(scores.items(), key=lambda item: (-item[1], item[0])):
        node_id = pending_ids.get(oid) or _doc_id(txn, scope, oid)
        if node_id is not None and accept(node_id, oid):
            out.append((oid, node_id, score))
            if len(out) >= limit:
                break
    return out


def _readable_queue(view: View) -> Iterator[bytes]:
    """Queued versions not indexed yet (commits queue without looking) and still stored."""
    scope = view.stores.scope
    for oid in queued(view.txn, scope):
        if view.txn.get(Space.RECALL, scope + _DOC + oid) is not None:
            continue  # indexed already: its postings count, not a second copy
        try:
            view.node(oid)
        except NotFound:
            continue
        yield oid


def _doc_id(txn: ReadTxn, scope: bytes, oid: bytes) -> str | None:
    data = txn.get(Space.RECALL, scope + _DOC + oid)
    return _DOC_CODEC.decode(data)[0] if data is not None else None


def versions_with_content(txn: ReadTxn, scope: bytes, chash: bytes) -> Iterator[tuple[bytes, str]]:
    """``(node hash, id)`` of every indexed version whose content hashes to ``chash``."""
    prefix = scope + _CONTENT + chash
    for key, value in txn.scan(Space.RECALL, prefix):
        yield key[len(prefix) :], value.decode()


class _Matrix:
    """One model's vectors in memory: rows, their content hashes, and liveness."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.rows = np.zeros((0, dim), dtype=np.float32)
        self.hashes: list[bytes] = []
        self.alive = np.zeros(0, dtype=bool)
        self.keys = np.zeros(0, dtype=np.uint64)  # the content hash's first 8 bytes: tie-breaks
        self.where: dict[bytes, int] = {}
        self.seq = 0

    def add(self, chash: bytes, vector: Vectors) -> None:
        row = self.where.get(chash)
        if row is not None:
            self.rows[row] = vector
            self.alive[row] = True
            return
        if len(self.hashes) == len(self.rows):
            grown = np.zeros((max(16, 2 * len(self.rows)), self.dim), dtype=np.float32)
            grown[: len(self.rows)] = self.rows
            self.rows = grown
            alive = np.zeros(len(grown), dtype=bool)
            alive[: len(self.alive)] = self.alive
            self.alive = alive
            keys = np.zeros(len(grown), dtype=np.uint64)
            keys[: len(self.keys)] = self.keys
            self.keys = keys
        row = len(self.hashes)
        self.hashes.append(chash)
        self.where[chash] = row
        self.rows[row] = vector
        self.alive[row] = True
        self.keys[row] = int.from_bytes(chash[:8], "big")


class VectorCache:
    """Per-handle in-memory matrices, refreshed from the vectors keyspace's change log."""

    def __init__(self) -> None:
        self._matrices: dict[tuple[bytes, str], _Matrix] = {}
        self._lock = threading.Lock()

    def matrix(self, txn: ReadTxn, scope: bytes, model: str, dim: int) -> _Matrix:
        """The up-to-date matrix of ``model`` as this transaction sees it."""
        with self._lock:
            found = self._matrices.get((scope, model))
            if found is None or found.dim != dim:
                found = _Matrix(dim)
                self._matrices[(scope, model)] = found
            prefix = scope + model.encode()
            log = prefix + b"\x01"
            start = log + (found.seq + 1).to_bytes(8, "big")
            for key, change in txn.scan(Space.VECTORS, log, start=start):
                seq = int.from_bytes(key[len(log) :], "big")
                if change == b"*":  # the vectors were rebuilt: start over
                    found = _Matrix(dim)
                    self._matrices[(scope, model)] = found
                found.seq = seq
                chash = change[1:]
                if change[:1] == b"+":
                    data = txn.get(Space.VECTORS, prefix + b"\x00" + chash)
                    if data is not None:
                        found.add(chash, np.frombuffer(data, dtype=np.float32))
                else:
                    row = found.where.get(chash)
                    if row is not None:
                        found.alive[row] = False
            return found


def semantic(
    view: View,
    cache: VectorCache,
    embedder: Embedder,
    query: str,
    accept: Accept,
    limit: int,
    namespace: Callable[[int], list[tuple[str, bytes]] | None] | None = None,
) -> list[tuple[bytes, str, float]]:
    """Exact cosine search over the model's vectors; the best ``limit`` accepted versions.

    ``namespace(cap)`` may list the snapshot's ``(id, hash)`` entries under a
    prefix filter, or None when there are more than ``cap``: a small namespace is
    scored directly instead of walking the whole ranking for its few members.

    Returns:
        ``(node hash, node id, score)``, best first.
    """
    txn = view.txn
    scope = view.stores.scope
    matrix = cache.matrix(txn, scope, embedder.model_id, embedder.dim)
    count = len(matrix.hashes)
    if count == 0:
        return []
    vector = np.asarray(embedder([query]), dtype=np.float32)[0]
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return []
    unit = vector / norm
    members = namespace(max(256, count // 50)) if namespace is not None else None
    if members is not None:
        return _score_members(txn, scope, matrix, unit, members, accept, limit)
    scores = matrix.rows[:count] @ unit
    out: list[tuple[bytes, str, float]] = []
    for row in _best_first(scores, matrix.keys[:count], matrix.alive[:count], max(64, 8 * limit)):
        for oid, node_id in versions_with_content(txn, scope, matrix.hashes[row]):
            if accept(node_id, oid):
                out.append((oid, node_id, float(scores[row])))
        if len(out) >= limit:
            break
    return out[:limit]


def _score_members(
    txn: ReadTxn,
    scope: bytes,
    matrix: _Matrix,
    unit: Vectors,
    members: list[tuple[str, bytes]],
    accept: Accept,
    limit: int,
) -> list[tuple[bytes, str, float]]:
    """Score just the given versions (a small filtered namespace), best first."""
    found: list[tuple[bytes, str, int]] = []
    for node_id, oid in members:
        data = txn.get(Space.RECALL, scope + _DOC + oid)
        if data is None:
            continue
        row = matrix.where.get(_DOC_CODEC.decode(data)[2])
        if row is not None and matrix.alive[row]:
            found.append((oid, node_id, row))
    if not found:
        return []
    scores = matrix.rows[[row for _, _, row in found]] @ unit
    order = sorted(
        range(len(found)), key=lambda i: (-float(scores[i]), matrix.hashes[found[i][2]], found[i][0])
    )
    out: list[tuple[bytes, str, float]] = []
    for i in order:
        oid, node_id, _ = found[i]
        if accept(node_id, oid):
            out.append((oid, node_id, float(scores[i])))
            if len(out) >= limit:
                break
    return out


def _best_first(
    scores: npt.NDArray[np.float32], keys: npt.NDArray[np.uint64], alive: npt.NDArray[np.bool_], chunk: int
) -> Iterator[int]:
    """Live rows in the order (score descending, content hash), a growing chunk at a time.

    Walking the whole order lazily keeps a selective filter exact (no row is
    skipped) and cheap (only the rows walked are sorted). Equal scores break by
    content hash, not by where a row sits, so the answer does not depend on the
    order vectors were added in. (A float32 matrix product may give equal
    vectors scores that differ in the last bit; those are not ties.)
    """
    remaining = alive.copy()
    while True:
        left = np.flatnonzero(remaining)
        if len(left) == 0:
            return
        if len(left) > chunk:
            values = scores[left]
            boundary = values[np.argpartition(-values, chunk - 1)[chunk - 1]]
            above = left[values > boundary]
            tied = left[values == boundary]
            room = chunk - len(above)  # at least 1: ``boundary`` is the chunk-th best
            if len(tied) > room:
                # A large group of equal scores: its smallest content hashes come first.
                tied = tied[np.argpartition(keys[tied], room - 1)[:room]]
            take = np.concatenate([above, tied])
        else:
            take = left
        take = take[np.lexsort((keys[take], -scores[take]))]
        remaining[take] = False
        yield from take.tolist()
        chunk *= 4
