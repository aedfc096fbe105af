"""The seal: the number of the transaction that wrote the tree a meta page points at.

LMDB's meta pages carry no checksum. A bit flipped in the newest one's root
pointer, or the older page's roots copied into it, makes LMDB read an older
tree as the latest while the transaction numbers still look right: the last
commit is silently gone, and the next one builds on the older state. So every
write transaction records its own number in the main database, the tree whose
root the meta page names (``SEAL_KEY``). Opening compares the two in one read
transaction: a meta page whose root leads to another transaction's tree (or to
no store at all) is damage, found before anything is written.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from mnemosyne.errors import CorruptObject

SEAL_KEY = b"\x00mnemosyne-seal"
"""The seal's key in LMDB's main database (whose other keys name the keyspaces).

It starts with a zero byte, which no keyspace name does."""

_SEAL = struct.Struct("<Q")
_KEYSPACE = b"meta"
"""A keyspace every store has: a store sealed by no transaction yet must list it."""


def seal(txn: Any) -> None:
    """Record ``txn``'s number in the main database: called last in every write transaction."""
    txn.put(SEAL_KEY, _SEAL.pack(txn.id()))


def broken_seal(txn: Any) -> str | None:
    """Why the tree ``txn`` reads was not written by the transaction its meta page names, or None.

    ``txn`` is a read transaction: its number is the one in the meta page it read.

    Raises:
        lmdb.Error: the main database cannot be read (damage too, reported by the caller).
    """
    number = txn.id()
    if number == 0:
        return None  # a new file: nothing committed yet
    value = txn.get(SEAL_KEY)
    if value is None:
        # Written before stores were sealed, or by LMDB's own tools: such a file's main
        # database lists its keyspaces; a root pointer gone astray leads elsewhere.
        if not has_keyspaces(txn):
            return f"its latest meta page (transaction {number}) leads to no keyspaces"
        return None
    if len(value) != _SEAL.size:
        return f"its latest meta page (transaction {number}) leads to a damaged seal"
    sealed = _SEAL.unpack(value)[0]
    if sealed != number:
        return (
            f"its latest meta page names transaction {number}, but the records it leads to "
            f"were written by transaction {sealed}"
        )
    return None


def has_keyspaces(txn: Any) -> bool:
    """Whether the main database ``txn`` reads lists the store's keyspaces."""
    return txn.get(_KEYSPACE) is not None


def suspect(directory: str, problem: str) -> CorruptObject:
    """The error for a store whose meta page and tree disagree: opened neither to read nor to write."""
    return CorruptObject(
        f"the store file {os.path.join(directory, 'data.mdb')} is damaged: {problem}, so its latest "
        "commits could be read as missing; nothing was written to it. Restore the store from a backup "
        "('mnemo import') or export what it still reads ('mnemo export --salvage'), and keep this file, "
        "which may still hold them"
    )
