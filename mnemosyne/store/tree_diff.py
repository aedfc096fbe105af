"""Comparing two prolly trees: the changes between them, reading only chunks that differ."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain

from mnemosyne.model.objects import TreeChunk

Change = tuple[str, bytes | None, bytes | None]
"""``(key, old value, new value)``; None for absent."""


def _last(chunk: TreeChunk) -> str:
    return chunk.keys[-1] if chunk.keys else ""


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
    """The diff of prolly trees whose chunks come from ``load``."""

    def __init__(self, load: Callable[[bytes], TreeChunk]) -> None:
        self._load = load

    def diff(self, a: bytes, b: bytes) -> Iterator[Change]:
        """Yield ``(key, old, new)`` for every key whose value differs, in key order.

        Chunks with equal hashes on both sides are skipped without being read;
        chunk boundaries depend only on keys, so unchanged regions line up.
        """
        if a == b:
            return
        chunk_a, chunk_b = self._load(a), self._load(b)
        yield from self._diff_level(
            chunk_a.level, (_last(chunk_a),), (a,), chunk_b.level, (_last(chunk_b),), (b,)
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
            keys_a, values_a = self._children(values_a)
            level_a -= 1
        while level_b > level_a:
            keys_b, values_b = self._children(values_b)
            level_b -= 1
        shared = set(values_a).intersection(values_b)
        if shared:
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
                *self._children(values_a[start_i:i]),
                below,
                *self._children(values_b[start_j:j]),
            )

    def _children(self, oids: Sequence[bytes]) -> tuple[Sequence[str], Sequence[bytes]]:
        """The keys and values of the chunks ``oids``, one run (a lone chunk's own tuples)."""
        if len(oids) == 1:
            chunk = self._load(oids[0])
            return chunk.keys, chunk.values
        chunks = [self._load(oid) for oid in oids]
        return (
            tuple(chain.from_iterable(chunk.keys for chunk in chunks)),
            tuple(chain.from_iterable(chunk.values for chunk in chunks)),
        )
