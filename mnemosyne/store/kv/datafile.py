"""A sanity check of an LMDB data file before it is memory-mapped.

LMDB trusts its file: a ``data.mdb`` cut short (a failed copy, a full disk
during a backup) still has meta pages naming pages past its end, and touching
those through the memory map kills the process with ``SIGBUS`` - no exception,
no message. Reading the two meta pages first turns that into a
:class:`CorruptObject` that says what is wrong.

Meta pages carry no checksum either: a bit flipped in the newer one's
transaction number makes LMDB take the older one for the latest, and the last
commit is silently gone. The two pages, and the free-page lists they lead to,
are compared for what a healthy file always shows (see :func:`_disagreement`).
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from mnemosyne.errors import CorruptObject, NotFound

DATA_FILE = "data.mdb"

_MAGIC = 0xBEEFC0DE
_DATA_VERSION = 1  # LMDB 0.9's layout, the one the offsets below describe
_PAGE_HEADER = 16  # mp_pgno, mp_pad, mp_flags, mp_lower, mp_upper
_PSIZE_AT = _PAGE_HEADER + 24  # mm_dbs[FREE_DBI].md_pad holds the page size
_FREE_ROOT_AT = _PAGE_HEADER + 64  # mm_dbs[FREE_DBI].md_root
_LAST_PAGE_AT = _PAGE_HEADER + 120  # mm_last_pg, then mm_txnid
_META_BYTES = _LAST_PAGE_AT + 16
_META = struct.Struct("=II")
_PSIZE = struct.Struct("=I")
_LAST = struct.Struct("=QQ")
_PGNO = struct.Struct("=Q")
_PAGE = struct.Struct("=QHHH")  # mp_pgno, mp_pad, mp_flags, mp_lower
_INDEX = struct.Struct("=H")
_NODE = struct.Struct("=HHHH")  # mn_lo, mn_hi, mn_flags, mn_ksize; the key follows
_NO_PAGE = (1 << 64) - 1  # P_INVALID: an empty tree's root
_BRANCH, _LEAF = 0x01, 0x02
_MAX_DEPTH = 32


class _Meta(NamedTuple):
    """What the store check reads of one meta page."""

    version: int
    last_page: int
    txnid: int
    free_root: int


class _Unreadable(Exception):
    """A page of the free-page list is not what its meta page says it is."""


def _read_at(handle: int, offset: int, size: int) -> bytes:
    return os.pread(handle, size, offset)


def _read_metas(handle: int) -> tuple[int, _Meta, _Meta] | None:
    """The page size and both meta pages; None if the file does not start like an LMDB file."""
    first = _read_at(handle, 0, _META_BYTES)
    if len(first) < _META_BYTES or _META.unpack_from(first, _PAGE_HEADER)[0] != _MAGIC:
        return None
    psize = _PSIZE.unpack_from(first, _PSIZE_AT)[0]
    if psize < 512 or psize > 1 << 16 or psize & (psize - 1):
        return None
    second = _read_at(handle, psize, _META_BYTES)
    if len(second) < _META_BYTES or _META.unpack_from(second, _PAGE_HEADER)[0] != _MAGIC:
        return None
    metas = [
        _Meta(
            version=_META.unpack_from(page, _PAGE_HEADER)[1],
            last_page=_LAST.unpack_from(page, _LAST_PAGE_AT)[0],
            txnid=_LAST.unpack_from(page, _LAST_PAGE_AT)[1],
            free_root=_PGNO.unpack_from(page, _FREE_ROOT_AT)[0],
        )
        for page in (first, second)
    ]
    return int(psize), metas[0], metas[1]


def _newest_freed(handle: int, psize: int, meta: _Meta) -> int:
    """The last transaction that freed pages, by ``meta``'s free-page list (-1: the list is empty).

    The list (LMDB's free database) is keyed by the transaction that freed the
    pages: its last key, found down the right edge of its tree, a page a level.

    Raises:
        _Unreadable: a page on the way is outside the file or not a page of a tree.
    """
    number = meta.free_root
    for _ in range(_MAX_DEPTH):
        if number == _NO_PAGE:
            return -1
        if number < 2 or number > meta.last_page:
            raise _Unreadable(f"page {number} lies outside the file")
        page = _read_at(handle, number * psize, psize)
        if len(page) < psize:
            raise _Unreadable(f"page {number} lies past the end of the file")
        written, _, flags, lower = _PAGE.unpack_from(page)
        count = (lower - _PAGE_HEADER) // 2
        if written != number or count < 1 or lower > psize:
            raise _Unreadable(f"page {number} is not a page of the list")
        at = _INDEX.unpack_from(page, _PAGE_HEADER + 2 * (count - 1))[0]
        if at < lower or at + _NODE.size + _PGNO.size > psize:
            raise _Unreadable(f"page {number} is not a page of the list")
        low, high, top, key_size = _NODE.unpack_from(page, at)
        if flags & _BRANCH:
            number = low | high << 16 | top << 32  # the child's page number, in three parts
        elif flags & _LEAF and key_size == _PGNO.size:
            return int(_PGNO.unpack_from(page, at + _NODE.size)[0])
        else:
            raise _Unreadable(f"page {number} is not a page of the list")
    raise _Unreadable("the list is deeper than any LMDB tree")


def _disagreement(handle: int, psize: int, first: _Meta, second: _Meta) -> str | None:
    """Why the two meta pages cannot both be LMDB's own, or None when they can.

    LMDB writes each commit's meta page over the older of the two (transaction
    ``t`` into page ``t % 2``), so a healthy file holds consecutive transaction
    numbers (both 0 before its first commit). Each commit records the pages it
    frees under its own number in the free-page list, and the next commit cannot
    reuse them; so no meta page names a transaction older than one its list
    records, and the newer one's list reaches at least as far as the older's.
    A bit flipped in a transaction number breaks one of these, where LMDB would
    quietly read an older commit as the latest.
    """
    if first.version != _DATA_VERSION or second.version != _DATA_VERSION:
        return None  # another LMDB layout: nothing to compare with
    older, newer = sorted((first, second), key=lambda meta: meta.txnid)
    if newer.txnid != older.txnid + 1 and newer.txnid != 0:
        return f"name transactions {first.txnid} and {second.txnid}, which are not consecutive"
    try:
        freed = [_newest_freed(handle, psize, meta) for meta in (older, newer)]
    except _Unreadable as exc:
        return f"lead to a damaged list of free pages ({exc})"
    for meta, last in zip((older, newer), freed, strict=True):
        if last > meta.txnid:
            return f"disagree: one names transaction {meta.txnid} yet lists pages freed by {last}"
    if freed[1] < freed[0]:
        return (
            f"disagree: the newer (transaction {newer.txnid}) lists pages freed up to transaction "
            f"{freed[1]}, the older up to transaction {freed[0]}"
        )
    return None


def is_lmdb_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts like an LMDB data file (its first meta page)."""
    try:
        with open(path, "rb") as handle:
            first = handle.read(_PAGE_HEADER + _META.size)
    except OSError:
        return False
    return len(first) == _PAGE_HEADER + _META.size and _META.unpack_from(first, _PAGE_HEADER)[0] == _MAGIC


def check_data_file(directory: str, *, salvage: bool = False) -> None:
    """Refuse a ``data.mdb`` that is empty, not an LMDB file, truncated, or whose meta pages disagree.

    Meta pages are read before the file size, so a writer extending the file
    meanwhile can only make the file look longer, never truncated. A writer
    committing meanwhile changes a meta page (and may reuse pages the walk
    reads): a finding stands only when both meta pages read the same again
    after it, else the file is looked at again.

    With ``salvage``, meta pages that disagree are let through (LMDB reads the
    state the newer one leads to): only what would crash the process is refused.

    Raises:
        NotFound: ``data.mdb`` is missing or empty (no store was ever written there).
        CorruptObject: it is not an LMDB file, it is truncated, or its meta pages
            disagree (see :func:`_disagreement`).
    """
    path = os.path.join(directory, DATA_FILE)
    try:
        if os.path.getsize(path) == 0:
            raise NotFound(f"no store at {directory}: its {DATA_FILE} is empty")
        handle = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound(f"no store at {directory}") from None
    except OSError as exc:
        raise CorruptObject(f"cannot read the store's data file {path}: {exc.strerror or exc}") from None
    try:
        _check_open_file(handle, path, salvage)
    except OSError as exc:
        raise CorruptObject(f"cannot read the store's data file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(handle)


def _check_open_file(handle: int, path: str, salvage: bool) -> None:
    for _ in range(3):
        found = _read_metas(handle)
        if found is None:
            raise CorruptObject(
                f"the store file {path} is damaged or is not a Mnemosyne store (its header is not LMDB's); "
                "restore it from a backup ('mnemo import')"
            )
        psize, first, second = found
        newer = max(first, second, key=lambda meta: meta.txnid)  # the one LMDB uses
        needed = (newer.last_page + 1) * psize
        size = os.fstat(handle).st_size
        problem: CorruptObject | None = None
        if size < needed:
            problem = CorruptObject(
                f"the store's data file {path} is truncated: {size} bytes of the {needed} it needs "
                "(restore it from a copy; opening it would crash)"
            )
        elif not salvage:
            disagreement = _disagreement(handle, psize, first, second)
            if disagreement is not None:
                problem = CorruptObject(
                    f"the store file {path} is damaged: its two meta pages (where LMDB records the "
                    f"latest commit) {disagreement}, so the latest commits could be read as missing; "
                    "restore the store from a backup ('mnemo import') or export what it still reads "
                    "('mnemo export --salvage'), and keep this file, which may still hold them"
                )
        if problem is None:
            return
        if _read_metas(handle) == found:
            raise problem
        # A writer committed meanwhile (or a meta page was read half-written): look again.
    # Committed to on every look: a live store that LMDB keeps writing, not a damaged one.
