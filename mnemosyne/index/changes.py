"""The change index: node id → the commits where that id's hash changed, or was verified.

Written in the commit's transaction (one entry per changed id, against the
commit's first parent; one per id a verification re-confirmed) and rebuildable
from commits alone. Entries sort by id, then generation, so the versions of one
id come newest first from a reverse prefix scan: blame and ``log --node`` cost
O(versions), not O(history), and so does "when was this version last confirmed".
A change's value is the new hash (empty: removed); a verification's is
:data:`VERIFIED` and the hash it confirmed, so it is never mistaken for a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, entries, replace_all

_TAG = b"c"

VERIFIED = b"v"
"""What a verification entry's value starts with (a change's is a 32-byte hash or empty)."""

_VERIFIED_SIZE = len(VERIFIED) + 32


class ChangeIndex:
    """The change index of one tenant."""

    def __init__(self, scope: bytes) -> None:
        self.prefix = scope + _TAG

    def _id_prefix(self, node_id: str) -> bytes:
        return self.prefix + node_id.encode() + b"\x00"

    def add_changes(
        self,
        txn: WriteTxn,
        generation: int,
        commit: bytes,
        changes: Sequence[tuple[str, bytes | None, bytes | None]],
    ) -> None:
        """Record one commit's changes: ``(node id, old hash, new hash)`` each (None for none)."""
        prefix = self.prefix
        tail = b"\x00" + generation.to_bytes(8, "big") + commit  # after the id, as _id_prefix ends
        # One comprehension, no call per change: an import records a million.
        txn.put_many(
            Space.INDEX, [(prefix + node_id.encode() + tail, new or b"") for node_id, _, new in changes]
        )

    def add_verified(
        self, txn: WriteTxn, generation: int, commit: bytes, verified: list[tuple[str, bytes]]
    ) -> None:
        """Record that one commit verified ``(node id, current hash)`` each, without changing them."""
        suffix = generation.to_bytes(8, "big") + commit
        txn.put_many(
            Space.INDEX, [(self._id_prefix(node_id) + suffix, VERIFIED + oid) for node_id, oid in verified]
        )

    def versions(
        self, txn: ReadTxn, node_id: str, max_generation: int | None = None
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """Yield ``(generation, commit, new hash or None)`` for ``node_id``'s changes, newest first."""
        for generation, commit, value, verified in self.entries_of(txn, node_id, max_generation):
            if not verified:
                yield generation, commit, value

    def first_scans(self, node_ids: list[str]) -> list[tuple[Space, bytes, bytes | None, bool]]:
        """The scans whose first pages hold the newest entries of each of ``node_ids``.

        Read ahead (``KV.view``'s ``scans``, or :meth:`prefetch`), they serve
        :meth:`entries_of` at any ``max_generation`` as far as they reach.
        """
        return [(Space.INDEX, self._id_prefix(node_id), None, True) for node_id in node_ids]

    def prefetch(self, txn: ReadTxn, node_ids: list[str]) -> None:
        """Read the newest entries of each of ``node_ids`` at once (:meth:`first_scans`).

        One round trip on PostgreSQL for all of them, rather than one per id.
        """
        txn.prefetch_scans(Space.INDEX, [scan[1:] for scan in self.first_scans(node_ids)])

    def entries_of(
        self, txn: ReadTxn, node_id: str, max_generation: int | None = None
    ) -> Iterator[tuple[int, bytes, bytes | None, bool]]:
        """Yield ``(generation, commit, hash or None, verified)`` for changes and verifications, newest first.

        ``verified`` tells a verification (the hash it confirmed) from a change (the new hash).
        """
        prefix = self._id_prefix(node_id)
        start = (
            prefix + max_generation.to_bytes(8, "big") + b"\xff" * 32 if max_generation is not None else None
        )
        size = len(prefix)
        for key, value in txn.scan(Space.INDEX, prefix, start=start, reverse=True):
            generation = int.from_bytes(key[size : size + 8], "big")
            if len(value) == _VERIFIED_SIZE and value.startswith(VERIFIED):
                yield generation, key[size + 8 :], value[len(VERIFIED) :], True
            else:
                yield generation, key[size + 8 :], value or None, False

    def remove(self, txn: WriteTxn, generation: int, commit: bytes, node_ids: Iterable[str]) -> None:
        """Drop one commit's changes and verifications of ``node_ids`` (ids it has none of are skipped)."""
        prefix = self.prefix
        tail = b"\x00" + generation.to_bytes(8, "big") + commit
        # Sorted: neighbouring keys share pages, so each page is touched once.
        for key in sorted(prefix + node_id.encode() + tail for node_id in node_ids):
            txn.discard(Space.INDEX, key)

    def entries(self, txn: ReadTxn) -> dict[bytes, bytes]:
        """Every entry as stored (to compare with a rebuild)."""
        return entries(txn, Space.INDEX, self.prefix)

    def replace(self, txn: WriteTxn, rebuilt: dict[bytes, bytes]) -> None:
        """Replace every entry by ``rebuilt`` (as :meth:`entries` gives them): a rebuild."""
        replace_all(txn, Space.INDEX, self.prefix, rebuilt)
