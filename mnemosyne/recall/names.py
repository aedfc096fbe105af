"""What a handle remembers of the index's names: content → versions, number → version.

Every candidate of a search needs its node hash and id before a filter can look
at it, and most are turned away by the first check (a namespace prefix). So a
handle keeps what it has read of the content map and of the document numbers,
in step with the index through its change log (see
:mod:`mnemosyne.recall.postings`): an entry naming a content drops what is
remembered of it, ``*`` drops everything. Document numbers are given once and
not reused before a ``*``, so a remembered number stays right until then.

A handle first reads names one by one, each read a page of the store; once it
has read about as many as the map has pages, it reads both maps whole (a scan
reads every page once) into compact arrays (:class:`Arrays`, about 75 bytes a
document besides its id), after which a search reads no names from the store,
and a batch of candidates is screened for a namespace prefix in one vectorised
step before any of them is decoded (:meth:`Names.under`,
:meth:`Names.contents_under`). A handle that searches once never pays for the
whole map. What changes after the arrays were read (a content the log names,
documents numbered since) is read one by one again and remembered beside them;
once about as many names as the map has pages were read so, the maps are read
whole again.

A transaction older than what is remembered cannot tell what changed since, so
it reads the index directly; a lookup is only remembered when the transaction
that made it is in step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mnemosyne.recall.postings import DOC_SIZE, NEVER, NUMBER_HEAD, Postings, Version, bulk, damaged
from mnemosyne.store.kv.base import ReadTxn

LIMIT = 1 << 21
"""Documents past which the maps are never read whole (a bound on memory: about 200 MB)."""
REMEMBERED = 1 << 16
"""Names remembered one by one per map at most (a larger store reads the rest from the store)."""
PER_PAGE = 32
"""About how many names one page of the store holds."""

_K = TypeVar("_K")
_V = TypeVar("_V")

Docs = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class Arrays:
    """Both maps read whole at one position of the change log, as arrays.

    Per document number below ``count``: whether it is indexed, its node hash
    (32 bytes each, one buffer), where its id starts in one buffer of UTF-8
    ids; expiries other than :data:`~mnemosyne.recall.postings.NEVER` apart
    (few versions expire). Per indexed version, in the order of its content
    hash then its node hash: the content hash's first 8 bytes as a number
    (searched by bisection), its other 24 bytes, and the document number.
    """

    def __init__(self, txn: ReadTxn, postings: Postings) -> None:
        """Read both maps of ``postings`` whole, as ``txn`` sees them."""
        keys, values = postings.number_records(txn)
        joined = b"".join(keys)
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        if len(joined) != 4 * len(keys) or (len(values) and int(lengths.min()) < NUMBER_HEAD):
            raise damaged("a document number record", ValueError("of the wrong size"))
        numbers = np.frombuffer(joined, dtype=">u4").astype(np.int64)
        count = self.count = int(numbers[-1]) + 1 if len(numbers) else 0
        self.present: Mask = np.zeros(count, dtype=bool)
        self.present[numbers] = True
        oids = b"".join(value[:32] for value in values)
        ids = b"".join(value[NUMBER_HEAD:] for value in values)
        try:
            ids.decode()
        except UnicodeDecodeError as exc:
            raise damaged("a document number record", exc) from None
        sizes = lengths - NUMBER_HEAD
        if len(numbers) < count:  # numbers without a document (rare): empty slots
            table = np.zeros((count, 32), dtype=np.uint8)
            table[numbers] = np.frombuffer(oids, dtype=np.uint8).reshape(-1, 32)
            oids = table.tobytes()
            spread = np.zeros(count, dtype=np.int64)
            spread[numbers] = sizes
            sizes = spread
        self.oids = oids
        self.ids = ids
        self._id_bytes = np.frombuffer(ids, dtype=np.uint8)
        self.starts = np.zeros(count + 1, dtype=np.uint32 if len(ids) < 1 << 32 else np.int64)
        np.cumsum(sizes, out=self.starts[1:])
        expires = np.frombuffer(b"".join(value[32:NUMBER_HEAD] for value in values), dtype=">i8")
        late = expires != NEVER
        self.expiring = numbers[late]
        self.expiries = expires[late].astype(np.int64)
        del keys, values
        records = postings.document_records(txn)
        if any(len(value) != DOC_SIZE for value in records):
            raise damaged("a document record", ValueError("of the wrong size"))
        table = np.frombuffer(b"".join(records), dtype=np.uint8).reshape(-1, DOC_SIZE)
        del records
        documents = np.ascontiguousarray(table[:, :4]).view(">u4").ravel()
        hashes = np.ascontiguousarray(table[:, DOC_SIZE - 32 :])
        words = hashes.view(">u8")
        # Stable: the records are in node hash order, and so stay the versions of one content.
        order = np.lexsort((words[:, 3], words[:, 2], words[:, 1], words[:, 0]))
        self.heads = words[order, 0].astype(np.uint64)
        self.tails = np.ascontiguousarray(hashes[order, 8:])
        self.members = documents[order].astype(np.uint32)

    def nbytes(self) -> int:
        """Bytes the arrays hold."""
        parts = (self.present, self.starts, self.expiring, self.expiries, self.heads, self.tails)
        return len(self.oids) + len(self.ids) + self.members.nbytes + sum(part.nbytes for part in parts)

    def version(self, doc: int) -> Version | None:
        """The version numbered ``doc``; None when the arrays hold none."""
        if not 0 <= doc < self.count or not self.present[doc]:
            return None
        start, end = int(self.starts[doc]), int(self.starts[doc + 1])
        expires = NEVER
        if len(self.expiring):
            at = int(np.searchsorted(self.expiring, doc))
            if at < len(self.expiring) and int(self.expiring[at]) == doc:
                expires = int(self.expiries[at])
        return self.oids[32 * doc : 32 * doc + 32], self.ids[start:end].decode(), expires

    def versions(self, chash: bytes) -> tuple[Version, ...] | None:
        """The versions with this content; None when the arrays hold none (or not all of them)."""
        head = np.uint64(int.from_bytes(chash[:8], "big"))  # a Python int would turn them to floats
        heads = self.heads
        at = int(np.searchsorted(heads, head))
        tail = chash[8:]
        found: list[Version] = []
        while at < len(heads) and heads[at] == head:
            if self.tails[at].tobytes() == tail:
                version = self.version(int(self.members[at]))
                if version is None:
                    return None  # the maps disagree: the store answers
                found.append(version)
            at += 1
        return tuple(found) if found else None

    def under(self, docs: Docs, prefix: bytes) -> Mask:
        """False where a document's id surely does not start with ``prefix`` (True: it may)."""
        out = np.ones(len(docs), dtype=bool)
        inside = (docs >= 0) & (docs < self.count)
        inside[inside] = self.present[docs[inside]]
        known = np.flatnonzero(inside)
        if not len(known):
            return out
        held = docs[known]
        starts = self.starts[held].astype(np.int64)
        fits = self.starts[held + 1].astype(np.int64) - starts >= len(prefix)
        # A byte at a time, over those still matching: a selective prefix narrows them fast,
        # where comparing every id's whole prefix gathers len(prefix) bytes of each.
        still = np.flatnonzero(fits)
        ids = self._id_bytes
        for offset, byte in enumerate(prefix):
            if not len(still):
                break
            still = still[ids[starts[still] + offset] == byte]
        match = np.zeros(len(held), dtype=bool)
        match[still] = True
        out[known] = match
        return out

    def contents_under(self, hashes: npt.NDArray[np.uint8], prefix: bytes) -> Mask:
        """False where a content (a row of ``hashes``) surely has no version under ``prefix``.

        Only a content of one version is judged here; one of more, or one the
        arrays do not hold, may (True).
        """
        out = np.ones(len(hashes), dtype=bool)
        if not len(hashes) or not len(self.heads):
            return out
        hashes = np.ascontiguousarray(hashes)
        heads = hashes.view(">u8")[:, 0].astype(np.uint64)
        low = np.searchsorted(self.heads, heads, side="left")
        high = np.searchsorted(self.heads, heads, side="right")
        single = np.flatnonzero(high - low == 1)
        at = low[single]
        single = single[(self.tails[at] == hashes[single, 8:]).all(axis=1)]
        if len(single):
            docs = self.members[low[single]].astype(np.int64)
            out[single] = self.under(docs, prefix)
        return out


class _Memory:
    """One tenant's remembered names and the log position they reflect."""

    def __init__(self) -> None:
        self.seq = 0
        self.versions: dict[bytes, tuple[Version, ...]] = {}
        self.numbers: dict[int, Version] = {}
        self.misses = [0, 0]  # lookups that read the store, per map, since the maps were read whole
        self.arrays: Arrays | None = None
        self.dropped: set[bytes] = set()  # contents changed since the arrays were read

    def forget(self) -> None:
        self.versions.clear()
        self.numbers.clear()
        self.misses = [0, 0]
        self.arrays = None
        self.dropped = set()  # a new set: a lookup still holding the old arrays keeps its own

    def drop(self, chash: bytes) -> None:
        self.versions.pop(chash, None)
        if self.arrays is not None:
            self.dropped.add(chash)

    def hold(self, arrays: Arrays) -> None:
        self.forget()
        self.arrays = arrays


class Names:
    """Lookups of one transaction, served from and kept in a handle's memory."""

    def __init__(
        self, txn: ReadTxn, postings: Postings, memory: _Memory | None, seq: int, lock: threading.Lock
    ) -> None:
        self._txn = txn
        self._postings = postings
        self._memory = memory
        self._seq = seq
        self._lock = lock
        self._pages = -1  # pages of a map, estimated when first needed
        # In step now (made under the lock): the arrays and what changed since they were read.
        # The set only grows until the memory lets go of both; a content added to it later is
        # read from the store, which this transaction may always do.
        self._arrays = None if memory is None else memory.arrays
        self._dropped: set[bytes] = set() if memory is None else memory.dropped

    def versions(self, chash: bytes) -> tuple[Version, ...]:
        """Every indexed version with this content."""
        arrays = self._arrays
        if arrays is not None and chash not in self._dropped:
            held = arrays.versions(chash)
            if held is not None:
                return held
        memory = self._memory
        if memory is not None:
            with self._lock:  # in step at this moment: another thread may have moved the memory on
                remembered = memory.versions.get(chash) if memory.seq == self._seq else None
            if remembered is not None:
                return remembered
        names = None if memory is None else memory.versions
        return self._read(0, chash, names, self._postings.versions_with_content) or ()

    def number(self, doc: int) -> Version | None:
        """The indexed version with this document number, or None."""
        arrays = self._arrays
        if arrays is not None:
            held = arrays.version(doc)
            if held is not None:
                return held
        memory = self._memory
        if memory is not None:
            with self._lock:  # numbers are given anew after a ``*``: only an in-step memory can answer
                known = memory.numbers.get(doc) if memory.seq == self._seq else None
            if known is not None:
                return known
        names = None if memory is None else memory.numbers
        return self._read(1, doc, names, self._postings.numbered)

    def under(self, docs: Docs, prefix: str) -> Mask:
        """Screen documents for a namespace: False where a document's id surely is not under ``prefix``.

        One vectorised step over the arrays (when the maps were read whole);
        True where a document may be under it, or is not known without a read.

        Args:
            docs: Document numbers.
            prefix: The namespace prefix.

        Returns:
            One flag per document.
        """
        arrays = self._arrays
        if arrays is None:
            return np.ones(len(docs), dtype=bool)
        return arrays.under(docs, prefix.encode())

    def contents_under(self, hashes: npt.NDArray[np.uint8], prefix: str) -> Mask:
        """Screen contents for a namespace: False where no version of a content is under ``prefix``.

        Args:
            hashes: Content hashes, one 32-byte row each.
            prefix: The namespace prefix.

        Returns:
            One flag per content: True where one may be (or it is not known without a read).
        """
        arrays = self._arrays
        if arrays is None:
            return np.ones(len(hashes), dtype=bool)
        out = arrays.contents_under(hashes, prefix.encode())
        dropped = self._dropped
        if dropped:
            for i in np.flatnonzero(~out).tolist():
                out[i] = hashes[i].tobytes() in dropped
        return out

    def _read(
        self, which: int, key: _K, names: dict[_K, _V] | None, read_one: Callable[[ReadTxn, _K], _V | None]
    ) -> _V | None:
        """Read one name from the store; remember it in ``names`` while the memory is in step."""
        found = read_one(self._txn, key)
        memory = self._memory
        # Never remember absence: new contents are not logged, so it would go stale.
        if memory is not None and names is not None and found:
            with self._lock:
                if memory.seq == self._seq:
                    if len(names) < REMEMBERED:
                        names[key] = found
                    if self._missed(memory, which):
                        with bulk():
                            arrays = Arrays(self._txn, self._postings)
                        memory.hold(arrays)
                        self._arrays, self._dropped = arrays, memory.dropped
        return found

    def _missed(self, memory: _Memory, which: int) -> bool:
        """Count a lookup that read the store; True when the maps should now be read whole."""
        memory.misses[which] += 1
        if self._pages < 0:
            self._pages = self._postings.stats(self._txn).docs // PER_PAGE
        return memory.misses[which] > self._pages and self._pages * PER_PAGE <= LIMIT


class NameMemory:
    """Per-handle memory of names, per tenant."""

    def __init__(self) -> None:
        self._tenants: dict[bytes, _Memory] = {}
        self._lock = threading.Lock()

    def names(self, txn: ReadTxn, postings: Postings) -> Names:
        """Lookups for ``txn``, brought in step with what it sees first."""
        with self._lock:
            memory = self._tenants.setdefault(postings.scope, _Memory())
            end = postings.last_change(txn)
            if end < memory.seq:
                return Names(txn, postings, None, end, self._lock)  # an older snapshot: read directly
            for change in postings.changes_since(txn, memory.seq):
                if change == b"*":
                    memory.forget()
                else:
                    memory.drop(change)
            memory.seq = end
            return Names(txn, postings, memory, end, self._lock)

    def held_bytes(self) -> int:
        """Bytes the arrays of every tenant hold (their dictionaries of names read one by one aside)."""
        with self._lock:
            return sum(m.arrays.nbytes() for m in self._tenants.values() if m.arrays is not None)
