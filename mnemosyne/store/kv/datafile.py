"""A sanity check of an LMDB data file before it is memory-mapped.

LMDB trusts its file: a ``data.mdb`` cut short (a failed copy, a full disk
during a backup) still has meta pages naming pages past its end, and touching
those through the memory map kills the process with ``SIGBUS`` - no exception,
no message. Reading the two meta pages first turns that into a
:class:`CorruptObject` that says what is wrong.
"""

from __future__ import annotations

import os
import struct

from mnemosyne.errors import CorruptObject, NotFound

DATA_FILE = "data.mdb"

_MAGIC = 0xBEEFC0DE
_PAGE_HEADER = 16  # mp_pgno, mp_pad, mp_flags, mp_lower, mp_upper
_PSIZE_AT = _PAGE_HEADER + 24  # mm_dbs[FREE_DBI].md_pad holds the page size
_LAST_PAGE_AT = _PAGE_HEADER + 120  # mm_last_pg, then mm_txnid
_META = struct.Struct("=II")
_PSIZE = struct.Struct("=I")
_LAST = struct.Struct("=QQ")


def _read_at(handle: int, offset: int, size: int) -> bytes:
    return os.pread(handle, size, offset)


def _needed_size(path: str) -> int | None:
    """The bytes the newest meta page says the file holds; None if not an LMDB file."""
    handle = os.open(path, os.O_RDONLY)
    try:
        first = _read_at(handle, 0, _LAST_PAGE_AT + _LAST.size)
        if len(first) < _LAST_PAGE_AT + _LAST.size or _META.unpack_from(first, _PAGE_HEADER)[0] != _MAGIC:
            return None
        psize = _PSIZE.unpack_from(first, _PSIZE_AT)[0]
        if psize < 512 or psize > 1 << 16 or psize & (psize - 1):
            return None
        second = _read_at(handle, psize, _LAST_PAGE_AT + _LAST.size)
        if len(second) < _LAST_PAGE_AT + _LAST.size or _META.unpack_from(second, _PAGE_HEADER)[0] != _MAGIC:
            return None
        metas: list[tuple[int, int]] = [_LAST.unpack_from(page, _LAST_PAGE_AT) for page in (first, second)]
        last_page, _ = max(metas, key=lambda meta: meta[1])  # LMDB uses the newer meta
        return (last_page + 1) * int(psize)
    finally:
        os.close(handle)


def is_lmdb_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts like an LMDB data file (its first meta page)."""
    try:
        with open(path, "rb") as handle:
            first = handle.read(_PAGE_HEADER + _META.size)
    except OSError:
        return False
    return len(first) == _PAGE_HEADER + _META.size and _META.unpack_from(first, _PAGE_HEADER)[0] == _MAGIC


def check_data_file(directory: str) -> None:
    """Refuse a ``data.mdb`` that is empty, not an LMDB file, or shorter than its meta says.

    Meta pages are read before the file size, so a writer extending the file
    meanwhile can only make the file look longer, never truncated.

    Raises:
        NotFound: ``data.mdb`` is missing or empty (no store was ever written there).
        CorruptObject: it is not an LMDB file, or it is truncated.
    """
    path = os.path.join(directory, DATA_FILE)
    for attempt in range(3):
        try:
            if os.path.getsize(path) == 0:
                raise NotFound(f"no store at {directory}: its {DATA_FILE} is empty")
            needed = _needed_size(path)
            size = os.path.getsize(path)
        except FileNotFoundError:
            raise NotFound(f"no store at {directory}") from None
        except OSError as exc:
            raise CorruptObject(f"cannot read the store's data file {path}: {exc.strerror or exc}") from None
        if needed is None:
            raise CorruptObject(
                f"the store file {path} is damaged or is not a Mnemosyne store (its header is not LMDB's); "
                "restore it from a backup ('mnemo import')"
            )
        if size >= needed:
            return
        if attempt < 2:
            continue  # a meta page read while it was being rewritten: look again
        raise CorruptObject(
            f"the store's data file {path} is truncated: {size} bytes of the {needed} it needs "
            "(restore it from a copy; opening it would crash)"
        )
