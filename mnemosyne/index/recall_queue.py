"""The recall queue: node versions written since the recall indexes last caught up.

A commit appends one entry, ``recall`` · scope · ``q`` · sequence (8 bytes) → the
32-byte hashes of the versions it wrote, so queueing costs one small write at
the end of the keyspace whatever the commit's size (one key per version
scattered writes over as many pages). Draining reads every entry in order; an
erased version is cut out of the entries that name it. Written in the commit's
own transaction, like the other derived indexes; read by :mod:`mnemosyne.recall`.
"""

from __future__ import annotations

from collections.abc import Iterable

from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, last_number

TAG = b"q"
HASH = 32
ENTRY_HASHES = 4096
"""Versions per entry at most (a bulk import or a whole store queued at once spans several)."""


class RecallQueue:
    """One tenant's queue of versions waiting to be indexed for recall."""

    def __init__(self, scope: bytes) -> None:
        self.prefix = scope + TAG

    def add(self, txn: WriteTxn, hashes: Iterable[bytes]) -> None:
        """Queue versions: one entry per :data:`ENTRY_HASHES` of them (a commit's fit in one)."""
        queued = list(hashes)
        if not queued:
            return  # a commit that only removes ids queues nothing
        seq = last_number(txn, Space.RECALL, self.prefix)
        items = []
        for start in range(0, len(queued), ENTRY_HASHES):
            seq += 1
            items.append(
                (self.prefix + seq.to_bytes(8, "big"), b"".join(queued[start : start + ENTRY_HASHES]))
            )
        txn.put_many(Space.RECALL, items)

    def any(self, txn: ReadTxn) -> bool:
        """Whether any version is queued."""
        return next(iter(txn.scan(Space.RECALL, self.prefix)), None) is not None

    def queued(self, txn: ReadTxn) -> list[bytes]:
        """Every queued version, oldest first, each once."""
        seen: dict[bytes, None] = {}
        for _, data in txn.scan(Space.RECALL, self.prefix):
            for start in range(0, len(data), HASH):
                seen.setdefault(bytes(data[start : start + HASH]))
        return list(seen)

    def clear(self, txn: WriteTxn) -> None:
        """Empty the queue (a catch-up took everything in it, or a rebuild starts over)."""
        for key in [key for key, _ in txn.scan(Space.RECALL, self.prefix)]:
            txn.discard(Space.RECALL, key)

    def drop(self, txn: WriteTxn, oids: Iterable[bytes]) -> None:
        """Cut versions out of every entry that names them (erasure, collection), in one pass."""
        import numpy as np  # here, not at import: only erasure and collection need it

        wanted = set(oids)
        if not wanted:
            return
        # Empty entries are never written; skipping any keeps reduceat's slices honest.
        entries = [
            (bytes(key), bytes(value)) for key, value in txn.scan(Space.RECALL, self.prefix) if len(value)
        ]
        if not entries:
            return
        # One membership test over every queued hash at once, on their first 8 bytes
        # (random: equal prefixes are rare), each candidate then compared whole.
        joined = b"".join(value for _, value in entries)
        hashes = np.frombuffer(joined, dtype=f"S{HASH}")
        prefixes = np.frombuffer(joined, dtype="<u8")[:: HASH // 8]
        targets = np.frombuffer(b"".join(oid[:8] for oid in wanted), dtype="<u8")
        hit = np.isin(prefixes, targets)
        for index in np.flatnonzero(hit).tolist():
            if joined[index * HASH : (index + 1) * HASH] not in wanted:
                hit[index] = False
        if not hit.any():
            return
        sizes = np.array([len(value) // HASH for _, value in entries])
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        touched = np.flatnonzero(np.add.reduceat(hit, starts) > 0)
        for index in touched.tolist():
            key, _ = entries[index]
            start, size = int(starts[index]), int(sizes[index])
            kept = hashes[start : start + size][~hit[start : start + size]]
            if len(kept):
                txn.put(Space.RECALL, key, kept.tobytes())
            else:
                txn.discard(Space.RECALL, key)
