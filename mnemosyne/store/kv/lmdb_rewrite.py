"""Compaction's copy: every live record of an LMDB file, written one by one into a new one.

Not LMDB's compacting copy (``env.copy(compact=True)``): that copies live pages
whole, and a live page keeps the bytes of records deleted from it in its unused
middle (LMDB neither zeroes a page when a record leaves it nor when it reuses a
freed page), and branch pages keep separator keys of deleted records. A page
built afresh from live records holds live bytes and zeroes only (LMDB zeroes
what it does not fill of a new page), so erased bytes cannot survive it.

The caller (``lmdb_env``) holds the store alone, swaps the new file in and reopens.
"""

from __future__ import annotations

import os
from typing import Any

import lmdb

from mnemosyne.store.kv import lmdb_seal

SCRATCH_PREFIX = ".compact-"
"""Names of the directories a compaction builds its new file in, inside the store."""

_BATCH_BYTES = 64 << 20
"""Bytes of records written per transaction of the new environment."""


def scratch_directory(store: str) -> str:
    """A new, empty directory for the new file, in the store's (so the swap is a rename)."""
    import tempfile  # only compaction needs it: not loaded by every process that opens a store

    return tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=store)


def remove_stale_scratch(store: str) -> None:
    """Remove what a killed compaction left: the store's file was never replaced by it."""
    for entry in os.listdir(store):
        if entry.startswith(SCRATCH_PREFIX):
            import shutil  # only where a killed compaction left something

            shutil.rmtree(os.path.join(store, entry), ignore_errors=True)


def rewrite_into(
    env: lmdb.Environment, known: dict[bytes, Any], directory: str, map_size: int, max_dbs: int
) -> None:
    """Write every record of ``env``, one by one, into a new environment in ``directory``.

    Every named database in the file is copied, not only the keyspaces this
    version knows (``known``: name → open handle): compaction must not lose what
    a newer version wrote.

    Raises:
        lmdb.Error, OSError: the copy failed (the store itself is untouched).
    """
    target = lmdb.open(
        directory,
        subdir=True,
        map_size=map_size,
        max_dbs=max_dbs,
        readahead=False,
        sync=True,
        metasync=True,
        meminit=True,
        # The new file is this process's alone until it is swapped in: no readers to
        # track, and no lock file, whose unallocated pages are SIGBUS on a full disk.
        lock=False,
    )
    try:
        handles = _handles(env, known)
        names = list(handles)
        with env.begin() as source:
            for name in names:
                db = target.open_db(name, create=True)
                batch: list[tuple[bytes, bytes]] = []
                size = 0
                for key, value in source.cursor(db=handles[name]).iternext():
                    batch.append((bytes(key), bytes(value)))
                    size += len(key) + len(value)
                    if size >= _BATCH_BYTES:
                        _append_all(target, db, batch)
                        batch, size = [], 0
                _append_all(target, db, batch)
        with target.begin(write=True) as txn:  # the new file's last transaction, sealed
            lmdb_seal.seal(txn)
        target.sync(True)
    finally:
        target.close()


def least_bytes(env: lmdb.Environment, known: dict[bytes, Any]) -> int:
    """Bytes the new file needs at the least: what a rewrite cannot pack tighter.

    Large values keep their overflow pages; a leaf page is never less than a
    quarter full in LMDB (emptier ones are merged), so its records need at least
    a quarter page; branch pages and the free-page list come on top.
    """
    with env.begin() as txn:
        pages = [txn.stat(db) for db in _handles(env, known).values()]
    size = int(env.stat()["psize"])
    return sum(page["overflow_pages"] * size + page["leaf_pages"] * size // 4 for page in pages)


def copy_owner_and_mode(before: os.stat_result, path: str) -> None:
    """Give the new file the old one's permissions (and owner, where allowed)."""
    os.chmod(path, before.st_mode & 0o7777)
    if os.geteuid() == 0:
        os.chown(path, before.st_uid, before.st_gid)


def sync_directory(path: str) -> None:
    """Flush a directory's entries, so a rename in it survives a crash."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _handles(env: lmdb.Environment, known: dict[bytes, Any]) -> dict[bytes, Any]:
    """Every named database of the file (name → handle), in name order."""
    return {name: known.get(name) or _open_unknown(env, name) for name in _database_names(env)}


def _database_names(env: lmdb.Environment) -> list[bytes]:
    """The names of every named database in the file: the main database's keys.

    The store writes nothing else into the main database but its seal.
    """
    with env.begin() as txn:
        keys = txn.cursor().iternext(values=False)
        return [bytes(key) for key in keys if key != lmdb_seal.SEAL_KEY]


def _open_unknown(env: lmdb.Environment, name: bytes) -> Any:
    # A keyspace of a newer version, opened only to be copied (in a write transaction,
    # so the handle outlives it).
    with env.begin(write=True) as txn:
        return env.open_db(name, txn=txn, create=False)


def _append_all(env: lmdb.Environment, db: Any, items: list[tuple[bytes, bytes]]) -> None:
    """Append records (in key order) to a database of a new environment, in one transaction."""
    if not items:
        return
    while True:
        try:
            with env.begin(write=True, db=db) as txn:
                txn.cursor().putmulti(items, append=True)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)
