"""The commit-graph index: generation numbers, first-parent skip pointers, ancestry.

Written in the commit's transaction and rebuildable from commits alone. Each
entry holds the commit's parents, its generation (1 + the largest parent
generation), its depth along first parents and a skip pointer to a first-parent
ancestor (the skip list of Bitcoin's block index), so "is C an ancestor of T"
costs O(log n) on first-parent history and walks only commits newer than C
otherwise.
"""

from __future__ import annotations

import msgspec

from mnemosyne.errors import CorruptObject
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, entries, replace_all

_TAG = b"g"


class GraphEntry(msgspec.Struct, frozen=True, array_like=True):
    """What the index knows of one commit."""

    parents: tuple[bytes, ...]
    generation: int
    depth: int
    skip: bytes
    merges: bool
    """Whether this commit or any ancestor has more than one parent."""
    claims: bytes = b""
    """Root of the snapshot's claim tree (see :mod:`mnemosyne.index.claims`); empty for none."""
    open: tuple[bytes, ...] = ()
    """Contradiction records still open in this snapshot (both claims unchanged)."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(GraphEntry)


def skip_depth(depth: int) -> int:
    """The first-parent depth a commit at ``depth`` keeps a skip pointer to."""

    def drop_lowest_one(n: int) -> int:
        return n & (n - 1)

    if depth < 2:
        return 0
    if depth & 1:
        return drop_lowest_one(drop_lowest_one(depth - 1)) + 1
    return drop_lowest_one(depth)


class CommitGraph:
    """The commit-graph index of one tenant."""

    def __init__(self, scope: bytes) -> None:
        self.prefix = scope + _TAG

    def entry(self, txn: ReadTxn, oid: bytes) -> GraphEntry:
        """The index entry of a commit.

        Raises:
            CorruptObject: if the commit is missing from the index.
        """
        data = txn.get(Space.INDEX, self.prefix + oid)
        if data is None:
            raise CorruptObject(
                f"commit {oid.hex()} is missing from the commit graph (damaged?); run 'mnemo reindex'"
            )
        try:
            return _decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise CorruptObject(
                f"the commit graph entry of {oid.hex()} is damaged ({exc}); run 'mnemo reindex'"
            ) from None

    def has(self, txn: ReadTxn, oid: bytes) -> bool:
        """Whether the commit is indexed (so it and everything it reaches is stored)."""
        return txn.get(Space.INDEX, self.prefix + oid) is not None

    def add(
        self,
        txn: WriteTxn,
        oid: bytes,
        parents: tuple[bytes, ...],
        claims: bytes = b"",
        open_records: tuple[bytes, ...] = (),
    ) -> GraphEntry:
        """Index a new commit whose parents are already indexed."""
        entries = [self.entry(txn, p) for p in parents]
        if entries:
            first = entries[0]
            depth = first.depth + 1
            generation = 1 + max(e.generation for e in entries)
            merges = len(parents) > 1 or any(e.merges for e in entries)
            skip = self.first_parent_at(txn, parents[0], skip_depth(depth))
        else:
            depth, generation, merges, skip = 0, 1, False, b""
        entry = GraphEntry(parents, generation, depth, skip, merges, claims, open_records)
        txn.put(Space.INDEX, self.prefix + oid, _encoder.encode(entry))
        return entry

    def first_parent_at(self, txn: ReadTxn, oid: bytes, depth: int) -> bytes:
        """The first-parent ancestor of ``oid`` at ``depth`` (``oid`` itself at its own depth)."""
        entry = self.entry(txn, oid)
        walk = entry.depth
        if depth > walk or depth < 0:
            raise ValueError("depth out of range")
        while walk > depth:
            jump = skip_depth(walk)
            jump_prev = skip_depth(walk - 1)
            if entry.skip and (
                jump == depth or (jump > depth and not (jump_prev < jump - 2 and jump_prev >= depth))
            ):
                oid, walk = entry.skip, jump
            else:
                oid, walk = entry.parents[0], walk - 1
            entry = self.entry(txn, oid)
        return oid

    def is_ancestor(self, txn: ReadTxn, ancestor: bytes, descendant: bytes) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant`` (a commit is its own ancestor)."""
        if ancestor == descendant:
            return True
        a = self.entry(txn, ancestor)
        d = self.entry(txn, descendant)
        if a.generation >= d.generation:
            return False
        if a.depth < d.depth and self.first_parent_at(txn, descendant, a.depth) == ancestor:
            return True
        if not d.merges:
            return False  # all of the descendant's history is its first-parent chain
        # Walk every parent, but never below the ancestor's generation.
        seen = {descendant}
        todo = [descendant]
        while todo:
            entry = self.entry(txn, todo.pop())
            for parent in entry.parents:
                if parent == ancestor:
                    return True
                if parent in seen:
                    continue
                seen.add(parent)
                if self.entry(txn, parent).generation > a.generation:
                    todo.append(parent)
        return False

    def entries(self, txn: ReadTxn) -> dict[bytes, bytes]:
        """Every entry as stored (to compare with a rebuild)."""
        return entries(txn, Space.INDEX, self.prefix)

    def replace(self, txn: WriteTxn, rebuilt: dict[bytes, bytes]) -> None:
        """Replace every entry by ``rebuilt`` (as :meth:`entries` gives them): a rebuild."""
        replace_all(txn, Space.INDEX, self.prefix, rebuilt)
