"""Where a prolly tree's chunks end, and cutting sorted entries into chunks.

A key ends a chunk at level L when a seeded hash of the key alone (a different
seed per level) falls under a threshold, so chunk boundaries depend only on the
set of entries, never on the order of edits (history independence).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING

from mnemosyne.model.objects import TreeChunk

if TYPE_CHECKING:
    import hashlib

AVERAGE_CHUNK = 24
"""Average entries per chunk; boundaries are random, so sizes vary around it."""

_THRESHOLD = (1 << 64) // AVERAGE_CHUNK
_SALTS = [f"mnemo-tree-{level}".encode().ljust(16, b".")[:16] for level in range(64)]


@cache
def _hashers() -> list[hashlib.blake2b]:
    """Seeded hashers per level; copying one is cheaper than setting up a new one."""
    # Made on first use: importing hashlib loads OpenSSL (milliseconds), and a process that
    # only reads a store never cuts a chunk.
    import hashlib

    return [hashlib.blake2b(digest_size=8, salt=salt) for salt in _SALTS]


_TOP = _THRESHOLD >> 56
"""The threshold's most significant byte: a digest whose last byte (little-endian) is above it
is no boundary, which settles all but about one key in 23 without making an integer."""


def is_boundary(key: str, level: int) -> bool:
    """Whether ``key`` ends a chunk at ``level``."""
    hasher = _hashers()[level].copy()
    hasher.update(key.encode())
    digest = hasher.digest()
    return digest[7] <= _TOP and int.from_bytes(digest, "little") < _THRESHOLD


def boundaries(keys: Iterable[str], level: int) -> list[int]:
    """The positions in ``keys`` of those that end a chunk at ``level`` (:func:`is_boundary`, in one loop)."""
    copy = _hashers()[level].copy
    top, threshold = _TOP, _THRESHOLD
    ends = []
    for i, key in enumerate(keys):
        hasher = copy()
        hasher.update(key.encode())
        digest = hasher.digest()
        if digest[7] <= top and int.from_bytes(digest, "little") < threshold:
            ends.append(i)
    return ends


def chunk_entries(
    level: int,
    keys: Sequence[str],
    values: Sequence[bytes],
    known: Sequence[bool | None] | None = None,
) -> list[TreeChunk]:
    """Cut sorted entries into chunks at boundary keys; the last chunk ends at the end.

    ``known`` may give, per entry, whether it is a boundary (None: work it out);
    entries taken from existing chunks are known, which spares rehashing them.
    """
    if known is None:
        ends = boundaries(keys, level)
    else:
        ends = [i for i, flag in enumerate(known) if flag or (flag is None and is_boundary(keys[i], level))]
    # Tuples, so that each chunk's slice is its tuple (no list in between).
    keys, values = tuple(keys), tuple(values)
    chunks: list[TreeChunk] = []
    start = 0
    for i in ends:
        end = i + 1
        chunks.append(TreeChunk(level, keys[start:end], values[start:end]))
        start = end
    if start < len(keys):
        chunks.append(TreeChunk(level, keys[start:], values[start:]))
    return chunks
