"""An approximate nearest-neighbour index over one model's vectors (usearch's HNSW).

Derived data of one handle, never stored: built from the vector blocks when a
model's vectors first reach the store's ``recall.approximate_from`` setting,
and kept in step with the blocks' change log like the exact matrix (see
:mod:`mnemosyne.recall.vectors`). Keys are the matrix's row numbers.

Vectors are held as int8 (a quarter of float32: about 380 bytes of a 384-wide
vector, plus about 150 bytes of graph). Quantising costs ranking precision, so
the index only proposes candidates; the search then scores the ones that pass
the filters exactly, from the stored float32 vectors (see
:mod:`mnemosyne.recall.semantic`). What stays approximate is which rows are
proposed: a row the graph search does not reach is missed.

See docs/adr/0024-approximate-vector-index.md for the choice of library and
its parameters.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from usearch.index import Index

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


class Approximate:
    """The HNSW graph of one model's live vectors, keyed by matrix row."""

    def __init__(self, dim: int) -> None:
        from usearch.index import Index  # only a store past the threshold pays for it

        self._index: Index = Index(
            ndim=dim,
            metric="ip",  # stored vectors and queries are unit length: the same order as cosine, cheaper
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        # usearch allows searches alongside each other, not beside a removal or an add.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._index.size)

    def add(self, rows: npt.NDArray[np.intp], vectors: npt.NDArray[np.float32]) -> None:
        """Link these rows (none of them in the index) with their vectors."""
        if not len(rows):
            return
        with self._lock:
            self._index.add(rows.astype(np.uint64), vectors, threads=THREADS)

    def remove(self, rows: npt.NDArray[np.intp]) -> None:
        """Unlink these rows (absent ones are ignored)."""
        if len(rows):
            with self._lock:
                self._index.remove(rows.astype(np.uint64))

    def nearest(self, unit: npt.NDArray[np.float32], count: int, exact: bool = False) -> npt.NDArray[np.intp]:
        """Up to ``count`` rows nearest to ``unit``, nearest first (as the int8 vectors rank them).

        ``exact`` scans every int8 vector instead of walking the graph.
        """
        with self._lock:
            size = len(self._index)
            if size == 0:
                return np.zeros(0, dtype=np.intp)
            wanted = min(count, size)
            # A request wider than the search's beam would come back short: widen the beam with it.
            self._index.expansion_search = max(EXPANSION_SEARCH, wanted)  # type: ignore[misc]  # has a setter
            found = self._index.search(unit, wanted, exact=exact)
        return np.asarray(found.keys, dtype=np.intp)
