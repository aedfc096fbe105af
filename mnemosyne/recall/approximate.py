"""An approximate nearest-neighbour index over one model's vectors (usearch's HNSW).

Derived data, never hashed: built from the vector blocks when a model's vectors
first reach the store's ``recall.approximate_from`` setting, kept in step with
the blocks' change log (see :mod:`mnemosyne.recall.matrix`), and saved beside
the store (see :mod:`mnemosyne.recall.index_files`) so that a new process maps
the saved graph instead of building it. Keys are the matrix's row numbers.

Three parts propose rows, nearest first:

- the *saved* graph, mapped read-only from its file (rows dropped since it was
  saved are masked, never proposed);
- a graph in memory of the rows linked since (of every row, before a save);
- the *isolated* rows, scored exactly on every search. A row whose nearest
  neighbour is far less similar than a typical row's gets few or no links from
  other rows, so a graph walk rarely reaches it, even when a query matches it
  far better than anything else (a unique match). Such rows are found as they
  are linked (a short graph search for each new row's nearest neighbour) and
  kept as float32: a bounded share of the rows, the most isolated first.

Vectors are held as int8 (a quarter of float32). Quantising costs ranking
precision, so the index only proposes candidates; the search then scores the
ones that pass the filters exactly, from the stored float32 vectors (see
:mod:`mnemosyne.recall.semantic`). What stays approximate is which rows are
proposed.

See docs/adr/0024-approximate-vector-index.md and
docs/adr/0032-persisted-approximate-index.md.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from importlib.util import find_spec

import numpy as np
import numpy.typing as npt

CONNECTIVITY = 16
"""Graph edges per node (HNSW's M): 16 is usearch's default and a common one."""
EXPANSION_ADD = 64
"""Candidates kept while linking a new vector: half usearch's default, for a faster build."""
EXPANSION_SEARCH = 1024
"""Candidates kept while searching (widened to any larger request). At a million clustered
384-wide vectors, recall@10 was 0.91 at 256, 0.93 at 512 and 0.955 at 1024 (about 2 ms a
search), and no better at 2048."""
THREADS = 0
"""Threads a bulk add uses (0: one per core)."""
SCAN_BELOW = 4096
"""Linked rows under which a search scans every int8 vector rather than walk the graphs:
cheaper than the walk there (a fraction of a millisecond), and a small graph's walk can
miss a row whose few links all lead elsewhere."""

ISOLATION_EXPANSIONS = (4, 64, 256)
"""Candidates kept by the searches that find a new row's nearest neighbour: a short one for
every row, then wider ones for the rows it leaves looking isolated. At 200,000 clustered
384-wide rows with 100 planted unique ones, 4 candidates leave 18% of the rows looking
isolated, 64 leave 1.5%, and 256 the planted ones and 10 more; the three cost 0.4 to 0.46
of linking the rows (measured at 200k and 1M: about a quarter of a first build)."""
ISOLATED_GAP = 0.25
"""A row is isolated when its nearest neighbour's cosine is this much below a typical row's."""
ISOLATED_SHARE = 0.01
"""At most this share of the rows (and at least 64) is kept as isolated, the most isolated
first: the exact pass over them costs about 1 ms a search at a million 384-wide rows."""
TYPICAL_FROM = 1024
"""Rows linked at once from which the typical nearest-neighbour cosine is measured anew."""
_PLACEHOLDER = 1 << 62
"""Keys of the zero vectors that overwrite freed slots before a save (rows never reach them)."""

Rows = npt.NDArray[np.intp]
Vectors = npt.NDArray[np.float32]
Floats = npt.NDArray[np.float64]
Codes = npt.NDArray[np.int8]
"""Rows' codes: each row ``dim`` int8 values, then its scale (a little-endian float32 as 4 bytes)."""
SCALE_BYTES = 4


def quantised(vectors: Vectors) -> Codes:
    """Vectors as codes: each component in 255 steps of its row's largest, rounded.

    A component is off by at most ``scale / 254`` (``scale``: the row's largest
    component, about 0.2 for a 384-wide unit vector), so a code's score with a
    query ``u`` is within ``scale / 254 * |u|_1`` of the vector's: a bound
    :func:`rough` gives with the score, for rescoring only what it cannot rank.
    """
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    scale = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), dtype=np.float32)
    steps = np.where(scale > 0, 127.0 / np.where(scale > 0, scale, 1.0), 0.0).astype(np.float32)
    codes: Codes = np.empty((len(vectors), vectors.shape[1] + SCALE_BYTES), dtype=np.int8)
    codes[:, : vectors.shape[1]] = np.rint(vectors * steps[:, None]).astype(np.int8)
    codes[:, vectors.shape[1] :] = scale.astype("<f4").view(np.int8).reshape(-1, SCALE_BYTES)
    return codes


def rough(codes: Codes, unit: Vectors) -> tuple[Floats, Floats]:
    """Each code's score with ``unit``, and how far from its vector's score it may be at most."""
    dim = codes.shape[1] - SCALE_BYTES
    scale = np.ascontiguousarray(codes[:, dim:]).view("<f4").reshape(-1).astype(np.float64)
    scores = (codes[:, :dim].astype(np.float32) @ unit).astype(np.float64) * scale / 127.0
    return scores, scale / 254.0 * float(np.abs(unit).sum())


class Graph:
    """One usearch HNSW index of the parameters above, keyed by row (unsigned 64-bit).

    Through usearch's compiled binding: its Python wrapper also imports a
    progress-bar package, a cost every one-shot ``mnemo search`` would pay.

    Args:
        dim: the vectors' width.
        lookups: keep a key → slot table (needed to remove, get and compare by
            key; a mapped saved graph is only searched, and building the table
            would cost a pass over every row).
    """

    def __init__(self, dim: int, lookups: bool = True) -> None:
        _before_usearch()
        from usearch.compiled import Index, MetricKind, MetricSignature, ScalarKind

        self.dim = dim
        self._index = Index(
            ndim=dim,
            dtype=ScalarKind.I8,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
            # Stored vectors and queries are unit length: the same order as cosine, cheaper.
            metric_kind=MetricKind.IP,
            metric_signature=MetricSignature.ArrayArraySize,
            metric_pointer=0,
            multi=False,
            enable_key_lookups=lookups,
        )
        self._any = ScalarKind.Unknown  # "the array's own type"
        self._i8 = ScalarKind.I8

    def __len__(self) -> int:
        return len(self._index)

    @property
    def slots(self) -> int:
        """Slots in use, freed ones included (usearch reuses a freed slot for the next add)."""
        return int(self._index.stats.nodes)

    def add(self, keys: npt.NDArray[np.uint64], vectors: Vectors | npt.NDArray[np.int8]) -> None:
        """Link vectors (float32 unit vectors, or int8 copies) under new keys."""
        self._index.add_many(
            keys.astype(np.uint64), np.ascontiguousarray(vectors), copy=True, threads=THREADS, dtype=self._any
        )

    def search(
        self, queries: Vectors, count: int, exact: bool = False, expansion: int = EXPANSION_SEARCH
    ) -> tuple[npt.NDArray[np.uint64], Floats, npt.NDArray[np.intp]]:
        """The ``count`` nearest keys to each query, their distances (less is nearer), how many were found."""
        # A beam narrower than the request would come back short.
        self._index.expansion_search = max(expansion, count)
        keys, distances, counts, _, _ = self._index.search_many(
            np.ascontiguousarray(queries.reshape(-1, self.dim), dtype=np.float32),
            count=count,
            exact=exact,
            threads=THREADS,
            dtype=self._any,
        )
        with np.errstate(invalid="ignore"):  # places past a short answer's count hold anything
            far = np.asarray(distances, dtype=np.float64)
        return np.asarray(keys, dtype=np.uint64), far, np.asarray(counts, dtype=np.intp)

    def remove(self, keys: npt.NDArray[np.uint64]) -> None:
        """Unlink these keys (usearch marks their slots free)."""
        self._index.remove_many(list(keys.astype(np.uint64).tolist()), compact=False, threads=THREADS)

    def int8(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int8]:
        """The int8 vectors of these keys (all present)."""
        found = self._index.get_many(keys.astype(np.uint64), self._i8)
        return np.vstack([np.asarray(vector).view(np.int8).reshape(-1) for vector in found]).astype(np.int8)

    def own_distances(self, keys: npt.NDArray[np.uint64]) -> Floats:
        """Each key's distance to itself."""
        keys = keys.astype(np.uint64)
        return np.asarray(self._index.pairwise_distances(keys, keys), dtype=np.float64).reshape(-1)

    def view(self, buffer: memoryview) -> None:
        """Serve a saved index from ``buffer`` (read-only, not copied)."""
        self._index.view_index_from_buffer(buffer)

    def load(self, buffer: memoryview) -> None:
        """Read a saved index from ``buffer`` into memory, to change it."""
        self._index.load_index_from_buffer(buffer)

    def save(self, path: str) -> None:
        """Write the index to ``path``."""
        self._index.save_index_to_path(path)


def new_graph(dim: int, lookups: bool = True) -> Graph:
    """An empty graph (see :class:`Graph`)."""
    return Graph(dim, lookups)


def _before_usearch() -> None:
    """Load onnxruntime, when installed, before usearch's compiled module is first loaded.

    onnxruntime's own module crashes the process (SIGSEGV) when it is loaded after
    usearch's (usearch 2.26, onnxruntime 1.32, both from PyPI; either alone, or
    onnxruntime first, is fine): a process that searched a large store and then
    embeds with MiniLM (another store, another tenant, ``use_embedder``) would die.
    Loading it first costs about 90 ms, once, in processes that use the
    approximate index.
    """
    if "usearch.compiled" not in sys.modules and find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401


def graph_metadata(path: str) -> dict[str, object]:
    """What a saved index's header says (its width, row counts, …)."""
    _before_usearch()
    from usearch.compiled import index_dense_metadata_from_path

    return dict(index_dense_metadata_from_path(path))


class Isolated:
    """Rows scored exactly on every search: their unit vectors and nearest-neighbour cosines."""

    def __init__(
        self, dim: int, rows: Rows | None = None, vectors: Vectors | None = None, near: Floats | None = None
    ) -> None:
        self.rows: Rows = rows.astype(np.intp) if rows is not None else np.zeros(0, dtype=np.intp)
        self.vectors: Vectors = (
            np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dim)
            if vectors is not None
            else np.zeros((0, dim), dtype=np.float32)
        )
        self.near: Floats = near.astype(np.float64) if near is not None else np.zeros(0)

    def __len__(self) -> int:
        return len(self.rows)

    def extend(self, rows: Rows, vectors: Vectors, near: Floats, cap: int) -> None:
        """Keep these rows too, then the ``cap`` most isolated of all."""
        self.rows = np.concatenate([self.rows, rows])
        self.vectors = np.concatenate([self.vectors, vectors])
        self.near = np.concatenate([self.near, near])
        if len(self.rows) > cap:
            self.keep(np.argsort(self.near, kind="stable")[:cap])

    def keep(self, which: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> None:
        """Keep only the entries ``which`` selects."""
        self.rows, self.vectors, self.near = self.rows[which], self.vectors[which], self.near[which]


class _Codes:
    """Codes of some rows (those linked since the saved graph), packed, found by row."""

    def __init__(self, dim: int) -> None:
        self._at = np.zeros(0, dtype=np.int64)  # row → place in ``_codes`` (-1: none)
        self._codes: Codes = np.zeros((0, dim + SCALE_BYTES), dtype=np.int8)
        self._used = 0

    def reserve(self, rows: int) -> None:
        """Make room for the codes of rows ``0`` to ``rows`` (no doubling while they are put)."""
        if rows > len(self._at):
            self._at = np.concatenate([self._at, np.full(rows - len(self._at), -1, dtype=np.int64)])
        if rows > len(self._codes):
            grown = np.zeros((rows, self._codes.shape[1]), np.int8)
            grown[: self._used] = self._codes[: self._used]
            self._codes = grown

    def put(self, rows: Rows, codes: Codes) -> None:
        if not len(rows):
            return
        if int(rows.max()) >= len(self._at):
            at = np.full(max(int(rows.max()) + 1, 2 * len(self._at)), -1, dtype=np.int64)
            at[: len(self._at)] = self._at
            self._at = at
        new = np.unique(rows[self._at[rows] < 0])
        if self._used + len(new) > len(self._codes):
            grown = np.zeros(
                (max(self._used + len(new), 2 * len(self._codes)), self._codes.shape[1]), np.int8
            )
            grown[: self._used] = self._codes[: self._used]
            self._codes = grown
        self._at[new] = np.arange(self._used, self._used + len(new))
        self._used += len(new)
        self._codes[self._at[rows]] = codes

    def get(self, rows: Rows) -> Codes:
        """The codes of these rows (each put before)."""
        return self._codes[self._at[rows]]


class Approximate:
    """The HNSW proposals of one model's live vectors, keyed by matrix row.

    Args:
        dim: the vectors' width.
        typical: the typical nearest-neighbour cosine (NaN: not measured yet).
    """

    def __init__(self, dim: int, typical: float = float("nan")) -> None:
        self.dim = dim
        self.typical = typical
        self.isolated = Isolated(dim)
        self.in_saved = np.zeros(0, dtype=bool)  # rows the saved graph holds
        self.linked = np.zeros(0, dtype=bool)  # rows that may be proposed
        self.in_memory = np.zeros(0, dtype=bool)  # rows in the graph in memory
        self.dropped_saved = 0  # rows of the saved graph unlinked since it was saved
        self._saved: Graph | None = None
        self._buffer: memoryview | None = None  # the mapped bytes the saved graph reads
        self._memory: Graph | None = None
        # Each row's int8 copy by row number (the graph keeps them by slot, and a mapped
        # graph cannot look a key up): the saved rows' from their file, the others' here.
        self._saved_codes: Codes = np.zeros((0, dim + SCALE_BYTES), dtype=np.int8)
        self._codes = _Codes(dim)
        self.lost = False
        """The graph in memory was let go of and the saved one not mapped (see :meth:`map_instead`)."""
        # usearch allows searches alongside each other, not beside a removal or an add.
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return int(np.count_nonzero(self.linked))

    @property
    def saved(self) -> bool:
        """Whether a saved graph is mapped."""
        return self._saved is not None

    @property
    def linked_since(self) -> int:
        """Rows in the graph in memory: linked since the saved graph, or all of them before a save."""
        return int(np.count_nonzero(self.in_memory))

    def map(
        self,
        graph: Graph,
        buffer: memoryview,
        in_saved: npt.NDArray[np.bool_],
        isolated: Isolated,
        codes: Codes,
    ) -> None:
        """Propose from a saved graph (viewed over ``buffer``, kept alive with it) from now on.

        ``codes`` are the saved rows' codes (see :func:`quantised`), by row: a mapped file's view.
        Forgets the graph in memory: ``graph`` must hold every row linked now.
        """
        with self._lock:
            self._saved, self._buffer, self._memory = graph, buffer, None
            self.in_saved = in_saved.copy()
            self.linked = in_saved.copy()
            self.in_memory = np.zeros(len(in_saved), dtype=bool)
            self.dropped_saved = 0
            self.isolated = isolated
            self._saved_codes = codes
            self._codes = _Codes(self.dim)

    def reserve(self, rows: int) -> None:
        """Make room for rows ``0`` to ``rows`` at once (a build that knows how many it reads)."""
        with self._lock:
            self._grow(rows, exact=True)
            self._codes.reserve(rows)

    def map_instead(
        self, saved: Callable[[], tuple[Graph, memoryview, Codes] | None], in_saved: npt.NDArray[np.bool_]
    ) -> bool:
        """Let go of the graph and codes in memory, then map the saved ones (``saved()``); whether it did.

        After a save of every linked row (see :meth:`merged`): the two graphs are never
        resident at once (the one in memory is about 900 MB at a million 384-wide rows).
        When ``saved()`` gives None the rows are lost (:attr:`lost`): the owner builds anew.
        """
        with self._lock:  # no search meanwhile sees neither graph (a reentrant lock: map takes it)
            self._memory, self._codes = None, _Codes(self.dim)
            opened = saved()
            if opened is None:
                self.lost = True
            else:
                self.map(opened[0], opened[1], in_saved, self.isolated, opened[2])
            return opened is not None

    def _grow(self, size: int, exact: bool = False) -> None:
        if size > len(self.linked):
            grown = size if exact else max(size, 2 * len(self.linked), 16)
            for name in ("in_saved", "linked", "in_memory"):
                old = getattr(self, name)
                new = np.zeros(grown, dtype=bool)
                new[: len(old)] = old
                setattr(self, name, new)

    def codes(self, rows: Rows) -> Codes:
        """The codes of these rows (see :func:`quantised`; zeros for a row never linked)."""
        with self._lock:
            return self._codes_of(rows)

    def _codes_of(self, rows: Rows) -> Codes:
        out = np.zeros((len(rows), self.dim + SCALE_BYTES), dtype=np.int8)
        known = rows < len(self.in_memory)
        mine = np.zeros(len(rows), dtype=bool)
        mine[known] = self.in_memory[rows[known]]
        out[mine] = self._codes.get(rows[mine])
        theirs = ~mine & (rows < len(self._saved_codes))
        out[theirs] = self._saved_codes[rows[theirs]]
        return out

    def saved_codes(self, start: int, end: int) -> Codes:
        """Rows ``start`` to ``end``'s codes as a save writes them: zeros for an unlinked row."""
        with self._lock:
            saved = self._saved_codes[start:end]
            if (
                len(saved) == end - start
                and not self.in_memory[start:end].any()
                and bool(self.linked[start:end].all())
                and len(self.linked) >= end
            ):
                return saved  # as saved, nothing dropped: the mapped bytes themselves
            out = np.zeros((end - start, self.dim + SCALE_BYTES), dtype=np.int8)
            out[: len(saved)] = saved
            mine = np.flatnonzero(self.in_memory[start:end])
            out[mine] = self._codes.get(start + mine)
            linked = np.zeros(end - start, dtype=bool)
            known = self.linked[start:end]
            linked[: len(known)] = known
            out[~linked] = 0
            return out

    def add(self, rows: Rows, vectors: Vectors) -> None:
        """Link these rows (none of them linked now) with their unit vectors."""
        if not len(rows):
            return
        with self._lock:
            self._grow(int(rows.max()) + 1)
            # A row the saved graph still holds (dropped, then its content came back) needs no
            # new link: its vector there is the content's.
            back = self.in_saved[rows]
            if back.any():
                self.linked[rows[back]] = True
                self.dropped_saved -= int(np.count_nonzero(back))
                rows, vectors = rows[~back], vectors[~back]
            if not len(rows):
                return
            if self._memory is None:
                self._memory = new_graph(self.dim)
            keys = rows.astype(np.uint64)
            self._memory.add(keys, vectors)
            self.linked[rows] = True
            self.in_memory[rows] = True
            self._codes.put(rows, quantised(vectors))
            self._find_isolated(rows, keys, vectors)

    def _find_isolated(self, rows: Rows, keys: npt.NDArray[np.uint64], vectors: Vectors) -> None:
        """Keep the new rows whose nearest neighbour is far less similar than a typical row's.

        A short search underestimates some rows' nearest neighbour (it stops in
        the wrong part of the graph): a row it leaves looking isolated is
        searched again, wider, until a wide search agrees.
        """
        near = self._nearest_neighbour(keys, vectors, ISOLATION_EXPANSIONS[0])
        measured = near[np.isfinite(near)]
        if len(measured) and (len(measured) >= TYPICAL_FROM or np.isnan(self.typical)):
            self.typical = float(np.median(measured))
        lonely = np.flatnonzero(near < self.typical - ISOLATED_GAP)  # none while typical is NaN
        for expansion in ISOLATION_EXPANSIONS[1:]:
            if not len(lonely):
                break
            again = self._nearest_neighbour(keys[lonely], vectors[lonely], expansion)
            near[lonely] = np.maximum(near[lonely], again)
            lonely = lonely[near[lonely] < self.typical - ISOLATED_GAP]
        if len(lonely):
            cap = max(64, int(ISOLATED_SHARE * len(self)))
            self.isolated.extend(rows[lonely], vectors[lonely], near[lonely], cap)

    def _nearest_neighbour(self, keys: npt.NDArray[np.uint64], vectors: Vectors, expansion: int) -> Floats:
        """Each new row's cosine with its nearest other linked row, as a graph search of that width finds it.

        usearch's int8 inner-product distance is one minus the dot product of the
        int8 vectors; divided by the row's dot product with itself, it gives the
        cosine. ``-inf`` for a row with no other row to compare with.
        """
        memory = self._memory
        assert memory is not None
        own = 1.0 - memory.own_distances(keys)
        own[own <= 0] = 1.0
        best = np.full(len(keys), -np.inf)
        for graph in (memory, self._saved):
            if graph is None or len(graph) < 2:
                continue
            found_keys, distances, counts = graph.search(vectors, 2, expansion=expansion)
            similar = (1.0 - distances) / own[:, None]
            valid = (found_keys < len(self.linked)) & (found_keys != keys[:, None])
            valid[valid] = self.linked[found_keys[valid].astype(np.intp)]
            valid &= np.arange(found_keys.shape[1])[None, :] < counts[:, None]  # an answer may be short
            similar[~valid] = -np.inf
            best = np.maximum(best, similar.max(axis=1))
        return best

    def remove(self, rows: Rows) -> None:
        """Unlink these rows (rows not linked are ignored)."""
        if not len(rows):
            return
        with self._lock:
            rows = rows[rows < len(self.linked)]
            rows = rows[self.linked[rows]]
            if not len(rows):
                return
            self.linked[rows] = False
            mine = rows[self.in_memory[rows]]
            self.dropped_saved += len(rows) - len(mine)
            if len(mine) and self._memory is not None:
                self._memory.remove(mine.astype(np.uint64))
                self.in_memory[mine] = False
                self._codes.put(mine, np.zeros((len(mine), self.dim + SCALE_BYTES), dtype=np.int8))
            if len(self.isolated):
                self.isolated.keep(~np.isin(self.isolated.rows, rows))

    def nearest(self, unit: Vectors, count: int, exact: bool = False) -> tuple[Rows, bool]:
        """Up to ``count`` linked rows nearest to ``unit``, nearest first (as the int8 vectors rank them).

        ``exact`` scans every int8 vector instead of walking the graphs (as
        every search does under :data:`SCAN_BELOW` rows). The isolated rows are
        not among them unless a graph reached them: see :meth:`isolated_above`.

        Returns:
            The rows, and whether every linked row was proposed (no wider
            request could propose more).
        """
        with self._lock:
            if not self.linked.any():
                return np.zeros(0, dtype=np.intp), True
            exact = exact or int(np.count_nonzero(self.linked)) < SCAN_BELOW
            keys: list[npt.NDArray[np.uint64]] = []
            distances: list[Floats] = []
            complete = True
            for graph, masked in ((self._saved, self.dropped_saved), (self._memory, 0)):
                if graph is None or len(graph) == 0:
                    continue
                # Rows masked in the saved graph take places in its answer: ask for that many more.
                wanted = min(count + masked, len(graph))
                found, far, counts = graph.search(unit, wanted, exact=exact)
                got = int(counts[0])
                keys.append(found[0, :got])
                distances.append(far[0, :got])
                complete = complete and wanted == len(graph) and got == wanted
            rows: Rows = np.zeros(0, dtype=np.intp)
            if keys:
                merged = np.concatenate(keys)[np.argsort(np.concatenate(distances), kind="stable")]
                known = merged[merged < len(self.linked)].astype(np.intp)
                rows = known[self.linked[known]][:count]
            return rows, complete

    def isolated_above(self, unit: Vectors, floor: float) -> tuple[Rows, Floats]:
        """The isolated rows whose exact cosine with ``unit`` is above ``floor``, best first, with it.

        A search asks once its candidates from the graphs are ranked: an isolated
        row that beats the worst of the best it has is a candidate too.
        """
        with self._lock:
            if not len(self.isolated):
                return np.zeros(0, dtype=np.intp), np.zeros(0)
            scores = (self.isolated.vectors @ unit).astype(np.float64)
            above = np.flatnonzero(scores > floor)
            order = above[np.argsort(-scores[above], kind="stable")]
            return self.isolated.rows[order], scores[order]

    def merged(self) -> Graph:
        """One graph of every linked row, its freed slots zeroed: what a save writes.

        The saved graph (if any) is loaded into memory, its dropped rows removed
        and the rows linked since added to it; before a first save, the graph in
        memory is the one. usearch marks a removed row's slot free and keeps its
        int8 bytes until an add reuses the slot (an add takes a free slot first):
        zero vectors are added, and removed again, until every free slot is
        overwritten, so no dropped row's bytes are written.
        """
        with self._lock:
            if self._saved is None or self._buffer is None:
                graph = self._memory if self._memory is not None else new_graph(self.dim)
            else:
                graph = new_graph(self.dim)
                graph.load(self._buffer)
                gone = np.flatnonzero(self.in_saved & ~self.linked)
                if len(gone):
                    graph.remove(gone.astype(np.uint64))
                since = np.flatnonzero(self.in_memory)
                if len(since) and self._memory is not None:
                    keys = since.astype(np.uint64)
                    graph.add(keys, self._memory.int8(keys))
            free = graph.slots - len(graph)
            if free > 0:
                placeholders = np.arange(_PLACEHOLDER, _PLACEHOLDER + free, dtype=np.uint64)
                graph.add(placeholders, np.zeros((free, self.dim), dtype=np.float32))
                graph.remove(placeholders)
            return graph
