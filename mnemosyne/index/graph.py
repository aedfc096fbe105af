"""The commit-graph index: generation numbers, first-parent skip pointers, ancestry.

Written in the commit's transaction and rebuildable from commits alone. Each
entry holds the commit's parents, its generation (1 + the largest parent
generation), its depth along first parents and a skip pointer to a first-parent
ancestor (the skip list of Bitcoin's block index), so "is C an ancestor of T"
costs O(log n) on first-parent history and walks only commits newer than C
otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

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

SHAPES = 65536
"""Commits' shapes (:class:`Shape`) a handle keeps, at most, before starting afresh."""


class Shape(NamedTuple):
    """What never changes of a commit's entry: its place in the graph (not its claims or open records)."""

    first: bytes
    """The first parent; empty for a root commit."""
    depth: int
    skip: bytes
    generation: int
    parents: tuple[bytes, ...]
    merges: bool


def _entry(oid: bytes, data: bytes | None) -> GraphEntry:
    """A commit's entry decoded from what is stored for it."""
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


def _shape(entry: GraphEntry) -> Shape:
    parents = entry.parents
    return Shape(
        parents[0] if parents else b"", entry.depth, entry.skip, entry.generation, parents, entry.merges
    )


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
        self._steps: dict[bytes, Shape] = {}
        """Per commit: its shape. A function of the commit graph alone, which never changes (a
        reindex, or an erasure's :meth:`set_claims`, rewrites claims and open records only), so
        it is kept across transactions: a commit's skip-pointer walk, and the ancestry checks of
        a history, read no entry twice (on PostgreSQL each is a round trip)."""

    def shape(self, txn: ReadTxn, oid: bytes) -> Shape:
        """The shape of a commit in the graph, read once per handle (as :meth:`entry` reads it).

        For a commit known to be in the reading snapshot (found there): a kept shape
        is not checked against it.

        Raises:
            CorruptObject: if the commit is missing from the index.
        """
        found = self._steps.get(oid)
        if found is None:
            entry = self.entry(txn, oid)
            found = _shape(entry)
            self._keep(oid, found)
        return found

    def _keep(self, oid: bytes, shape: Shape) -> None:
        if len(self._steps) >= SHAPES:
            self._steps.clear()
        self._steps[oid] = shape

    def entry(self, txn: ReadTxn, oid: bytes) -> GraphEntry:
        """The index entry of a commit.

        Raises:
            CorruptObject: if the commit is missing from the index.
        """
        return _entry(oid, txn.get(Space.INDEX, self.prefix + oid))

    def entries_of(self, txn: ReadTxn, oids: list[bytes]) -> list[GraphEntry]:
        """The index entries of ``oids``, in order, read at once (one round trip on PostgreSQL).

        Raises:
            CorruptObject: as :meth:`entry`.
        """
        found = txn.get_many(Space.INDEX, [self.prefix + oid for oid in oids])
        return [_entry(oid, data) for oid, data in zip(oids, found, strict=True)]

    def prefetch(self, txn: ReadTxn, oids: list[bytes]) -> None:
        """Keep the shapes of ``oids`` not kept yet, read at once (one round trip on PostgreSQL)."""
        wanted = [oid for oid in dict.fromkeys(oids) if oid not in self._steps]
        if len(wanted) < 2:
            return  # one is read as cheaply when it is needed
        for oid, data in zip(
            wanted, txn.get_many(Space.INDEX, [self.prefix + oid for oid in wanted]), strict=True
        ):
            if data is not None:
                try:
                    self._keep(oid, _shape(_decoder.decode(data)))
                except msgspec.DecodeError:
                    pass  # left for entry() to report when it is needed

    def has(self, txn: ReadTxn, oid: bytes) -> bool:
        """Whether the commit is indexed (so it and everything it reaches is stored)."""
        return txn.get(Space.INDEX, self.prefix + oid) is not None

    def indexed(self, txn: ReadTxn, oids: list[bytes]) -> set[bytes]:
        """Those of ``oids`` that are indexed, read at once (one round trip on PostgreSQL)."""
        found = txn.get_many(Space.INDEX, [self.prefix + oid for oid in oids])
        return {oid for oid, data in zip(oids, found, strict=True) if data is not None}

    def add(
        self,
        txn: WriteTxn,
        oid: bytes,
        parents: tuple[bytes, ...],
        claims: bytes = b"",
        open_records: tuple[bytes, ...] = (),
        parent_entries: list[GraphEntry] | None = None,
    ) -> GraphEntry:
        """Index a new commit whose parents are already indexed.

        ``parent_entries``: the parents' entries, in order, when the caller has just
        read them in this transaction (else they are read here).
        """
        entries = parent_entries if parent_entries is not None else [self.entry(txn, p) for p in parents]
        if entries:
            first = entries[0]
            depth = first.depth + 1
            generation = 1 + max(e.generation for e in entries)
            merges = len(parents) > 1 or any(e.merges for e in entries)
            # From the first parent's entry just read: first_parent_at would read it again.
            skip = self._first_parent_at(txn, parents[0], _shape(first), skip_depth(depth))
        else:
            depth, generation, merges, skip = 0, 1, False, b""
        entry = GraphEntry(parents, generation, depth, skip, merges, claims, open_records)
        txn.put(Space.INDEX, self.prefix + oid, _encoder.encode(entry))
        # Kept even if this transaction rolls back: the shape is what ``oid`` names, whenever it exists.
        self._keep(oid, _shape(entry))
        return entry

    def first_parent_at(self, txn: ReadTxn, oid: bytes, depth: int) -> bytes:
        """The first-parent ancestor of ``oid`` at ``depth`` (``oid`` itself at its own depth)."""
        entry = self.entry(txn, oid)  # read, not remembered: ``oid`` must be in this snapshot
        return self._first_parent_at(txn, oid, _shape(entry), depth)

    def _first_parent_at(self, txn: ReadTxn, oid: bytes, shape: Shape, depth: int) -> bytes:
        first, walk, skip = shape.first, shape.depth, shape.skip
        if depth > walk or depth < 0:
            raise ValueError("depth out of range")
        while walk > depth:
            jump = skip_depth(walk)
            jump_prev = skip_depth(walk - 1)
            if skip and (
                jump == depth or (jump > depth and not (jump_prev < jump - 2 and jump_prev >= depth))
            ):
                oid, walk = skip, jump
            else:
                oid, walk = first, walk - 1
            step = self.shape(txn, oid)
            first, skip = step.first, step.skip
        return oid

    def is_ancestor(self, txn: ReadTxn, ancestor: bytes, descendant: bytes) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant`` (a commit is its own ancestor).

        Both are commits found in the reading snapshot: their shapes are kept.
        """
        if ancestor == descendant:
            return True
        a = self.shape(txn, ancestor)
        d = self.shape(txn, descendant)
        if a.generation >= d.generation:
            return False
        if a.depth < d.depth and self._first_parent_at(txn, descendant, d, a.depth) == ancestor:
            return True
        if not d.merges:
            return False  # all of the descendant's history is its first-parent chain
        # Walk every parent, but never below the ancestor's generation.
        seen = {descendant}
        todo = [descendant]
        while todo:
            for parent in self.shape(txn, todo.pop()).parents:
                if parent == ancestor:
                    return True
                if parent in seen:
                    continue
                seen.add(parent)
                if self.shape(txn, parent).generation > a.generation:
                    todo.append(parent)
        return False

    def scan(self, txn: ReadTxn) -> list[tuple[bytes, GraphEntry]]:
        """Every commit with its entry, in no particular order (one range read).

        Raises:
            CorruptObject: if an entry is damaged.
        """
        size = len(self.prefix)
        found = []
        for key, data in txn.scan(Space.INDEX, self.prefix):
            try:
                found.append((key[size:], _decoder.decode(data)))
            except msgspec.DecodeError as exc:
                raise CorruptObject(
                    f"the commit graph entry of {key[size:].hex()} is damaged ({exc}); run 'mnemo reindex'"
                ) from None
        return found

    def commits(self, txn: ReadTxn) -> list[bytes]:
        """The id of every indexed commit, its entry not decoded (one range read)."""
        size = len(self.prefix)
        return [key[size:] for key, _ in txn.scan(Space.INDEX, self.prefix)]

    def set_claims(self, txn: WriteTxn, oid: bytes, entry: GraphEntry, claims: bytes) -> None:
        """Point a commit's entry (``entry``, as read) at another claim tree; its shape stays."""
        txn.put(
            Space.INDEX, self.prefix + oid, _encoder.encode(msgspec.structs.replace(entry, claims=claims))
        )

    def remove(self, txn: WriteTxn, oids: list[bytes]) -> None:
        """Drop the entries of commits gc collects.

        No kept commit may have one of ``oids`` as an ancestor: every kept entry
        depends on its ancestors alone, so it stays what a rebuild would give.
        """
        for oid in oids:
            txn.discard(Space.INDEX, self.prefix + oid)
            # Its shape would outlive it: a later read must find the commit missing.
            self._steps.pop(oid, None)

    def entries(self, txn: ReadTxn) -> dict[bytes, bytes]:
        """Every entry as stored (to compare with a rebuild)."""
        return entries(txn, Space.INDEX, self.prefix)

    def replace(self, txn: WriteTxn, rebuilt: dict[bytes, bytes]) -> None:
        """Replace every entry by ``rebuilt`` (as :meth:`entries` gives them): a rebuild."""
        self._steps.clear()  # a rebuild may be mending damaged entries
        replace_all(txn, Space.INDEX, self.prefix, rebuilt)
