"""``export_store`` and ``import_store``: backups of a store given by handle or by path."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from mnemosyne.admin import dump_restore
from mnemosyne.api.locations import Location, postgres_url, store_path
from mnemosyne.api.repo import Repo
from mnemosyne.api.store import Store
from mnemosyne.errors import NotFound
from mnemosyne.model.reports import ExportReport, ImportReport
from mnemosyne.store.kv.datafile import DATA_FILE
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE


def export_store(
    source: Repo | Store | Location,
    out: IO[bytes] | str | os.PathLike[str],
    *,
    tenants: Sequence[str] | None = None,
) -> ExportReport:
    """Write a portable copy of a store to ``out`` (see :meth:`Store.export`).

    Every tenant is exported, whatever tenant a ``Repo`` given as ``source`` is
    bound to, unless ``tenants`` names some.

    Args:
        source: an open store or handle, or the path of a store (opened read-only).
        out: a binary stream to write to (it is not closed), or the path of a file
            that appears only once the export is whole.
        tenants: export only these tenants (default: all of them).

    Raises:
        InvalidInput: ``out`` is a directory, or its folder cannot be written.
        NotFound: no store at the path, or a tenant named in ``tenants`` does not exist.
        CorruptObject: a stored object's bytes do not match its hash.
    """
    if isinstance(source, Repo | Store):
        store = source.store if isinstance(source, Repo) else source
        return store.export(out, tenants=tenants)
    with Store.open(source, readonly=True) as opened:
        return opened.export(out, tenants=tenants)


def import_store(target: Repo | Store | Location, inp: IO[bytes]) -> ImportReport:
    """Restore an export into an empty store, with every hash as it was (see :meth:`Store.import_`).

    Args:
        target: an open store or handle, or a path: a store there is opened, and one
            is created when there is none (sized for the export). If the import then
            fails, the store it created goes again, with any directory made for it
            (a directory that was there stays).
        inp: a binary stream positioned at the start of the export; it is not closed.

    Raises:
        InvalidInput: the store is not empty; the input is not an export, or is of a
            newer format version, or holds objects of a newer format or records
            that cannot belong in a store.
        CorruptObject: the input is truncated or damaged.
    """
    if isinstance(target, Repo | Store):
        store = target.store if isinstance(target, Repo) else target
        return store.import_(inp)
    url = postgres_url(target)
    if url is not None:
        try:
            existing_store = Store.open(url)
        except NotFound:
            existing_store = Store.init(url)  # a server it cannot reach fails here too
        with existing_store:
            return existing_store.import_(inp)
    where = store_path(target)
    try:
        existing = Store.open(where)
    except NotFound:
        if (where / DATA_FILE).exists():
            raise  # a store whose default tenant was dropped: not one to create again
        existing = None
    if existing is not None:
        with existing:
            return existing.import_(inp)
    with dump_restore.checked(inp) as export:
        # Room for the whole import from the start: a full map re-runs the transaction.
        size = max(DEFAULT_MAP_SIZE, -(-4 * export.size // (1 << 20)) << 20)
        with _created_store(where, size) as created:
            return dump_restore.restore(created.kv, export, created.where)


@contextmanager
def _created_store(where: Path, map_size: int) -> Iterator[Store]:
    """A new store at ``where``, removed again if the body fails, so a failed import leaves no trace.

    Only what this call made goes: the directories it created for the store,
    or, in a directory that was there (empty), the files it put there; and only
    while the store is still empty. A store someone else made or wrote to
    meanwhile is theirs, and stays.
    """
    made, before = _what_is_there(where)
    store = Store.init(where, map_size=map_size)  # a failure here made no store
    try:
        yield store
    except BaseException:
        try:
            dump_restore.check_empty(store.kv, store.where)
            untouched = True
        except Exception:  # written to meanwhile, or unreadable: not ours to remove
            untouched = False
        store.close()
        if untouched:
            _remove_made(where, made, before)
        raise
    store.close()


def _what_is_there(where: Path) -> tuple[Path | None, set[Path]]:
    """Before a store is created at ``where``: the outermost directory it will make, else what is there."""
    made: Path | None = None
    try:
        current = where.absolute()
        while not current.exists() and current != current.parent:
            made, current = current, current.parent
        return made, set(where.iterdir()) if made is None and where.is_dir() else set()
    except OSError:  # a path the store cannot be created at either
        return None, set()


def _remove_made(where: Path, made: Path | None, before: set[Path]) -> None:
    """Remove what creating a store at ``where`` made (errors ignored: the caller's failure is the news)."""
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    for entry in set(where.iterdir()) - before:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
