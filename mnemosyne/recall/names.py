"""What a handle remembers of the index's names: content → versions, number → version.

Every candidate of a search needs its node hash and id before a filter can look
at it, and most are turned away by the first check (a namespace prefix). So a
handle keeps what it has read of the content map and of the document numbers,
in step with the index through its change log (see
:mod:`mnemosyne.recall.postings`): an entry naming a content drops what is
remembered of it, ``*`` drops everything. Document numbers are given once and
not reused before a ``*``, so a remembered number stays right until then.

A handle first reads names one by one, each read a page of the store; once it
has read about as many as the map has pages, it reads the map whole (a scan
reads every page once), after which a search reads no names from the store.
A handle that searches once never pays for the whole map.

A transaction older than what is remembered cannot tell what changed since, so
it reads the index directly; a lookup is only remembered when the transaction
that made it is in step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from mnemosyne.recall.postings import Postings, Version, bulk
from mnemosyne.store.kv.base import ReadTxn

LIMIT = 1 << 20
"""Names remembered per map at most (a bound on memory): a larger map is read piecemeal."""
PER_PAGE = 32
"""About how many names one page of the store holds."""

_K = TypeVar("_K")
_V = TypeVar("_V")


class _Memory:
    """One tenant's remembered names and the log position they reflect."""

    def __init__(self) -> None:
        self.seq = 0
        self.versions: dict[bytes, tuple[Version, ...]] = {}
        self.numbers: dict[int, Version] = {}
        self.misses = [0, 0]  # lookups that read the store, per map, since it was read whole
        self.whole = [False, False]

    def forget(self) -> None:
        self.versions.clear()
        self.numbers.clear()
        self.misses = [0, 0]
        self.whole = [False, False]


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

    def versions(self, chash: bytes) -> tuple[Version, ...]:
        """Every indexed version with this content."""
        memory = self._memory
        if memory is not None:
            with self._lock:  # in step at this moment: another thread may have moved the memory on
                remembered = memory.versions.get(chash) if memory.seq == self._seq else None
            if remembered is not None:
                return remembered
        names = None if memory is None else memory.versions
        postings = self._postings
        return self._read(0, chash, names, postings.versions_with_content, postings.every_content) or ()

    def number(self, doc: int) -> Version | None:
        """The indexed version with this document number, or None."""
        memory = self._memory
        if memory is not None:
            with self._lock:  # numbers are given anew after a ``*``: only an in-step memory can answer
                known = memory.numbers.get(doc) if memory.seq == self._seq else None
            if known is not None:
                return known
        names = None if memory is None else memory.numbers
        return self._read(1, doc, names, self._postings.numbered, self._postings.every_number)

    def _read(
        self,
        which: int,
        key: _K,
        names: dict[_K, _V] | None,
        read_one: Callable[[ReadTxn, _K], _V | None],
        read_all: Callable[[ReadTxn], Iterable[tuple[_K, _V]]],
    ) -> _V | None:
        """Read one name from the store; remember it in ``names`` while the memory is in step."""
        found = read_one(self._txn, key)
        memory = self._memory
        # Never remember absence: new contents are not logged, so it would go stale.
        if memory is not None and names is not None and found:
            with self._lock:
                if memory.seq == self._seq and len(names) < LIMIT:
                    names[key] = found
                    if self._missed(memory, which):
                        with bulk():
                            names.update(read_all(self._txn))
        return found

    def _missed(self, memory: _Memory, which: int) -> bool:
        """Count a lookup that read the store; True when the map should now be read whole."""
        memory.misses[which] += 1
        if memory.whole[which]:
            return False
        if self._pages < 0:
            self._pages = self._postings.stats(self._txn).docs // PER_PAGE
        if memory.misses[which] <= self._pages or self._pages * PER_PAGE > LIMIT:
            return False
        memory.whole[which] = True
        return True


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
                    memory.versions.pop(change, None)
            memory.seq = end
            return Names(txn, postings, memory, end, self._lock)
