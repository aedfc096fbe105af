"""Comparing two prolly trees: the changes between them, reading only chunks that differ."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain, compress
from operator import ne

from mnemosyne.model.objects import TreeChunk

Change = tuple[str, bytes | None, bytes | None]
"""``(key, old value, new value)``; None for absent."""


def _without(
    keys: Sequence[str], values: Sequence[bytes], shared: set[bytes]
) -> tuple[list[str], list[bytes]]:
    kept = [i for i, value in enumerate(values) if value not in shared]
    return [keys[i] for i in kept], [values[i] for i in kept]


def _entry_diff(
    keys_a: Sequence[str], values_a: Sequence[bytes], keys_b: Sequence[str], values_b: Sequence[bytes]
) -> list[Change]:
    """The changes between two runs of entries no entry of which is on both sides, in key order."""
    if len(keys_a) == 1 and len(keys_b) == 1 and keys_a[0] == keys_b[0]:
        return [(keys_a[0], values_a[0], values_b[0])]  # one value replaced: most commits
    old = dict(zip(keys_a, values_a, strict=True))
    new = dict(zip(keys_b, values_b, strict=True))
    return [(key, old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys())]


class TreeDiff:
    """The diff of prolly trees whose chunks come from ``load``.

    ``load_old``, when given, loads the chunks of the old tree (the first of a
    diff's two) instead. Each chunk a diff reads is read once, and only where the
    two trees differ: so a caller walking a history, diffing each commit with its
    parent, reads a chunk from ``load_old`` only where the next tree replaces it.
    """

    def __init__(
        self, load: Callable[[bytes], TreeChunk], load_old: Callable[[bytes], TreeChunk] | None = None
    ) -> None:
        self._load = load
        self._load_old = load if load_old is None else load_old

    def diff(self, a: bytes, b: bytes) -> Iterator[Change]:
        """Yield ``(key, old, new)`` for every key whose value differs, in key order.

        Chunks with equal hashes on both sides are skipped without being read;
        chunk boundaries depend only on keys, so unchanged regions line up.
        """
        if a == b:
            return
        chunk_a, chunk_b = self._load_old(a), self._load(b)
        # The roots differ, so their children are compared (a level down, where
        # _diff_level opens the taller tree's chunks until both sides are level).
        yield from self._diff_level(
            chunk_a.level - 1, chunk_a.keys, chunk_a.values, chunk_b.level - 1, chunk_b.keys, chunk_b.values
        )

    def _diff_level(
        self,
        level_a: int,
        keys_a: Sequence[str],
        values_a: Sequence[bytes],
        level_b: int,
        keys_b: Sequence[str],
        values_b: Sequence[bytes],
    ) -> Iterator[Change]:
        """The diff of two runs of items (chunks: last key and id; below level 0, entries).

        The runs cover the same keys. An item found on both sides holds the same
        entries on both (a node's hash names its id too): it is left out of both,
        wherever it sits. The rest is cut into windows that end where both sides
        have a chunk ending at the same key (boundaries depend only on keys), and each
        window's children are compared a level down; so only chunks that differ are
        read, and an entry is never compared with one outside its window.
        """
        while level_a > level_b:  # one tree is taller: open its chunks down to the other's level
            keys_a, values_a = self._children(values_a, self._load_old)
            level_a -= 1
        while level_b > level_a:
            keys_b, values_b = self._children(values_b, self._load)
            level_b -= 1
        if keys_a == keys_b:
            # The same keys (a commit that replaced values): an item on both sides sits at
            # the same place on both, as its hash names its key, so one pass finds the rest.
            differs = list(map(ne, values_a, values_b))
            if not all(differs):
                keys_a = keys_b = list(compress(keys_a, differs))
                values_a, values_b = list(compress(values_a, differs)), list(compress(values_b, differs))
        elif shared := set(values_a).intersection(values_b):
            keys_a, values_a = _without(keys_a, values_a, shared)
            keys_b, values_b = _without(keys_b, values_b, shared)
        if level_a < 0:
            yield from _entry_diff(keys_a, values_a, keys_b, values_b)
            return
        below = level_a - 1
        i = j = 0
        n, m = len(keys_a), len(keys_b)
        while i < n or j < m:
            start_i, start_j = i, j
            if i < n and j < m:
                i, j = i + 1, j + 1
                # Widen the window on the side that ends first until both end at one key;
                # a side that runs out (the tree's final chunk) takes the rest of the other.
                while keys_a[i - 1] != keys_b[j - 1]:
                    if keys_a[i - 1] < keys_b[j - 1]:
                        if i == n:
                            j = m
                            break
                        i += 1
                    else:
                        if j == m:
                            i = n
                            break
                        j += 1
            else:
                i, j = n, m
            yield from self._diff_level(
                below,
                *self._children(values_a[start_i:i], self._load_old),
                below,
                *self._children(values_b[start_j:j], self._load),
            )

    @staticmethod
    def _children(
        oids: Sequence[bytes], load: Callable[[bytes], TreeChunk]
    ) -> tuple[Sequence[str], Sequence[bytes]]:
        """The keys and values of the chunks ``oids``, one run (a lone chunk's own tuples)."""
        if len(oids) == 1:
            chunk = load(oids[0])
            return chunk.keys, chunk.values
        chunks = [load(oid) for oid in oids]
        return (
            tuple(chain.from_iterable(chunk.keys for chunk in chunks)),
            tuple(chain.from_iterable(chunk.values for chunk in chunks)),
        )
