"""Each handle's memory of one model's vectors: the matrix it ranks by, kept in step.

A :class:`Matrix` holds what a handle read of a model's vector blocks (see
:mod:`mnemosyne.recall.vectors`): content hashes, liveness, where each row's
vector is, and the vectors to rank by (float32 below the approximate threshold,
an :class:`~mnemosyne.recall.approximate.Approximate` index past it). The
:class:`VectorCache` of a handle keeps one per tenant and model, refreshed from
the blocks' change log; past the threshold it maps the index saved beside the
store (see :mod:`mnemosyne.recall.index_files`) and saves it again as it changes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from itertools import islice
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mnemosyne.recall import index_files
from mnemosyne.recall.approximate import Approximate, Codes, Graph
from mnemosyne.recall.embedders import Vectors
from mnemosyne.recall.index_files import Saved
from mnemosyne.recall.index_location import IndexLocation
from mnemosyne.recall.names import NameMemory, Names
from mnemosyne.recall.postings import Postings
from mnemosyne.recall.vectors import BLOCK_ROWS, DEAD, VectorStore, parse_block
from mnemosyne.store.kv.base import ReadTxn

G = TypeVar("G", bound=np.generic)


class Matrix:
    """One model's vectors in memory: content hashes, liveness, and the vectors to rank by.

    Exact (``rows`` holds every vector as float32, scanned whole per search) or
    approximate (``approx`` proposes rows, see :mod:`mnemosyne.recall.approximate`;
    ``rows`` stays empty, and a row's own vector is read from its block: ``block``
    and ``slot`` say where). Rows are numbered in the order their contents were
    first read and keep their number while the matrix lives (a dropped content's
    row is marked dead, and revived if the content comes back).
    """

    def __init__(
        self, dim: int, approximate: bool = False, saved: tuple[Saved, Approximate] | None = None
    ) -> None:
        """An empty matrix, or (``saved``) the rows a saved index holds, proposing through its graph."""
        self.dim = dim
        self.rows: npt.NDArray[np.float32] = np.zeros((0, dim), dtype=np.float32)
        self.count = 0
        self.hashes: npt.NDArray[np.uint8] = np.zeros((0, 32), dtype=np.uint8)
        self.alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        # The content hash's first 8 bytes: equal scores break by them (see :attr:`keys`).
        self._keys: npt.NDArray[np.uint64] | None = np.zeros(0, dtype=np.uint64)
        self.block: npt.NDArray[np.uint32] = np.zeros(0, dtype=np.uint32)
        self.slot: npt.NDArray[np.uint8] = np.zeros(0, dtype=np.uint8)
        self.seq = 0
        self.entry = b""  # the change-log entry at ``seq``
        self.approx: Approximate | None = Approximate(dim) if approximate else None
        # Content → row: rows read from a saved index are found by binary search over
        # their keys (``_sorted``: rows by key); rows read since, in ``_found``.
        self._found: dict[bytes, int] = {}
        self._sorted_keys: npt.NDArray[np.uint64] | None = np.zeros(0, dtype=np.uint64)
        self._sorted: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._waiting: list[tuple[int, Vectors]] = []  # rows to link, with their vectors
        self.save_failed = False  # this handle could not write the index file: it does not retry
        if saved is not None:
            index, self.approx = saved
            header = index.header
            self.count = header.count
            self.hashes, self.alive = index.hashes, index.alive
            self.block, self.slot = index.block, index.slot
            # Worked out when first needed: a search that ranks a few rows needs a few keys.
            self._keys = self._sorted_keys = None
            self._sorted = index.order
            self.seq, self.entry = header.seq, bytes.fromhex(header.entry)

    @property
    def keys(self) -> npt.NDArray[np.uint64]:
        """The first 8 bytes of each row's content hash, as a number (equal scores break by them)."""
        if self._keys is None:
            self._keys = _keys(self.hashes)
        return self._keys

    @keys.setter
    def keys(self, value: npt.NDArray[np.uint64]) -> None:
        self._keys = value

    def keys_of(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.uint64]:
        """The keys (see :attr:`keys`) of some rows, without working out every row's."""
        return self._keys[rows] if self._keys is not None else _keys(self.hashes[rows])

    def _by_key(self) -> npt.NDArray[np.uint64]:
        """The keys of the rows of a saved index, in the order of ``_sorted``."""
        if self._sorted_keys is None:
            self._sorted_keys = self.keys_of(self._sorted)
        return self._sorted_keys

    def content(self, row: int) -> bytes:
        """The content hash of a row."""
        return bytes(self.hashes[row])

    def row_of(self, chash: bytes) -> int | None:
        """The row of a content, dead or alive; None if this matrix never read it."""
        row = self._found.get(chash)
        if row is not None or not len(self._sorted):
            return row
        key = np.uint64(int.from_bytes(chash[:8], "big"))  # a Python int would turn the keys to floats
        by_key = self._by_key()
        at = int(np.searchsorted(by_key, key))
        while at < len(self._sorted) and int(by_key[at]) == key:
            row = int(self._sorted[at])
            if self.hashes[row].tobytes() == chash:
                return row
            at += 1
        return None

    def rows_of(self, chashes: list[bytes]) -> npt.NDArray[np.intp]:
        """The rows of many contents at once (-1 for one this matrix never read)."""
        out = np.full(len(chashes), -1, dtype=np.intp)
        if not chashes:
            return out
        wanted = np.frombuffer(b"".join(chashes), dtype=np.uint8).reshape(-1, 32)
        if len(self._sorted):
            keys = _keys(wanted)
            at = np.minimum(np.searchsorted(self._by_key(), keys), len(self._sorted) - 1)
            rows = self._sorted[at]
            same = (self.hashes[rows] == wanted).all(axis=1)
            out[same] = rows[same]
        for i in np.flatnonzero(out < 0).tolist():  # read since, or a rare clash of first 8 bytes
            row = self.row_of(chashes[i])
            if row is not None:
                out[i] = row
        return out

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows at once (a build that knows how many it reads grows nothing).

        Growing by doubling would hold the old arrays and the new, twice as large,
        at once: at a million rows, hundreds of MB more at the peak of a build.
        """
        self._grow(rows, exact=True)
        if self.approx is not None:
            self.approx.reserve(rows)

    def _grow(self, end: int, exact: bool = False) -> None:
        if end <= len(self.alive):
            return
        size = end if exact else max(16, 2 * len(self.alive), end)
        if self.approx is None:
            self.rows = _grown(self.rows, size)
        self.hashes = _grown(self.hashes, size)
        self.alive = _grown(self.alive, size)
        self.keys = _grown(self.keys, size)
        self.block = _grown(self.block, size)
        self.slot = _grown(self.slot, size)

    def add(self, number: int, hashes: list[bytes], vectors: Vectors) -> None:
        """Add (or revive) the rows of block ``number``; zero hashes are dropped rows."""
        fresh: list[int] = []
        for i, chash in enumerate(hashes):
            if chash == DEAD:
                continue
            row = self.row_of(chash)
            if row is None:
                fresh.append(i)
                continue
            if self.approx is None:
                self.rows[row] = vectors[i]
            elif not self.alive[row]:  # dropped, and back: linked again
                self._waiting.append((row, vectors[i : i + 1]))
            self.alive[row] = True
            self.block[row], self.slot[row] = number, i
        if not fresh:
            return
        start = self.count
        end = start + len(fresh)
        self._grow(end)
        if self.approx is None:
            self.rows[start:end] = vectors[fresh]
        else:
            self._waiting.extend((row, vectors[i : i + 1]) for row, i in enumerate(fresh, start))
        added = [hashes[i] for i in fresh]
        packed = np.frombuffer(b"".join(added), dtype=np.uint8).reshape(-1, 32)
        self.hashes[start:end] = packed
        self.alive[start:end] = True
        self.block[start:end] = number
        self.slot[start:end] = fresh
        self.keys[start:end] = _keys(packed)
        for row, chash in enumerate(added, start):
            self._found[chash] = row
        self.count = end
        if len(self._waiting) >= _LINK_BATCH:
            self.link()

    def kill(self, rows: npt.NDArray[np.intp]) -> None:
        """Mark rows dropped; the approximate index forgets them at once."""
        self.alive[rows] = False
        if self.approx is not None:
            self.approx.remove(rows)

    def drop_gone(self, txn: ReadTxn, store: VectorStore, model: str, numbers: set[int]) -> None:
        """Mark dead the live rows of blocks ``numbers`` whose content the block no longer holds there."""
        if not numbers or not self.count:
            return
        count = self.count
        candidates = np.flatnonzero(
            np.isin(self.block[:count], np.fromiter(numbers, dtype=np.uint32, count=len(numbers)))
            & self.alive[:count]
        )
        blocks: dict[int, list[bytes]] = {}
        gone: list[int] = []
        for row in candidates.tolist():
            number = int(self.block[row])
            if number not in blocks:
                data = store.block(txn, model, number.to_bytes(4, "big"))
                blocks[number] = parse_block(data)[0] if data is not None else []
            held = blocks[number]
            slot = int(self.slot[row])
            if slot >= len(held) or held[slot] != self.content(row):
                gone.append(row)
        if gone:
            self.kill(np.array(gone, dtype=np.intp))

    def link(self) -> None:
        """Put the rows read since the last call into the approximate index (one bulk add)."""
        waiting, self._waiting = self._waiting, []
        approx = self.approx
        if approx is None or not waiting:
            return
        linked = approx.linked
        latest = {
            row: vector
            for row, vector in waiting
            if self.alive[row] and (row >= len(linked) or not linked[row])
        }
        if latest:
            rows = np.fromiter(latest, dtype=np.intp, count=len(latest))
            approx.add(rows, np.concatenate(list(latest.values())))

    def save_arrays(self) -> tuple[dict[str, np.ndarray], int]:
        """The manifest's arrays for the rows now (see :mod:`mnemosyne.recall.index_files`).

        A dead row's content hash is written as zeros: the file must not name a
        dropped content (a hash would confirm a guess of an erased text).

        Returns:
            The arrays by name, and how many rows are live.
        """
        approx = self.approx
        assert approx is not None
        count = self.count
        alive = self.alive[:count].copy()
        hashes = self.hashes[:count].copy()
        hashes[~alive] = 0
        live = np.flatnonzero(alive)
        order = live[np.argsort(self.keys_of(live), kind="stable")]
        isolated = approx.isolated
        return (
            {
                "hashes": hashes,
                "block": self.block[:count],
                "slot": self.slot[:count],
                "alive": alive.astype(np.uint8),
                "order": order.astype(np.uint32),
                "isolated": isolated.rows.astype(np.uint32),
                "near": isolated.near.astype(np.float32),
                "vectors": isolated.vectors,
            },
            len(live),
        )


_LINK_BATCH = 1 << 13
"""Rows read before they are linked: a bulk add is faster than many small ones, and
the vectors waiting (float32) stay small (12 MB at 384 wide)."""

MEMBERS_BYTES = 64 << 20
"""Vectors of namespaces scored whole that a handle keeps at most."""

BLOCKS_READ = 64
"""Change-log entries applied at a time, the blocks they name read together: a few MB at most."""

LET_GO_AFTER = 1024
"""Vector blocks read (32 rows each: about 48 MB at 384 wide) after which a catch-up of an
approximate index lets their pages leave the process's resident memory (see
:meth:`~mnemosyne.store.kv.base.ReadTxn.let_go`)."""

SAVE_AFTER = 2048
"""Rows linked since the saved index (or dropped from it) past which a writable handle
saves it again: a new process then links at most about this many itself (a third of a
second at a million rows, beside a few seconds for a save there)."""


def _built(dim: int, capacity: int) -> Matrix:
    """An empty approximate matrix with room for ``capacity`` rows (about what the blocks hold)."""
    found = Matrix(dim, approximate=True)
    found.reserve(capacity)
    return found


def _keys(hashes: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """The first 8 bytes of each content hash, as big-endian numbers."""
    return np.ascontiguousarray(hashes[:, :8]).view(">u8").reshape(-1).astype(np.uint64)


def _grown(array: npt.NDArray[G], size: int) -> npt.NDArray[G]:
    grown = np.zeros((size, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class VectorCache:
    """Per-handle in-memory matrices, refreshed from the vectors keyspace's change log.

    Past the approximate threshold, a matrix comes from the index saved at
    ``location`` when one checks out, and a handle that may write there saves it
    (after building it, and again once :data:`SAVE_AFTER` rows changed since).
    It also keeps the handle's memory of names (see :mod:`mnemosyne.recall.names`).
    """

    def __init__(self, location: IndexLocation | None = None) -> None:
        self._matrices: dict[tuple[bytes, str], Matrix] = {}
        self._lock = threading.Lock()
        self._names = NameMemory()
        self.location = location
        self._members: OrderedDict[object, tuple[object, int]] = OrderedDict()

    def members(self, key: object) -> object | None:
        """What :meth:`keep_members` kept under ``key``, if it still holds it."""
        with self._lock:
            found = self._members.get(key)
            if found is None:
                return None
            self._members.move_to_end(key)
            return found[0]

    def keep_members(self, key: object, members: object, size: int) -> None:
        """Keep a namespace's members (see :mod:`mnemosyne.recall.semantic`).

        The least recently used go first past :data:`MEMBERS_BYTES`.
        """
        with self._lock:
            self._members[key] = (members, size)
            self._members.move_to_end(key)
            while len(self._members) > 1 and sum(kept for _, kept in self._members.values()) > MEMBERS_BYTES:
                self._members.popitem(last=False)

    def names(self, txn: ReadTxn, postings: Postings) -> Names:
        """Name lookups for ``txn``, served from this handle's memory where it is in step."""
        return self._names.names(txn, postings)

    def held(self) -> list[Matrix]:
        """The matrices this handle holds now, one per tenant and model, as last refreshed.

        For tests and diagnostics (whether a ranking went through the approximate
        index, how many rows it holds); searches use :meth:`matrix`.

        Returns:
            The matrices, in the order they were first built.
        """
        with self._lock:
            return list(self._matrices.values())

    def forget(self) -> None:
        """Drop every matrix (and its mapping of a saved index): the next search reads anew."""
        with self._lock:
            self._matrices.clear()
            self._members.clear()

    def matrix(
        self, txn: ReadTxn, store: VectorStore, model: str, dim: int, approximate_from: int | None = None
    ) -> Matrix:
        """The up-to-date matrix of ``model`` as this transaction sees it.

        Approximate when the model's blocks could hold ``approximate_from`` vectors
        or more (None: always exact); a matrix that crosses that line is read anew.
        """
        scope = store.scope
        capacity = store.capacity(txn, model) if approximate_from is not None else 0
        approximate = approximate_from is not None and capacity >= approximate_from
        with self._lock:
            found = self._matrices.get((scope, model))
            if found is None or found.dim != dim or (found.approx is not None) != approximate:
                found = self._fresh(txn, store, model, dim, capacity if approximate else None)
            found = self._catch_up(txn, store, model, found)
            if found.approx is not None:
                self._maybe_save(txn, store, model, found)
                if found.approx.lost:  # saved, but the saved files could not be mapped
                    found = self._catch_up(txn, store, model, _built(dim, capacity))
                    found.save_failed = True
            self._matrices[(scope, model)] = found
            return found

    def _fresh(self, txn: ReadTxn, store: VectorStore, model: str, dim: int, capacity: int | None) -> Matrix:
        """A matrix to catch up from: the saved index when it checks out, else an empty one.

        ``capacity``: the rows the model's blocks can hold, for an approximate
        matrix (None: exact).
        """
        if capacity is None:
            return Matrix(dim)
        if self.location is not None:
            loaded = self._load(txn, store, model, dim)
            if loaded is not None:
                return loaded
        return _built(dim, capacity)

    def _load(self, txn: ReadTxn, store: VectorStore, model: str, dim: int) -> Matrix | None:
        """The saved index of ``model``, if its header matches this store as ``txn`` sees it."""
        assert self.location is not None
        found = index_files.read(self.location, store.scope, model)
        if found is None:
            return None
        saved, graph, codes_file = found
        header = saved.header
        identity = store.identity(txn)
        if identity is None or header.identity != identity.hex() or header.dim != dim:
            return None
        if header.seq and store.log_entry(txn, model, header.seq) != bytes.fromhex(header.entry):
            return None  # caught up to an entry this log does not have: another history, or rebuilt
        if header.seq > store.last_seq(txn, model):
            return None
        viewed = index_files.view(graph, dim)
        codes = index_files.view_codes(codes_file, header.count, dim)
        if viewed is None or codes is None:
            return None
        approx = Approximate(dim, typical=header.typical)
        approx.map(viewed[0], viewed[1], saved.alive, saved.isolated, codes)
        return Matrix(dim, saved=(saved, approx))

    def _catch_up(self, txn: ReadTxn, store: VectorStore, model: str, found: Matrix) -> Matrix:
        """Apply the change log after ``found.seq``: new blocks added, rows of rewritten ones dropped."""
        rewritten: set[int] = set()
        log = store.log_since(txn, model, found.seq)
        read = 0
        while changes := list(islice(log, BLOCKS_READ)):
            # The blocks these entries name, read at once (on PostgreSQL a round trip each).
            named = [change[1:] for _, change in changes if len(change) == 5 and change[:1] != b"-"]
            blocks = store.blocks_at(txn, model, list(dict.fromkeys(named)))
            found = self._apply(changes, blocks, rewritten, found)
            read += len(blocks)
            if read >= LET_GO_AFTER and found.approx is not None:
                # The index keeps its own int8 copies: the blocks' pages need not stay
                # resident (1.5 GB at a million 384-wide vectors).
                txn.let_go()
                read = 0
        if read and found.approx is not None and found.count >= LET_GO_AFTER * BLOCK_ROWS:
            txn.let_go()
        # Dropped rows are found from the blocks as this transaction sees them, so the
        # order of the entries read does not matter: a row is alive where its block holds it.
        found.drop_gone(txn, store, model, rewritten)
        found.link()
        return found

    @staticmethod
    def _apply(
        changes: list[tuple[int, bytes]], blocks: dict[bytes, bytes], rewritten: set[int], found: Matrix
    ) -> Matrix:
        """Apply log entries, their blocks read: new blocks added, rewritten ones noted in ``rewritten``."""
        dim = found.dim
        for seq, change in changes:
            if change == b"*":  # the vectors were rebuilt: start over
                rewritten.clear()
                found = Matrix(dim, found.approx is not None)
            found.seq, found.entry = seq, change
            kind, rest = change[:1], change[1:]
            if len(rest) != 4:
                continue  # not a change this version writes
            if kind == b"-":
                rewritten.add(int.from_bytes(rest, "big"))
                continue
            data = blocks.get(rest)
            if data is not None:
                hashes, vectors = parse_block(data)
                if vectors.shape[1:] == (dim,):
                    found.add(int.from_bytes(rest, "big"), hashes, vectors)
        return found

    def _maybe_save(self, txn: ReadTxn, store: VectorStore, model: str, found: Matrix) -> None:
        """Save the index when it was never saved, or enough changed since (see :data:`SAVE_AFTER`)."""
        approx = found.approx
        location = self.location
        if approx is None or location is None or not location.writable or found.save_failed:
            return
        changed = approx.linked_since + approx.dropped_saved
        stale = not approx.saved and found.count > 0
        if stale or changed >= SAVE_AFTER or (location.outside and approx.dropped_saved):
            self.save(txn, store, model, found)

    def save(self, txn: ReadTxn, store: VectorStore, model: str, found: Matrix) -> bool:
        """Write ``found``'s index to the location now, then map it; whether that happened."""
        approx = found.approx
        location = self.location
        identity = store.identity(txn)
        if approx is None or location is None or identity is None:
            return False
        graph = approx.merged()
        arrays, live = found.save_arrays()
        header = index_files.Header(
            identity=identity.hex(),
            scope=store.scope.hex(),
            model=model,
            dim=found.dim,
            seq=found.seq,
            entry=found.entry.hex(),
            count=found.count,
            live=live,
            isolated=len(approx.isolated),
            typical=approx.typical,
            graph="",
            graph_bytes=0,
            graph_rows=0,
        )
        written = index_files.write(location, header, arrays, graph, approx.saved_codes)
        if written is None:
            found.save_failed = True
            return False
        del graph  # the files hold it now: the graph in memory goes before the saved one is mapped
        count, dim = found.count, found.dim

        def saved() -> tuple[Graph, memoryview, Codes] | None:
            viewed = index_files.view(written[0], dim)
            codes = index_files.view_codes(written[1], count, dim)
            return None if viewed is None or codes is None else (viewed[0], viewed[1], codes)

        if not approx.map_instead(saved, arrays["alive"].astype(bool)):
            found.save_failed = True
            return False
        return True

    def scrub(self, txn: ReadTxn, store: VectorStore, model: str, dim: int) -> bool:
        """Rewrite the saved index of ``model`` if it holds rows dropped since it was saved.

        Returns:
            False when the saved index could not be read, caught up and rewritten
            (the caller then deletes its files).
        """
        with self._lock:
            found = self._load(txn, store, model, dim)
            if found is None:
                return False
            found = self._catch_up(txn, store, model, found)
            approx = found.approx
            if approx is None or not approx.saved:
                return False  # started over (the log was cleared): nothing of it is worth keeping
            if not approx.dropped_saved:
                return True
            return self.save(txn, store, model, found)


def scrub(txn: ReadTxn, location: IndexLocation, scopes: set[bytes]) -> None:
    """Leave in ``location`` no saved index that holds a row dropped since it was saved.

    For compaction: each saved index of this store is caught up from its model's
    change log; one that holds a dropped row's int8 vector is rewritten without
    it. One of a tenant not in ``scopes`` (dropped), one that does not read back
    or check out, and one that cannot be rewritten are deleted.
    """
    cache = VectorCache(location)
    for name, scope, header in list(index_files.saved_indexes(location)):
        if header is None or scope not in scopes or header.scope != scope.hex():
            index_files.remove_named(location, name + ".")
        elif not cache.scrub(txn, VectorStore(scope), header.model, header.dim):
            index_files.remove(location, scope, header.model)
