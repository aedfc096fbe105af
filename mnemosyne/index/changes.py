"""The change index: node id → the commits where that id's hash changed.

Written in the commit's transaction (one entry per changed id, against the
commit's first parent) and rebuildable from commits alone. Entries sort by id,
then generation, so the versions of one id come newest first from a reverse
prefix scan: blame and ``log --node`` cost O(versions), not O(history).
"""

from __future__ import annotations

from collections.abc import Iterator

from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, entries, replace_all

_TAG = b"c"


class ChangeIndex:
    """The change index of one tenant."""

    def __init__(self, scope: bytes) -> None:
        self.prefix = scope + _TAG

    def _id_prefix(self, node_id: str) -> bytes:
        return self.prefix + node_id.encode() + b"\x00"

    def add_many(
        self, txn: WriteTxn, generation: int, commit: bytes, changes: list[tuple[str, bytes | None]]
    ) -> None:
        """Record one commit's changes: ``(node id, new hash or None)`` each."""
        suffix = generation.to_bytes(8, "big") + commit
        txn.put_many(
            Space.INDEX, [(self._id_prefix(node_id) + suffix, new or b"") for node_id, new in changes]
        )

    def versions(
        self, txn: ReadTxn, node_id: str, max_generation: int | None = None
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """Yield ``(generation, commit, new hash or None)`` for ``node_id``, newest first."""
        prefix = self._id_prefix(node_id)
        start = (
            prefix + max_generation.to_bytes(8, "big") + b"\xff" * 32 if max_generation is not None else None
        )
        size = len(prefix)
        for key, value in txn.scan(Space.INDEX, prefix, start=start, reverse=True):
            generation = int.from_bytes(key[size : size + 8], "big")
            yield generation, key[size + 8 :], value or None

    def entries(self, txn: ReadTxn) -> dict[bytes, bytes]:
        """Every entry as stored (to compare with a rebuild)."""
        return entries(txn, Space.INDEX, self.prefix)

    def replace(self, txn: WriteTxn, rebuilt: dict[bytes, bytes]) -> None:
        """Replace every entry by ``rebuilt`` (as :meth:`entries` gives them): a rebuild."""
        replace_all(txn, Space.INDEX, self.prefix, rebuilt)
