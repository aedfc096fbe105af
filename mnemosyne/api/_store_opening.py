"""Opening a store's backend: a new one made, or an existing one checked, for :class:`Store`.

:meth:`Store.init <mnemosyne.api.store.Store.init>` and
:meth:`Store.open <mnemosyne.api.store.Store.open>` hand their location here and
get back the open backend, where it is and how messages name it; the store
itself (its index cache, its handles) stays theirs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Literal

from mnemosyne.api.locations import Location, open_postgres, postgres_url, store_path
from mnemosyne.errors import InvalidInput, NotFound, StorageFull
from mnemosyne.store import tenancy
from mnemosyne.store.kv.base import KV, WriteTxn
from mnemosyne.store.kv.datafile import DATA_FILE, is_lmdb_file
from mnemosyne.store.kv.lmdb_kv import LmdbKV, discard_new_store

Opened = tuple[KV, Path | None, str | None]
"""The backend, the store directory (None for PostgreSQL) and the URL messages show (None for a directory)."""


def create(location: Location, *, map_size: int, max_map_size: int, sync: bool) -> Opened:
    """A new store at ``location`` (see :meth:`Store.init <mnemosyne.api.store.Store.init>`).

    Raises:
        InvalidInput: a store, or anything else, is already there.
        NotFound: a PostgreSQL server that cannot be reached, or has no such database.
        StorageFull: the disk is full (nothing of the store is left behind).
    """
    url = postgres_url(location)
    if url is not None:
        kv, shown = open_postgres(url, create=True, sync=sync)
        return initialised(kv, None, shown)
    where = store_path(location)
    if where.exists():
        if not where.is_dir():
            raise InvalidInput(f"{where} exists and is not a directory")
        data = where / DATA_FILE
        if data.exists():
            if is_lmdb_file(data):
                raise InvalidInput(f"a store already exists at {where}")
            raise InvalidInput(
                f"{where} holds a {DATA_FILE} that is not a Mnemosyne store; choose another place"
            )
        if any(where.iterdir()):
            raise InvalidInput(f"{where} exists and is not empty")
    made = not where.exists()
    try:
        where.mkdir(parents=True, exist_ok=True)
        where.chmod(PRIVATE_DIRECTORY)  # before any file is in it (the directory is new or empty)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageFull(f"cannot create {where}: the disk is full ({exc.strerror})") from None
        raise InvalidInput(f"cannot create {where}: {exc.strerror or exc}") from None
    try:
        kv = LmdbKV(where, create=True, map_size=map_size, max_map_size=max_map_size, sync=sync)
        _private_files(where)
        return initialised(kv, where, None)
    except StorageFull:
        discard_new_store(where, directory=made)  # a full disk leaves nothing half-made
        raise


PRIVATE_DIRECTORY = 0o700
"""A new store's directory: its owner's alone (every memory is in it)."""

PRIVATE_FILE = 0o600
"""A new store's files: LMDB makes them by the umask (0644 under the usual 022)."""


def _private_files(where: Path) -> None:
    """Make the files a new store starts with its owner's alone (ADR 51)."""
    for found in where.iterdir():
        if found.is_file():
            found.chmod(PRIVATE_FILE)


def initialised(kv: KV, where: Path | None, url: str | None) -> Opened:
    """A new store on ``kv``: its meta records written, or refused when a store is there."""
    try:
        label = url or str(where)

        def initialise(txn: WriteTxn) -> None:
            if tenancy.store_format(txn) is not None:
                raise InvalidInput(f"a store already exists at {label}")
            tenancy.initialise(txn)

        kv.transact(initialise)
    except BaseException:
        kv.close()
        raise
    return kv, where, url


def existing(
    location: Location,
    *,
    readonly: bool | Literal["auto"],
    map_size: int,
    max_map_size: int,
    sync: bool,
    salvage: bool = False,
) -> Opened:
    """An existing store at ``location`` (see :meth:`Store.open <mnemosyne.api.store.Store.open>`).

    ``readonly`` is True, False or ``"auto"``, already checked by the caller.

    Raises:
        NotFound: no store there.
        InvalidInput: a store of a newer format.
        CorruptObject: the store file is damaged.
    """
    url = postgres_url(location)
    if url is not None:
        kv, shown = open_postgres(url, readonly=readonly is True, sync=sync)
        return checked(kv, None, shown)
    where = store_path(location)
    try:
        present = (where / DATA_FILE).is_file()
    except OSError:  # a name too long for the file system, …
        present = False
    if not present:
        raise NotFound(f"no store at {where} (create one with 'mnemo init')")
    if readonly == "auto":
        readonly = not (os.access(where, os.W_OK) and os.access(where / DATA_FILE, os.W_OK))
    kv = LmdbKV(
        where, readonly=readonly, map_size=map_size, max_map_size=max_map_size, sync=sync, salvage=salvage
    )
    return checked(kv, where, None)


def checked(kv: KV, where: Path | None, url: str | None) -> Opened:
    """An existing store on ``kv``, refused when it is none or of a newer format."""
    try:
        with kv.read() as txn:
            tenancy.check_format(txn, url or str(where))
    except BaseException:
        kv.close()
        raise
    return kv, where, url
