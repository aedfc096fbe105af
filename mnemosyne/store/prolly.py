"""Prolly trees: a sorted map from node id to node hash, stored as hashed chunks.

A key ends a chunk at level L when a seeded hash of the key alone (a different
seed per level) falls under a threshold, so chunk boundaries, and with them every
chunk and the root hash, depend only on the set of entries, never on the order of
edits (history independence). A commit that changes k of n entries rewrites only
the chunks on those k paths, O(k·log n); a diff descends only into chunks whose
hashes differ.

Level 0 chunks hold ``(id, node hash)``; a chunk above holds ``(last key of child,
child hash)``. The root is the lowest level that fits in one chunk; the empty
tree is one empty leaf.

Where chunks end lives in :mod:`~mnemosyne.store.tree_chunking`, comparing two
trees in :mod:`~mnemosyne.store.tree_diff` (a part :class:`Tree` holds).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter

from mnemosyne.model import codec
from mnemosyne.model.objects import TreeChunk
from mnemosyne.store.tree_chunking import chunk_entries, is_boundary
from mnemosyne.store.tree_diff import Change, TreeDiff

EMPTY = TreeChunk(0, (), ())
"""The empty tree: one empty leaf."""
EMPTY_ID = codec.object_id(codec.encode(EMPTY))
"""The id of :data:`EMPTY`."""

Load = Callable[[bytes], TreeChunk]
Store = Callable[[TreeChunk], bytes]
Fetch = Callable[[list[bytes]], None]
"""Makes chunks loadable without a round trip each: reads those not at hand, all at once."""
Edit = tuple[str, bytes | None]
"""``(key, new value)``; a value of None deletes the key."""


def _merge(
    chunk: TreeChunk,
    final: bool,
    edits: Sequence[Edit],
    changes: list[Change] | None,
    out_keys: list[str],
    out_values: list[bytes],
    out_known: list[bool | None],
) -> None:
    """Append a chunk's entries with sorted edits applied; record real changes when asked.

    Entries kept from the chunk have known boundary flags: only its last key is a
    boundary, unless the chunk is the ``final`` one of its level.
    """
    keys = chunk.keys
    values = chunk.values
    n = len(keys)
    if n == 0:
        # An empty tree (a first commit, an import): every edit that puts is new.
        added = [(key, value) for key, value in edits if value is not None]
        out_keys.extend([key for key, _ in added])
        out_values.extend([value for _, value in added])
        out_known.extend([None] * len(added))
        if changes is not None:
            changes.extend([(key, None, value) for key, value in added])
        return
    last_flag: bool | None = None if final else True
    i = 0
    for key, value in edits:
        j = bisect.bisect_left(keys, key, i)
        if j > i:
            out_keys.extend(keys[i:j])
            out_values.extend(values[i:j])
            out_known.extend([False] * (j - i))
            if j == n:
                out_known[-1] = last_flag
        i = j
        old = None
        if i < n and keys[i] == key:
            old = values[i]
            i += 1
        if value is not None:
            out_keys.append(key)
            out_values.append(value)
            out_known.append(None)
        if changes is not None and old != value:
            changes.append((key, old, value))
    if i < n:
        out_keys.extend(keys[i:])
        out_values.extend(values[i:])
        out_known.extend([False] * (n - i))
        out_known[-1] = last_flag


_edit_key = itemgetter(0)
"""An edit's key, for ``bisect``: in C, not a Python call per probe."""


class _Plan:
    """Chunks to rewrite in place: an inner ``chunk`` with edited ``children``, or a new ``leaf``."""

    __slots__ = ("children", "chunk", "leaf")

    def __init__(
        self, chunk: TreeChunk | None, leaf: TreeChunk | None, children: list[tuple[int, _Plan]]
    ) -> None:
        self.chunk = chunk
        self.leaf = leaf
        self.children = children


class Tree:
    """Operations on prolly trees whose chunks come from ``load`` and go to ``store``.

    ``fetch``, when given, is told which chunks an update is about to load, a level
    at a time: on a backend where each read is a round trip (PostgreSQL), an update
    of k keys then costs one round trip per level for the chunks not cached,
    rather than one per chunk.
    """

    def __init__(self, load: Load, store: Store | None = None, fetch: Fetch | None = None) -> None:
        self._load = load
        # Bound once: each chunk a commit writes then costs no call through a checking method.
        self._put: Store = store if store is not None else self._no_store
        self._fetch = fetch
        self._diff = TreeDiff(load)

    def get(self, root: bytes, key: str) -> bytes | None:
        """Return the value at ``key``, or None."""
        chunk = self._load(root)
        while chunk.level:
            i = bisect.bisect_left(chunk.keys, key)
            if i == len(chunk.keys):
                return None
            chunk = self._load(chunk.values[i])
        i = bisect.bisect_left(chunk.keys, key)
        if i < len(chunk.keys) and chunk.keys[i] == key:
            return chunk.values[i]
        return None

    def items(self, root: bytes, prefix: str = "", start: str = "") -> Iterator[tuple[str, bytes]]:
        """Yield ``(key, value)`` in key order, from ``start``, for keys with ``prefix``."""
        begin = max(prefix, start)
        for key, value in self._walk(root, begin):
            if not key.startswith(prefix):
                return
            yield key, value

    def _walk(self, oid: bytes, begin: str) -> Iterator[tuple[str, bytes]]:
        chunk = self._load(oid)
        i = bisect.bisect_left(chunk.keys, begin) if begin else 0
        if chunk.level == 0:
            yield from zip(chunk.keys[i:], chunk.values[i:], strict=True)
            return
        for j in range(i, len(chunk.keys)):
            yield from self._walk(chunk.values[j], begin if j == i else "")

    def items_reverse(
        self, root: bytes, prefix: str = "", last: str | None = None
    ) -> Iterator[tuple[str, bytes]]:
        """Yield ``(key, value)`` in descending key order, from ``last`` down, for keys with ``prefix``."""
        for key, value in self._walk_reverse(root, last):
            if not key.startswith(prefix):
                if key < prefix:
                    return
                continue
            yield key, value

    def _walk_reverse(self, oid: bytes, bound: str | None) -> Iterator[tuple[str, bytes]]:
        chunk = self._load(oid)
        keys = chunk.keys
        if chunk.level == 0:
            i = len(keys) - 1 if bound is None else bisect.bisect_right(keys, bound) - 1
            for j in range(i, -1, -1):
                yield keys[j], chunk.values[j]
            return
        i = len(keys) - 1
        inner = None
        if bound is not None:
            k = bisect.bisect_left(keys, bound)
            if k < len(keys):
                i, inner = k, bound
        for j in range(i, -1, -1):
            yield from self._walk_reverse(chunk.values[j], inner if j == i else None)

    def count(self, root: bytes) -> int:
        """Number of entries (walks every leaf)."""
        chunk = self._load(root)
        if chunk.level == 0:
            return len(chunk.keys)
        return sum(self.count(child) for child in chunk.values)

    # -- writing -----------------------------------------------------------

    def update(self, root: bytes, edits: Sequence[Edit]) -> tuple[bytes, list[Change]]:
        """Apply edits (sorted by key, keys unique) and return the new root and the changes.

        Changes leave out edits that change nothing (the same value again, or the
        deletion of an absent key).
        """
        changes: list[Change] = []
        if not edits:
            return root, changes
        top_chunk = self._load(root)
        if not top_chunk.keys:
            return self._fill(edits)  # only the empty tree has a chunk without keys
        if self._fetch is not None and len(edits) > 1:
            self._prefetch(root, [key for key, _ in edits])
        plan = self._plan(top_chunk, edits, changes)
        if plan is not None:
            # No chunk boundary moves: rewrite the edited paths in place.
            patched = self._patch(plan)
            return (root if patched is None else patched), changes
        changes.clear()
        top = top_chunk.level
        level = 0
        level_edits: Sequence[Edit] = edits
        while True:
            old, new = self._rewrite_level(root, level, level_edits, changes if level == 0 else None)
            if level == top:
                return self._finish(level, new), changes
            next_edits: dict[str, bytes | None] = {key: None for key, _ in old}
            for key, oid in new:
                next_edits[key] = oid
            for key, oid in old:
                if next_edits.get(key) == oid:
                    del next_edits[key]
            if not next_edits:
                return root, changes
            level_edits = sorted(next_edits.items())
            level += 1

    def _fill(self, edits: Sequence[Edit]) -> tuple[bytes, list[Change]]:
        """:meth:`update` of the empty tree (a first commit, an import): every put is new.

        The tree :meth:`_rewrite_level` and :meth:`_finish` would build, chunk for chunk,
        without merging the edits into an empty leaf entry by entry.
        """
        keys = list(map(itemgetter(0), edits))
        values = list(map(itemgetter(1), edits))
        if None in values:  # deleting a key that is not there changes nothing
            kept = [i for i, value in enumerate(values) if value is not None]
            keys = [keys[i] for i in kept]
            values = [values[i] for i in kept]
        changes: list[Change] = list(zip(keys, repeat(None), values))
        put = self._put
        leaves = [(chunk.keys[-1], put(chunk)) for chunk in chunk_entries(0, keys, values)]
        return self._finish(0, leaves), changes

    def _prefetch(self, root: bytes, keys: list[str]) -> None:
        """Fetch, a level at a time, the chunks on the paths to ``keys`` (sorted)."""
        assert self._fetch is not None
        level: list[tuple[bytes, list[str]]] = [(root, keys)]
        while level:
            self._fetch([oid for oid, _ in level])
            below: dict[bytes, list[str]] = {}
            for oid, routed in level:
                chunk = self._load(oid)
                if not chunk.level or not chunk.keys:
                    continue
                last = len(chunk.keys) - 1
                for key in routed:
                    # Past the last key: the last child, which a growing final chunk rewrites.
                    child = chunk.values[min(bisect.bisect_left(chunk.keys, key), last)]
                    below.setdefault(child, []).append(key)
            level = list(below.items())

    def _plan(self, chunk: TreeChunk, edits: Sequence[Edit], changes: list[Change]) -> _Plan | None:
        """Plan edits that leave every chunk boundary where it is, or return None.

        That holds when each edit changes a value, deletes a key that does not end
        its chunk, or inserts a key inside a chunk (before its last key) that is not
        a boundary: the last key of every chunk, and so every level above, stays.
        Most commits are like that (new versions of known ids, or new ids in the
        middle of a chunk), and a plan spares re-cutting and re-hashing keys.
        """
        keys = chunk.keys
        if not keys:
            return None
        if chunk.level:
            children: list[tuple[int, _Plan]] = []
            last = len(keys) - 1
            start = 0
            n = len(edits)
            while start < n:
                i = bisect.bisect_left(keys, edits[start][0])
                if i > last:
                    return None  # past the tree's last key: the final chunk grows
                end = bisect.bisect_right(edits, keys[i], start, n, key=_edit_key)
                sub = self._plan(self._load(chunk.values[i]), edits[start:end], changes)
                if sub is None:
                    return None
                if sub.leaf is not None or sub.children:
                    children.append((i, sub))
                start = end
            return _Plan(chunk, None, children)
        last_key = keys[-1]
        new_keys: list[str] | None = None
        new_values = list(chunk.values)
        touched = False
        for key, value in edits:
            current: Sequence[str] = new_keys if new_keys is not None else keys
            i = bisect.bisect_left(current, key)
            present = i < len(current) and current[i] == key
            if present:
                old = new_values[i]
                if value is None:
                    if key == last_key:
                        return None  # the chunk would end elsewhere
                    if new_keys is None:
                        new_keys = list(keys)
                    del new_keys[i]
                    del new_values[i]
                elif value != old:
                    new_values[i] = value
                else:
                    continue
                changes.append((key, old, value))
                touched = True
            elif value is not None:
                if key > last_key or is_boundary(key, 0):
                    return None  # a new boundary, or past the end of the final chunk
                if new_keys is None:
                    new_keys = list(keys)
                new_keys.insert(i, key)
                new_values.insert(i, value)
                changes.append((key, None, value))
                touched = True
        if not touched:
            return _Plan(None, None, [])
        return _Plan(
            None, TreeChunk(0, tuple(new_keys) if new_keys is not None else keys, tuple(new_values)), []
        )

    def _patch(self, plan: _Plan) -> bytes | None:
        """Store the chunks a plan rewrites, bottom up; return the new id (None: unchanged)."""
        if plan.leaf is not None:
            return self._put(plan.leaf)
        if plan.chunk is None or not plan.children:
            return None
        values = list(plan.chunk.values)
        changed = False
        for i, sub in plan.children:
            oid = self._patch(sub)
            if oid is not None:
                values[i] = oid
                changed = True
        if not changed:
            return None
        return self._put(TreeChunk(plan.chunk.level, plan.chunk.keys, tuple(values)))

    def build(self, keys: Sequence[str], values: Sequence[bytes]) -> bytes:
        """Build a tree from sorted, unique entries."""
        return self.update(self._put(EMPTY), list(zip(keys, values, strict=True)))[0]

    @staticmethod
    def _no_store(chunk: TreeChunk) -> bytes:
        raise TypeError("this Tree was opened without a store")

    def _finish(self, level: int, chunks: list[tuple[str, bytes]]) -> bytes:
        """Stack levels over ``chunks`` until one chunk remains; that is the root."""
        if not chunks:
            return self._put(EMPTY)
        while len(chunks) > 1:
            level += 1
            keys = [key for key, _ in chunks]
            oids = [oid for _, oid in chunks]
            chunks = [(c.keys[-1], self._put(c)) for c in chunk_entries(level, keys, oids)]
        root = chunks[0][1]
        chunk = self._load(root)
        while chunk.level and len(chunk.keys) == 1:
            # A level with one child adds nothing: the canonical root is the child.
            root = chunk.values[0]
            chunk = self._load(root)
        return root

    def _locate(self, root: bytes, level: int, key: str, after: bool) -> tuple[bytes, TreeChunk, bool] | None:
        """Find the chunk at ``level`` holding ``key``, and whether it is the level's last.

        With ``after``, the first chunk whose last key is greater than ``key``
        (None when there is none); otherwise the first whose last key is at least
        ``key``, or the last chunk.
        """
        load = self._load
        oid = root
        chunk = load(root)
        final = True
        while True:
            if chunk.level == level:
                if after and (not chunk.keys or chunk.keys[-1] <= key):
                    return None  # only possible at the root: a single chunk
                return oid, chunk, final
            keys = chunk.keys
            i = bisect.bisect_right(keys, key) if after else bisect.bisect_left(keys, key)
            last = len(keys) - 1
            if i > last:
                if after:
                    return None
                i = last
            final = final and i == last
            oid = chunk.values[i]
            chunk = load(oid)

    def _rewrite_level(
        self,
        root: bytes,
        level: int,
        edits: Sequence[Edit],
        changes: list[Change] | None,
    ) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        """Apply edits to the entries at ``level``.

        Returns the chunks replaced and the chunks written, each as
        ``(last key, chunk id)``.
        """
        replaced: list[tuple[str, bytes]] = []
        written: list[tuple[str, bytes]] = []
        i = 0
        n = len(edits)
        while i < n:
            found = self._locate(root, level, edits[i][0], after=False)
            assert found is not None
            oid, chunk, final = found
            keys: list[str] = []
            values: list[bytes] = []
            known: list[bool | None] = []
            while True:
                # Take in this chunk and the edits that fall in it; keep going while the
                # region does not end on a boundary key, since the next chunk then
                # continues it.
                j = n
                if chunk.keys:
                    last_key = chunk.keys[-1]
                    replaced.append((last_key, oid))
                    if not final:
                        j = bisect.bisect_right(edits, last_key, i, n, key=_edit_key)
                _merge(chunk, final, edits[i:j], changes, keys, values, known)
                i = j
                if not keys or final:
                    break
                if known[-1] is None:
                    known[-1] = is_boundary(keys[-1], level)
                if known[-1]:
                    break
                following = self._locate(root, level, chunk.keys[-1], after=True)
                assert following is not None
                oid, chunk, final = following
            for new in chunk_entries(level, keys, values, known):
                written.append((new.keys[-1], self._put(new)))
        return replaced, written

    # -- comparing ---------------------------------------------------------

    def diff(self, a: bytes, b: bytes) -> Iterator[Change]:
        """Yield ``(key, old, new)`` for every key whose value differs, in key order (:class:`TreeDiff`)."""
        return self._diff.diff(a, b)
