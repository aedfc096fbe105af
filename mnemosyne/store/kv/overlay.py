"""A write transaction that leaves the store alone: writes go to scratch, reads fall through.

Rebuilding derived indexes must not trust the entries it replaces and must not
write into a store it only checks (``fsck`` runs on a read snapshot), so the
rebuild writes into a scratch store seen through this overlay.
"""

from __future__ import annotations

from collections.abc import Iterator

from mnemosyne.store.kv.base import DERIVED_SPACES, ReadTxn, Space, WriteTxn


class Overlay:
    """Writes go to ``scratch``; reads of derived keyspaces see only ``scratch``, others ``real`` too.

    A put that must not overwrite also sees ``real``: an object already stored is
    not written again. Scans see only ``scratch``.
    """

    def __init__(self, scratch: WriteTxn, real: ReadTxn) -> None:
        self.scratch = scratch
        self.real = real
        self.remote = real.remote

    def get(self, space: Space, key: bytes) -> bytes | None:
        """The value in scratch, else (outside derived keyspaces) in the real store."""
        found = self.scratch.get(space, key)
        if found is None and space not in DERIVED_SPACES:
            found = self.real.get(space, key)
        return found

    def get_many(self, space: Space, keys: list[bytes]) -> list[bytes | None]:
        """Each value as :meth:`get` finds it."""
        return [self.get(space, key) for key in keys]

    def prefetch_scans(self, space: Space, scans: list[tuple[bytes, bytes | None, bool]]) -> None:
        """Pass the hint to the scratch store, which scans serve."""
        self.scratch.prefetch_scans(space, scans)

    def let_go(self) -> None:
        """Pass the hint to the real store, whose pages the reads map."""
        self.real.let_go()

    def scan(
        self, space: Space, prefix: bytes, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Scan the scratch store."""
        return self.scratch.scan(space, prefix, start, reverse)

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        """Write to scratch (unless, without ``overwrite``, the real store has the key)."""
        if not overwrite and space not in DERIVED_SPACES and self.real.get(space, key) is not None:
            return False
        return self.scratch.put(space, key, value, overwrite)

    def delete(self, space: Space, key: bytes) -> bool:
        """Delete from scratch."""
        return self.scratch.delete(space, key)

    def discard(self, space: Space, key: bytes) -> None:
        """Delete from scratch."""
        self.scratch.discard(space, key)

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        """Write each item as :meth:`put` does."""
        return sum(self.put(space, key, value, overwrite) for key, value in items)

    def put_absent(self, space: Space, items: list[tuple[bytes, bytes]]) -> None:
        """Write each item as :meth:`put` without ``overwrite`` does."""
        self.put_many(space, items, overwrite=False)
