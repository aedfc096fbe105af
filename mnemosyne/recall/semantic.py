"""Semantic ranking: the best accepted versions by cosine similarity to a query.

Exact for a model with fewer vectors than the store's ``recall.approximate_from``
setting: every live row is scored, and the ranking is walked best first until
enough versions pass the filters, so the answer is the exact top-k of what
passes. Past it, an approximate index (:mod:`mnemosyne.recall.approximate`)
proposes rows nearest first; those that pass the filters are scored exactly
from their stored float32 vectors and ranked. The filters stay exact (nothing
that fails one is returned, erased and dropped rows included), the scores are
exact, and only a row the index does not propose can be missed. A namespace
small enough to list is scored whole, exactly, in either case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from mnemosyne.index.view import View
from mnemosyne.recall.embedders import Embedder, Vectors
from mnemosyne.recall.postings import Accept, Postings, Version
from mnemosyne.recall.vectors import Matrix, VectorCache, VectorStore, block_row
from mnemosyne.store.kv.base import ReadTxn

SMALL_NAMESPACE = 2_000
"""With the approximate index, a namespace of at most this many ids is scored whole
(reading each one's vector from its block); a larger one is found by the index."""

_SCAN_FROM = 4096
"""Rows asked of the index past which (and past a quarter of the rows) it scans them all."""

Rows = npt.NDArray[np.intp]


def semantic(
    view: View,
    postings: Postings,
    cache: VectorCache,
    embedder: Embedder,
    query: str,
    accept: Accept,
    limit: int,
    namespace: Callable[[int], list[tuple[str, bytes]] | None] | None = None,
    versions: Callable[[bytes], tuple[Version, ...]] | None = None,
    approximate_from: int | None = None,
) -> list[tuple[bytes, str, float]]:
    """Cosine search over the model's vectors; the best ``limit`` accepted versions.

    ``namespace(cap)`` may list the snapshot's ``(id, hash)`` entries under a
    prefix filter, or None when there are more than ``cap``: a small namespace is
    scored directly instead of walking the whole ranking for its few members.
    ``versions`` looks up a content's versions (default: read from ``view``).
    ``approximate_from``: how many vectors a model needs for the approximate
    index to rank them (None: always exact; see the module docstring).

    Returns:
        ``(node hash, node id, score)``, best first.
    """
    txn = view.txn
    store = VectorStore(view.stores.scope)
    matrix = cache.matrix(txn, store, embedder.model_id, embedder.dim, approximate_from)
    count = len(matrix.hashes)
    if count == 0:
        return []
    vector = np.asarray(embedder([query]), dtype=np.float32)[0]
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return []
    unit = vector / norm
    approximate = matrix.approx is not None
    if approximate:
        stored = _stored(txn, store, embedder.model_id, matrix)
        cap = SMALL_NAMESPACE
    else:
        stored, cap = (lambda rows: matrix.rows[rows]), max(256, count // 50)
    members = namespace(cap) if namespace is not None else None
    if members is not None:
        return _score_members(txn, postings, matrix, unit, members, accept, limit, stored)
    lookup = versions if versions is not None else lambda chash: postings.versions_with_content(txn, chash)
    if approximate:
        return _approximate(matrix, unit, accept, limit, lookup, stored)
    scores = matrix.rows[:count] @ unit
    # The first window covers a filter that passes 1 row in 16; a more selective one costs
    # another pass or two over the scores.
    window = 16 * max(4, limit)
    out: list[tuple[bytes, str, float]] = []
    for row in _best_first(scores, matrix.keys[:count], matrix.alive[:count], window):
        for oid, node_id, expires in lookup(matrix.hashes[row]):
            if accept(node_id, oid, expires):
                out.append((oid, node_id, float(scores[row])))
        if len(out) >= limit:
            break
    return out[:limit]


def _approximate(
    matrix: Matrix,
    unit: Vectors,
    accept: Accept,
    limit: int,
    lookup: Callable[[bytes], tuple[Version, ...]],
    stored: Callable[[Rows], Vectors],
) -> list[tuple[bytes, str, float]]:
    """The best ``limit`` accepted versions among the rows the approximate index proposes.

    The index is asked for a few times ``limit`` rows, then four times as many
    while too few pass the filters; past a quarter of the rows it scans them all
    (still int8) instead, so a filter that passes almost nothing costs one pass.
    """
    assert matrix.approx is not None
    live = int(np.count_nonzero(matrix.alive))
    found: list[tuple[bytes, str, int]] = []
    seen: set[int] = set()
    count = max(64, 2 * limit)
    while True:
        whole = count > max(live // 4, _SCAN_FROM)
        if whole:
            count = live
        proposed = matrix.approx.nearest(unit, count, exact=whole)
        for row in proposed.tolist():
            if row in seen or not matrix.alive[row]:
                continue  # dropped rows are unlinked at once: this only guards a race
            seen.add(row)
            for oid, node_id, expires in lookup(matrix.hashes[row]):
                if accept(node_id, oid, expires):
                    found.append((oid, node_id, row))
            if whole and len(found) >= limit + limit // 2:
                break  # a scan proposes every row in int8 order: a few past ``limit`` will do
        if len(found) >= limit or whole or len(proposed) < count:
            break  # enough, or every live row was proposed
        count *= 4
    return [(found[i][0], found[i][1], score) for i, score in _ranked(matrix, unit, found, stored)[:limit]]


def _ranked(
    matrix: Matrix, unit: Vectors, found: list[tuple[bytes, str, int]], stored: Callable[[Rows], Vectors]
) -> list[tuple[int, float]]:
    """Positions in ``found`` (versions as ``(node hash, id, row)``) best first, with exact scores.

    Equal scores break by content hash, then node hash (their first 8 bytes).
    """
    if not found:
        return []
    rows = np.array([entry[2] for entry in found], dtype=np.intp)
    scores = stored(rows) @ unit
    versions = np.frombuffer(b"".join(entry[0][:8] for entry in found), dtype=">u8")
    order = np.lexsort((versions, matrix.keys[rows], -scores)).tolist()
    return [(i, float(scores[i])) for i in order]


def _stored(txn: ReadTxn, store: VectorStore, model: str, matrix: Matrix) -> Callable[[Rows], Vectors]:
    """Reads rows' float32 vectors from their blocks (each block once per call)."""

    def read(rows: Rows) -> Vectors:
        out = np.zeros((len(rows), matrix.dim), dtype=np.float32)
        blocks: dict[int, bytes | None] = {}
        for i, row in enumerate(rows.tolist()):
            number = int(matrix.block[row])
            if number not in blocks:
                blocks[number] = store.block(txn, model, number.to_bytes(4, "big"))
            data = blocks[number]
            vector = block_row(data, int(matrix.slot[row]), matrix.dim) if data is not None else None
            if vector is not None:
                out[i] = vector
        return out

    return read


def _score_members(
    txn: ReadTxn,
    postings: Postings,
    matrix: Matrix,
    unit: Vectors,
    members: list[tuple[str, bytes]],
    accept: Accept,
    limit: int,
    stored: Callable[[Rows], Vectors],
) -> list[tuple[bytes, str, float]]:
    """Score just the given versions (a small filtered namespace), best first."""
    found: list[tuple[bytes, str, int]] = []
    expiries: list[int] = []
    for node_id, oid in members:
        indexed = postings.document(txn, oid)
        if indexed is None:
            continue
        row = matrix.where.get(indexed[1])
        if row is not None and matrix.alive[row]:
            found.append((oid, node_id, row))
            expiries.append(indexed[2])
    out: list[tuple[bytes, str, float]] = []
    for i, score in _ranked(matrix, unit, found, stored):
        oid, node_id, _ = found[i]
        if accept(node_id, oid, expiries[i]):
            out.append((oid, node_id, score))
            if len(out) >= limit:
                break
    return out


def _best(
    rows: npt.NDArray[np.intp], scores: npt.NDArray[np.float32], keys: npt.NDArray[np.uint64], size: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Split ``rows`` into its ``size`` best by (score descending, key) and the rest."""
    if len(rows) <= size:
        return rows, rows[:0]
    values = scores[rows]
    boundary = np.partition(values, len(values) - size)[len(values) - size]
    above = values > boundary
    tied = np.flatnonzero(values == boundary)
    room = size - int(np.count_nonzero(above))  # at least 1: ``boundary`` is the size-th best
    if len(tied) > room:
        # A large group of equal scores: its smallest content hashes come first.
        tied = tied[np.argpartition(keys[rows[tied]], room - 1)[:room]]
    above[tied] = True
    return rows[above], rows[~above]


def _window(
    scores: npt.NDArray[np.float32], keys: npt.NDArray[np.uint64], live: npt.NDArray[np.bool_], size: int
) -> npt.NDArray[np.intp]:
    """At least the ``size`` best live rows, and every live row that scores more than any left out.

    Usually a few more than ``size``: a score that about 2·size rows reach is
    guessed from every 32nd row, and when at least ``size`` live rows reach it,
    they are the answer (everything left out scores less). Else, or when ties
    at the guess swamp it, the best ``size`` are split off exactly.
    """
    count = int(np.count_nonzero(live))
    if count > 64 * size:
        sample = scores[::32]
        guess = np.partition(sample, len(sample) - 1 - size // 16)[len(sample) - 1 - size // 16]
        reach = (scores >= guess) & live
        if np.count_nonzero(reach) > count // 4:
            reach = (scores > guess) & live  # many rows tie at the guess (sparse vectors score 0)
        if size <= np.count_nonzero(reach) <= count // 4:
            return np.flatnonzero(reach)
    return _best(np.flatnonzero(live), scores, keys, size)[0]


def _best_first(
    scores: npt.NDArray[np.float32],
    keys: npt.NDArray[np.uint64],
    alive: npt.NDArray[np.bool_],
    window: int,
) -> Iterator[int]:
    """Live rows in the order (score descending, content hash), a growing window at a time.

    Walking the whole order lazily keeps a selective filter exact (no row is
    skipped) and cheap: one pass over every row picks a window of the best,
    which is sorted; only a walk past it costs another pass (for a window four
    times as wide). Equal scores break by content hash, not by where a row
    sits, so the answer does not depend on the order vectors were added in. (A
    float32 matrix product may give equal vectors scores that differ in the
    last bit; those are not ties.)
    """
    live = alive.copy()
    while True:
        head = _window(scores, keys, live, window)
        if not len(head):
            return
        live[head] = False
        yield from head[np.lexsort((keys[head], -scores[head]))].tolist()
        window *= 4
