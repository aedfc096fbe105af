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
from mnemosyne.recall.approximate import rough
from mnemosyne.recall.embedders import Embedder, Vectors, query_vectors
from mnemosyne.recall.matrix import Matrix, VectorCache
from mnemosyne.recall.postings import Accept, Postings, Version
from mnemosyne.recall.vectors import VectorStore, block_row
from mnemosyne.store.kv.base import ReadTxn

SMALL_NAMESPACE = 2_000
"""A namespace of more ids than this that the approximate index scores whole is kept by
the handle (see :data:`NAMESPACE_WHOLE`); a smaller one is read again each time."""

NAMESPACE_WHOLE = 20_000
"""With the approximate index, a namespace of at most this many ids is scored whole: every
member from its int8 copy (mapped with the saved index), the best rescored exactly (see
:func:`_score_members`); its members are kept by the handle for the snapshot and index state
they were listed in (see :meth:`VectorCache.members`). So a filter passing 1/100 of a
million memories costs a product over 10,000 rows, not a walk proposing thousands. A larger
namespace is found through the index."""

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
    namespace_key: tuple[bytes, str] | None = None,
    member_accept: Accept | None = None,
    screen: Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.bool_]] | None = None,
) -> list[tuple[bytes, str, float]]:
    """Cosine search over the model's vectors; the best ``limit`` accepted versions.

    ``namespace(cap)`` may list the snapshot's ``(id, hash)`` entries under a
    prefix filter, or None when there are more than ``cap``: a namespace that
    small is scored directly instead of walking the whole ranking for its few
    members. ``namespace_key`` (the snapshot's tree and the prefix) names that
    listing, so the handle can keep what it read of it; ``member_accept`` judges
    its members (it may skip looking each up in the snapshot, which listed
    them; default: ``accept``). ``versions`` looks up a
    content's versions (default: read from ``view``). ``approximate_from``: how
    many vectors a model needs for the approximate index to rank them (None:
    always exact; see the module docstring). ``screen`` flags, for a batch of
    content hashes (32-byte rows) at once, those that may have a version
    ``accept`` takes (False: none, so their versions are not looked up; a
    handle's :meth:`~mnemosyne.recall.names.Names.contents_under` screens for a
    namespace prefix); the approximate walk uses it.

    Returns:
        ``(node hash, node id, score)``, best first.
    """
    txn = view.txn
    store = VectorStore(view.stores.scope)
    model = embedder.model_id
    matrix = cache.matrix(txn, store, model, embedder.dim, approximate_from)
    count = matrix.count
    if count == 0:
        return []
    vector = query_vectors(embedder, [query])[0]
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return []
    unit = vector / norm
    approximate = matrix.approx is not None
    if approximate:
        stored = _stored(txn, store, model, matrix)
        cap = NAMESPACE_WHOLE
    else:
        stored, cap = (lambda rows: matrix.rows[rows]), max(256, count // 50)
    if namespace is not None:
        members = _members(
            view, postings, cache, matrix, namespace, cap, namespace_key if approximate else None
        )
        if members is not None:
            return _score_members(matrix, unit, members, member_accept or accept, limit, stored)
    lookup = versions if versions is not None else lambda chash: postings.versions_with_content(txn, chash)
    if approximate:
        rows_screen = (lambda rows: screen(matrix.hashes[rows])) if screen is not None else None
        return _approximate(matrix, unit, accept, limit, lookup, stored, rows_screen)
    scores = matrix.rows[:count] @ unit
    # The first window covers a filter that passes 1 row in 16; a more selective one costs
    # another pass or two over the scores.
    window = 16 * max(4, limit)
    out: list[tuple[bytes, str, float]] = []
    for row in _best_first(scores, matrix.keys[:count], matrix.alive[:count], window):
        for oid, node_id, expires in lookup(matrix.content(row)):
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
    screen: Callable[[Rows], npt.NDArray[np.bool_]] | None = None,
) -> list[tuple[bytes, str, float]]:
    """The best ``limit`` accepted versions among the rows the approximate index proposes.

    The index is asked for a few times ``limit`` rows, then, while too few pass
    the filters, as many as the share passing says would do (at least twice as
    many each time); past a quarter of the rows it scans them all
    (still int8) instead, so a filter that passes almost nothing costs one pass.
    The rows proposed are judged best first by exact score, and only those their
    codes cannot rule out are rescored (see :class:`_Walk`).
    """
    approx = matrix.approx
    assert approx is not None
    live = len(approx)

    def versions(row: int) -> list[tuple[bytes, str]]:
        if not matrix.alive[row]:
            return []  # dropped since the index was read
        return [(oid, i) for oid, i, expires in lookup(matrix.content(row)) if accept(i, oid, expires)]

    walk = _Walk(matrix, unit, limit, stored, versions, screen=screen)
    count = max(64, 2 * limit)
    while True:
        whole = count > max(live // 4, _SCAN_FROM)
        if whole:
            count = live
        proposed, complete = approx.nearest(unit, count, exact=whole)
        if whole:
            walk.scan(proposed)
        else:
            walk.offer(proposed)
        if walk.enough() or whole or complete:
            break  # enough, or every live row was proposed
        # As many as the share of candidates passing so far says would do, with some to spare.
        count = max(2 * count, int(1.5 * limit / max(walk.passing_share(), 1 / 256)))
    if not whole and not complete:
        # An isolated row the graphs did not reach (a unique match, say) is a candidate
        # when its exact score could beat the worst of the best ``limit`` found.
        walk.offer(approx.isolated_above(unit, walk.floor() - 1e-6)[0])
    return walk.best()


class _Walk:
    """Candidates judged best first by exact score, rescored only where their codes cannot rank them.

    Candidates are rows (or namespace members, ``rows`` saying whose row each
    is). A code's score is within a bound of the row's exact score (see
    :func:`~mnemosyne.recall.approximate.rough`), so the candidates are taken in
    the order of their codes' upper bounds, a batch at a time, rescored exactly
    (a block read each) and judged (``judge``: the versions that pass the
    filters) in exact order until ``limit`` versions pass; a candidate whose
    upper bound is below the score of the ``limit``-th is neither rescored nor
    judged. While most candidates judged fail the filters, a batch is judged
    first and only what passes is rescored. The answer is the exact best
    ``limit`` among the candidates offered. ``screen`` (rows → whether each
    may pass) turns candidates away a batch at a time: one it flags False is
    judged to pass nothing without ``judge`` being asked, and counts as judged
    just when ``judge`` would have been asked, so the walk goes as without it.
    """

    def __init__(
        self,
        matrix: Matrix,
        unit: Vectors,
        limit: int,
        stored: Callable[[Rows], Vectors],
        judge: Callable[[int], list[tuple[bytes, str]]],
        rows: Rows | None = None,
        screen: Callable[[Rows], npt.NDArray[np.bool_]] | None = None,
    ) -> None:
        self._matrix = matrix
        self._unit = unit
        self._limit = limit
        self._stored = stored
        self._judge = judge
        self._rows = rows  # candidate → row (None: candidates are rows)
        self._screen = screen
        self._offered: set[int] = set()
        self._judged = self._passing = 0
        self._exact: dict[int, float] = {}
        self._passed: dict[int, list[tuple[bytes, str]]] = {}
        self._best: list[tuple[int, bytes, str, float]] = []

    def _row(self, candidates: Rows) -> Rows:
        return candidates if self._rows is None else self._rows[candidates]

    def floor(self) -> float:
        """The exact score of the ``limit``-th version that passed so far (-inf: fewer passed)."""
        return self._best[self._limit - 1][3] if len(self._best) >= self._limit else -np.inf

    def enough(self) -> bool:
        """Whether ``limit`` versions passed."""
        return len(self._best) >= self._limit

    def passing_share(self) -> float:
        """The share of the candidates judged that had a version pass (1 before any was judged)."""
        return self._passing / self._judged if self._judged else 1.0

    def offer(self, candidates: Rows) -> None:
        """Consider these candidates too (each only once)."""
        fresh = np.array([c for c in candidates.tolist() if c not in self._offered], dtype=np.intp)
        if not len(fresh):
            return
        self._offered.update(fresh.tolist())
        approx = self._matrix.approx
        assert approx is not None
        scores, bound = rough(approx.codes(self._row(fresh)), self._unit)
        upper = scores + bound
        order = np.argsort(-upper, kind="stable")
        batch = self._limit + self._limit // 2
        may: npt.NDArray[np.bool_] | None = None  # the screen's flags, per fresh candidate
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            chunk = chunk[upper[chunk] >= self.floor()]
            if not len(chunk):
                break  # sorted by upper bound: none after could reach the best either
            if self._judged and 2 * self._passing < self._judged:  # mostly turned away
                if may is None and self._screen is not None:
                    # Screened in one call, not a batch at a time: each call costs more than the
                    # flags. The floor only rises, so those below it now are never judged.
                    may = np.ones(len(fresh), dtype=bool)
                    reach = order[start:][upper[order[start:]] >= self.floor()]
                    may[reach] = self._screen(self._row(fresh[reach]))
                left = self._screen_out(fresh[chunk], None if may is None else may[chunk])
                passed = [c for c in left.tolist() if self._judge_now(c)]
                if passed:
                    self._rescore(np.array(passed, dtype=np.intp))
            else:
                self._rescore(fresh[chunk])

    def scan(self, candidates: Rows) -> None:
        """Consider candidates a scan of every row proposed, in int8 order.

        They are judged in that order, and rescored, until a few past ``limit``
        versions passed.
        """
        for candidate in candidates.tolist():
            if candidate in self._offered:
                continue
            self._offered.add(candidate)
            self._rescore(np.array([candidate], dtype=np.intp), walk=False)
            if len(self._passed_versions()) >= self._limit + self._limit // 2:
                break
        self._walk()

    def _passed_versions(self) -> list[int]:
        return [c for c, passed in self._passed.items() if passed]

    def _screen_out(self, candidates: Rows, may: npt.NDArray[np.bool_] | None = None) -> Rows:
        """Judge at once those of ``candidates`` the screen turns away; the others.

        ``may``: the screen's flags for them, when already asked.
        """
        if self._screen is None or not len(candidates):
            return candidates
        if may is None:
            may = self._screen(self._row(candidates))
        for candidate in candidates[~may].tolist():
            if candidate not in self._passed:
                self._passed[candidate] = []
                self._judged += 1
        return candidates[may]

    def _screened(self, candidates: Rows) -> set[int]:
        """Those of ``candidates`` not judged yet that the screen turns away."""
        if self._screen is None:
            return set()
        fresh = np.array([c for c in candidates.tolist() if c not in self._passed], dtype=np.intp)
        if not len(fresh):
            return set()
        return set(fresh[~self._screen(self._row(fresh))].tolist())

    def _judge_now(self, candidate: int, screened_out: bool = False) -> bool:
        """Judge a candidate (once): whether any of its versions passed (``screened_out``: none did)."""
        passed = self._passed.get(candidate)
        if passed is None:
            passed = self._passed[candidate] = [] if screened_out else self._judge(candidate)
            self._judged += 1
            self._passing += bool(passed)
        return bool(passed)

    def _rescore(self, candidates: Rows, walk: bool = True) -> None:
        exact = self._stored(self._row(candidates)) @ self._unit
        for candidate, score in zip(candidates.tolist(), exact.tolist(), strict=True):
            self._exact[candidate] = score
            if not walk:
                self._judge_now(candidate)
        if walk:
            self._walk()

    def _walk(self) -> None:
        """Judge the rescored candidates best first until ``limit`` versions passed.

        Only the candidates not judged yet that the screen lets through are
        judged one by one; the rest are counted with arrays.
        """
        candidates = np.fromiter(self._exact, dtype=np.intp, count=len(self._exact))
        scores = np.fromiter(self._exact.values(), dtype=np.float64, count=len(self._exact))
        keys = self._matrix.keys_of(self._row(candidates))
        order = np.lexsort((keys, -scores))
        ranked = candidates[order].tolist()
        out = self._screened(candidates)
        passed = self._passed
        # Versions passing per candidate in rank order: -1 for one to judge, 0 for one screened out.
        counts = np.fromiter(
            (len(passed[c]) if c in passed else 0 if c in out else -1 for c in ranked),
            dtype=np.int64,
            count=len(ranked),
        )
        before = np.cumsum(np.maximum(counts, 0))
        extra = 0  # versions passing of the candidates judged here so far
        for at in np.flatnonzero(counts < 0).tolist():
            if at and int(before[at - 1]) + extra >= self._limit:
                break  # enough passed before it
            candidate = ranked[at]
            self._judge_now(candidate)
            counts[at] = len(passed[candidate])
            extra += int(counts[at])
        reach = np.cumsum(np.maximum(counts, 0))
        stop = min(int(np.searchsorted(reach, self._limit)), len(ranked) - 1)
        for at in np.flatnonzero(counts[: stop + 1] == 0).tolist():
            self._judge_now(ranked[at], ranked[at] in out)  # judged as the walk went past it
        best: list[tuple[int, bytes, str, float]] = []
        for at in np.flatnonzero(counts[: stop + 1] > 0).tolist():
            candidate, score = ranked[at], float(scores[order[at]])
            best.extend((candidate, oid, node_id, score) for oid, node_id in passed[candidate])
        self._best = best

    def best(self) -> list[tuple[bytes, str, float]]:
        """The best ``limit`` versions that passed: ``(node hash, id, exact score)``.

        Equal scores break by content hash, then node hash.
        """
        if not self._best:
            return []
        versions = np.frombuffer(b"".join(oid[:8] for _, oid, _, _ in self._best), dtype=">u8")
        keys = self._matrix.keys_of(self._row(np.array([c for c, _, _, _ in self._best], dtype=np.intp)))
        scores = np.array([score for _, _, _, score in self._best])
        order = np.lexsort((versions, keys, -scores)).tolist()
        return [(self._best[i][1], self._best[i][2], self._best[i][3]) for i in order[: self._limit]]


def _stored(txn: ReadTxn, store: VectorStore, model: str, matrix: Matrix) -> Callable[[Rows], Vectors]:
    """Reads rows' float32 vectors from their blocks (each block once per call).

    A row's vector is taken only where its block holds the row's content at its
    slot; elsewhere (bookkeeping gone stale) the content's vector is looked up
    where the store says it is, or left zero when it has none.
    """

    def read(rows: Rows) -> Vectors:
        out = np.zeros((len(rows), matrix.dim), dtype=np.float32)
        blocks: dict[int, bytes | None] = {}
        for i, row in enumerate(rows.tolist()):
            number, slot = int(matrix.block[row]), int(matrix.slot[row])
            content = matrix.content(row)
            if number not in blocks:
                blocks[number] = store.block(txn, model, number.to_bytes(4, "big"))
            data = blocks[number]
            if data is None or not holds(data, slot, content):
                where = store.where(txn, model, content)
                if where is None:
                    continue
                number, slot = where
                data = store.block(txn, model, number.to_bytes(4, "big"))
                if data is None or not holds(data, slot, content):
                    continue
            vector = block_row(data, slot, matrix.dim)
            if vector is not None:
                out[i] = vector
        return out

    return read


def holds(data: bytes, slot: int, content: bytes) -> bool:
    """Whether a stored block holds ``content`` at row ``slot``."""
    start = 2 + 32 * slot
    return data[start : start + 32] == content


class Members:
    """A namespace's versions with a vector: what scoring it whole needs.

    Attributes:
        oids: node hashes. ids: their ids. expiries: their expiry (µs).
        rows: their content's matrix row.
    """

    def __init__(self, oids: list[bytes], ids: list[str], expiries: list[int], rows: Rows) -> None:
        self.oids = oids
        self.ids = ids
        self.expiries = expiries
        self.rows = rows


_TOO_MANY = object()
"""Kept instead of a namespace's members: it has more than the cap."""


def _members(
    view: View,
    postings: Postings,
    cache: VectorCache,
    matrix: Matrix,
    namespace: Callable[[int], list[tuple[str, bytes]] | None],
    cap: int,
    key: tuple[bytes, str] | None,
) -> Members | None:
    """The namespace's members with a vector, if it has at most ``cap`` ids; None otherwise.

    The members of a namespace larger than :data:`SMALL_NAMESPACE` are kept by
    the handle, keyed by the snapshot's tree, the prefix, and the index state
    (the postings' and vectors' change logs), so that the next search of that
    namespace reads nothing again; so is the finding that a namespace is too
    large.
    """
    txn = view.txn
    kept = None
    if key is not None:
        kept = (key, view.stores.scope, id(matrix), matrix.seq, postings.last_change(txn))
        found = cache.members(kept)
        if isinstance(found, Members):
            return found
        if found is _TOO_MANY:
            return None
    listed = namespace(cap)
    if listed is None:
        if kept is not None:
            cache.keep_members(kept, _TOO_MANY, 64)  # counting up to the cap walks ~1,000 chunks
        return None
    oids: list[bytes] = []
    ids: list[str] = []
    expiries: list[int] = []
    contents: list[bytes] = []
    for node_id, oid in listed:
        indexed = postings.document(txn, oid)
        if indexed is None:
            continue
        oids.append(oid)
        ids.append(node_id)
        expiries.append(indexed[2])
        contents.append(indexed[1])
    rows = matrix.rows_of(contents)
    has = rows >= 0
    if not has.all():
        keep = np.flatnonzero(has).tolist()
        oids, ids, expiries = [oids[i] for i in keep], [ids[i] for i in keep], [expiries[i] for i in keep]
        rows = rows[has]
    members = Members(oids, ids, expiries, rows)
    if kept is not None and len(rows) > SMALL_NAMESPACE:
        cache.keep_members(kept, members, 64 * len(rows))
    return members


def _score_members(
    matrix: Matrix,
    unit: Vectors,
    members: Members,
    accept: Accept,
    limit: int,
    stored: Callable[[Rows], Vectors],
) -> list[tuple[bytes, str, float]]:
    """Score just the given versions (a filtered namespace), best first.

    With the exact matrix, every member is scored exactly. With the approximate
    index, every member is scored from its code, and only those whose code's
    bound leaves them a chance are rescored exactly (see :class:`_Walk`): the
    answer is exact either way. Equal scores break by content hash, then node hash.
    """
    picked = np.flatnonzero(matrix.alive[members.rows])
    if not len(picked):
        return []
    if matrix.approx is not None:

        def judge(at: int) -> list[tuple[bytes, str]]:
            oid, node_id = members.oids[at], members.ids[at]
            return [(oid, node_id)] if accept(node_id, oid, members.expiries[at]) else []

        walk = _Walk(matrix, unit, limit, stored, judge, members.rows)
        walk.offer(picked)
        return walk.best()
    rows = members.rows[picked]
    versions = np.frombuffer(b"".join(members.oids[i][:8] for i in picked.tolist()), dtype=">u8")
    scores = stored(rows) @ unit
    out: list[tuple[bytes, str, float]] = []
    for i in np.lexsort((versions, matrix.keys_of(rows), -scores)).tolist():
        at = int(picked[i])
        if accept(members.ids[at], members.oids[at], members.expiries[at]):
            out.append((members.oids[at], members.ids[at], float(scores[i])))
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
