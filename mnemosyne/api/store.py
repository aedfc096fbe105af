"""``Store``: a whole store (every tenant), its settings, backups and compaction.

A store is where the bytes live: a directory holding one LMDB environment, a
schema of a PostgreSQL database (a ``postgresql://`` URL), or process memory.
Store-wide rules live here, in the library, so every face honours them: the
default tenant cannot be dropped, settings are checked before they are kept, an
import goes only into an empty store, and compaction needs the store to itself.
A :class:`~mnemosyne.api.repo.Repo` is one tenant of a store:
``Repo.open(store, tenant="acme")``. The store knows nothing of the ``Repo``
(it sits below it: a ``Repo`` holds its store, as dulwich's ``Repo`` holds its
object store).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, NoReturn

from mnemosyne.api._handle import Clock, Handle, Resource, read_clock, system_clock
from mnemosyne.errors import InvalidInput, NotFound, StorageFull
from mnemosyne.model.defaults import DEFAULT_AUTHOR
from mnemosyne.model.reports import CompactReport, ExportReport, ImportReport, Remote
from mnemosyne.store import remote_config, settings, tenancy
from mnemosyne.store.kv.base import KV, WriteTxn
from mnemosyne.store.kv.datafile import DATA_FILE, is_lmdb_file
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE, LmdbKV, discard_new_store
from mnemosyne.store.kv.location import is_postgres_url, shown_url
from mnemosyne.store.refs import REMOTE_PREFIX

if TYPE_CHECKING:
    from collections.abc import Sequence

Location = str | os.PathLike[str]
"""Where a store is: a directory path, or a ``postgresql://`` URL."""


def postgres_url(location: object) -> str | None:
    """The URL when ``location`` names a store on PostgreSQL (``postgresql://``, ``postgres://``).

    None for anything else: a URL is never taken for a directory path, nor a path for a URL.
    """
    return location if isinstance(location, str) and is_postgres_url(location) else None


def shown_location(location: Location) -> str:
    """How messages name a location: a directory's absolute path, a URL without its password."""
    url = postgres_url(location)
    return shown_url(url) if url is not None else str(Path(os.fspath(location)).resolve())


def _postgres(url: str, **options: bool) -> tuple[KV, str]:
    """A PostgreSQL backend and its URL as messages show it (no password).

    The ``postgres`` extra is imported only when a URL is opened.
    """
    try:
        from mnemosyne.store.kv.postgres_kv import PostgresKV
    except ImportError:
        raise InvalidInput(
            "postgresql:// stores need the 'postgres' extra: pip install 'mnemosyne[postgres]'"
        ) from None
    kv = PostgresKV(url, **options)
    return kv, kv.display


def store_path(location: Location) -> Path:
    """The directory a location names.

    Raises:
        InvalidInput: not a path, or a URL (a URL is never taken for a path).
    """
    if not isinstance(location, str | os.PathLike):
        raise InvalidInput(f"a store location must be a path, not {type(location).__name__}")
    text = os.fspath(location)
    if isinstance(text, str) and "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidInput(f"{scheme}:// locations are not supported: a store is a directory path")
    return Path(text)


class Store(Resource):
    """A whole store: its tenants, settings, backups and compaction.

    Open one with :meth:`init`, :meth:`open` or :meth:`in_memory`; use it as a
    context manager or call :meth:`close`. Handles from :meth:`repo` share it
    and stop working once it is closed.
    """

    def __init__(self, kv: KV, path: Path | None, url: str | None = None) -> None:
        """Use :meth:`init`, :meth:`open` or :meth:`in_memory` instead."""
        self._kv = kv
        self.path = path
        self._url = url

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        location: Location,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
    ) -> Store:
        """Create a new store in the directory ``location`` (and any missing parents).

        Args:
            location: the directory; it must not exist, or be empty.
            map_size: initial LMDB map size in bytes (the file grows only as written).
            max_map_size: the map doubles on demand up to this size.
            sync: flush every commit to disk before returning (see :meth:`open`).

        Raises:
            InvalidInput: a store, or anything else, is already there.
            NotFound: a PostgreSQL server that cannot be reached, or has no such database.
            StorageFull: the disk is full (nothing of the store is left behind).
        """
        url = postgres_url(location)
        if url is not None:
            kv, shown = _postgres(url, create=True, sync=sync)
            return cls._initialised(kv, None, shown)
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
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFull(f"cannot create {where}: the disk is full ({exc.strerror})") from None
            raise InvalidInput(f"cannot create {where}: {exc.strerror or exc}") from None
        try:
            kv = LmdbKV(where, create=True, map_size=map_size, max_map_size=max_map_size, sync=sync)
            return cls._initialised(kv, where, None)
        except StorageFull:
            discard_new_store(where, directory=made)  # a full disk leaves nothing half-made
            raise

    @classmethod
    def _initialised(cls, kv: KV, where: Path | None, url: str | None) -> Store:
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
        return cls(kv, where, url)

    @classmethod
    def open(
        cls,
        location: Location,
        *,
        readonly: bool | Literal["auto"] = False,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
    ) -> Store:
        """Open an existing store.

        Args:
            location: the store directory, or a ``postgresql://`` URL.
            readonly: open for inspection; any write raises ``InvalidInput``. Works
                on a read-only directory or medium too. ``"auto"``: for writing
                when this process may write the store's files, else read-only
                (a URL is opened for writing: the server decides, and a role
                that may not write is told so when it tries).
            map_size: initial LMDB map size in bytes.
            max_map_size: the map grows on demand up to this size.
            sync: flush every commit to disk before returning (off: faster bulk
                loads, and a crash may lose the latest commits, never the store).

        Raises:
            NotFound: no store there.
            InvalidInput: a store of a newer format.
            CorruptObject: the store file is damaged.
        """
        if readonly not in (True, False, "auto"):
            raise InvalidInput(f"readonly must be True, False or 'auto', not {readonly!r}")
        url = postgres_url(location)
        if url is not None:
            kv, shown = _postgres(url, readonly=readonly is True, sync=sync)
            return cls._checked(kv, None, shown)
        where = store_path(location)
        try:
            present = (where / DATA_FILE).is_file()
        except OSError:  # a name too long for the file system, …
            present = False
        if not present:
            raise NotFound(f"no store at {where} (create one with 'mnemo init')")
        if readonly == "auto":
            readonly = not (os.access(where, os.W_OK) and os.access(where / DATA_FILE, os.W_OK))
        kv = LmdbKV(where, readonly=readonly, map_size=map_size, max_map_size=max_map_size, sync=sync)
        return cls._checked(kv, where, None)

    @classmethod
    def _checked(cls, kv: KV, where: Path | None, url: str | None) -> Store:
        """An existing store on ``kv``, refused when it is none or of a newer format."""
        try:
            with kv.read() as txn:
                tenancy.check_format(txn, url or str(where))
        except BaseException:
            kv.close()
            raise
        return cls(kv, where, url)

    @classmethod
    def in_memory(cls) -> Store:
        """A store held in memory only: for tests and throwaway experiments."""
        from mnemosyne.store.kv.memory import MemoryKV

        kv = MemoryKV()
        kv.transact(tenancy.initialise)
        return cls(kv, None)

    def close(self) -> None:
        """Release the store; its handles cannot be used afterwards."""
        self._kv.close()

    def __repr__(self) -> str:
        return f"<Store {self.where}>"

    def __getattr__(self, name: str) -> NoReturn:
        # Store.repo(tenant) became Repo.open(store, tenant=...) (ADR 25): say so, once.
        if name == "repo":
            raise AttributeError(
                "Store.repo(tenant) was replaced by Repo.open(store, tenant=tenant): "
                "from mnemosyne import Repo"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def where(self) -> str:
        """How messages name the store: its path, its URL (without a password), or ``memory``."""
        if self._url is not None:
            return self._url
        return str(self.path) if self.path is not None else "memory"

    @property
    def readonly(self) -> bool:
        """Whether the store refuses writes."""
        return self._kv.readonly

    @property
    def kv(self) -> KV:
        """The storage backend (for maintenance tools and benchmarks)."""
        return self._kv

    # -- tenants ----------------------------------------------------------------------

    def tenants(self) -> list[str]:
        """Names of the store's tenants, sorted."""
        with self._kv.read() as txn:
            return tenancy.tenant_names(txn)

    def create_tenant(self, name: str) -> None:
        """Create an empty tenant.

        Raises:
            InvalidInput: a bad name, or the tenant exists.
        """
        tenancy.check_tenant_name(name)

        def work(txn: WriteTxn) -> None:
            if tenancy.lookup(txn, name) is not None:
                raise InvalidInput(f"tenant {name!r} already exists")
            tenancy.create(txn, name)

        self._kv.transact(work)

    def drop_tenant(self, name: str) -> int:
        """Delete a whole tenant: its objects, refs, reflogs and indexes.

        A tenant later created under the same name starts empty, in a new key
        scope. Handles still bound to the dropped tenant refuse every read and
        write with ``NotFound`` from then on.

        Returns:
            The number of keys deleted.

        Raises:
            InvalidInput: it is the default tenant, or a bad name.
            NotFound: no such tenant.
        """
        return self._kv.transact(lambda txn: tenancy.drop(txn, name))

    def check_droppable(self, name: str) -> None:
        """Raise what :meth:`drop_tenant` would raise before deleting anything (nothing is written).

        Raises:
            InvalidInput: it is the default tenant, or a bad name.
            NotFound: no such tenant.
        """
        with self._kv.read() as txn:
            tenancy.check_droppable(txn, name)

    # -- settings ---------------------------------------------------------------------

    def config(self, key: str, value: str | None = None) -> str:
        """Read a store setting, or change it when ``value`` is given; return its value.

        Settings are shared by every tenant. ``embedder``: ``auto`` (the default:
        MiniLM when the ``embed`` extra is installed, else lexical search only),
        ``none`` (lexical only), ``hash``, ``hash-DIM`` or ``minilm``.

        Raises:
            InvalidInput: an unknown setting, or a value it cannot take.
        """
        if value is not None:
            from mnemosyne.recall.setting_values import check_setting

            checked = check_setting(key, value)
            self._kv.transact(lambda txn: settings.put(txn, key, checked))
        with self._kv.read() as txn:
            return settings.get(txn, key)

    # -- remotes ----------------------------------------------------------------------

    def add_remote(self, name: str, location: Location) -> Remote:
        """Name another store as a remote of this one (store-wide: every tenant may use it).

        Args:
            name: its name here (``origin``, …): letters, digits, ``.``, ``_``, ``-``; no ``/``.
            location: where it is, as :meth:`open` takes it: a directory (kept as an
                absolute path) or a URL (kept as given).

        Raises:
            InvalidInput: a bad name, a remote of that name exists, or the location
                is this store.
        """
        remote_config.check_remote_name(name)
        text = remote_config.location_text(location)
        remote_config.check_not_itself(self.path, self._url, text)
        self._kv.transact(lambda txn: remote_config.put(txn, name, text))
        return Remote(name=name, location=remote_config.shown(text))

    def remove_remote(self, name: str, *, author: str = DEFAULT_AUTHOR, clock: Clock = system_clock) -> int:
        """Forget a remote, and delete its remote-tracking refs in every tenant (reflogged).

        One transaction: the remote and all its tracking refs go together, or nothing does.

        Returns:
            The number of remote-tracking refs deleted.

        Raises:
            NotFound: no remote of that name.
        """
        remote_config.check_remote_name(name)

        def work(txn: WriteTxn) -> int:
            try:
                remote_config.delete(txn, name)
                configured = True
            except NotFound:
                # Tracking refs may outlive their remote's entry (an imported export carries
                # the refs, not the remotes): removing the name still drops them.
                configured = False
            dropped = 0
            now = read_clock(clock)
            for tenant in tenancy.tenant_names(txn):
                scope = tenancy.lookup(txn, tenant)
                assert scope is not None  # listed in this same transaction
                refs = Handle(self._kv, scope, tenant, clock).within(txn).refs
                for short, tip in list(refs.tracking(txn, name)):
                    ref = REMOTE_PREFIX + short
                    when = refs.next_time(txn, ref, now)
                    refs.update(txn, ref, tip, None, when=when, author=author, reason=f"remote remove {name}")
                    dropped += 1
            if not configured and not dropped:
                raise NotFound(f"no remote named {name!r}")
            return dropped

        return self._kv.transact(work)

    def remotes(self) -> list[Remote]:
        """The store's remotes, in name order."""
        with self._kv.read() as txn:
            return [
                Remote(name=name, location=remote_config.shown(where))
                for name, where in remote_config.every(txn)
            ]

    @property
    def unfinished_clone(self) -> str | None:
        """What the clone making this store was asked for, while it is unfinished; else None.

        A clone killed part-way leaves its store marked until the same clone,
        run again, finishes it (``fsck`` reports the mark as a problem). The text
        names the source (a URL without its password) and the tenants asked for.
        """
        with self._kv.read() as txn:
            found = remote_config.unfinished_clone(txn)
        return found.described() if found is not None else None

    def remote_location(self, name: str) -> str:
        """Where remote ``name`` is, as kept (a URL with any password: for opening it, not showing).

        Raises:
            NotFound: no remote by that name.
            InvalidInput: a bad name, or the remote is this store.
        """
        with self._kv.read() as txn:
            location = remote_config.get(txn, name)
        remote_config.check_not_itself(self.path, self._url, location)
        return location

    # -- backup and compaction --------------------------------------------------------

    def export(
        self, out: IO[bytes] | str | os.PathLike[str], *, tenants: Sequence[str] | None = None
    ) -> ExportReport:
        """Write a portable copy of the store (every tenant, or ``tenants``) to a stream or a file.

        The copy is one consistent snapshot, every object re-hashed on the way
        out. Given a path, the file appears only once the export is whole (it is
        written beside it, flushed and renamed; owner-only, as it holds every
        memory), so a failed export never leaves a file that could pass for a
        backup. A stream is written to and not closed. The format is in
        ``docs/internals.md``.

        Raises:
            InvalidInput: a path that is a directory, or whose folder cannot be written.
            NotFound: a tenant named in ``tenants`` does not exist.
            CorruptObject: a stored object's bytes do not match its hash.
        """
        from mnemosyne.admin import dump_restore

        if isinstance(out, str | os.PathLike):
            return dump_restore.dump_to_file(self._kv, Path(os.fspath(out)), tenants=tenants)
        return dump_restore.dump(self._kv, out, tenants=tenants)

    def import_(self, inp: IO[bytes]) -> ImportReport:
        """Restore an export into this store, which must be empty, with every hash as it was.

        The input is checked whole (framing, digest) before anything is written,
        and written in one transaction.

        Raises:
            InvalidInput: the store is not empty; the input is not an export, or of
                a newer format.
            CorruptObject: the input is truncated or damaged.
        """
        from mnemosyne.admin import dump_restore

        dump_restore.check_empty(self._kv, self.where)
        with dump_restore.checked(inp) as export:
            return dump_restore.restore(self._kv, export, self.where)

    def compact(self) -> CompactReport:
        """Rewrite the store file from its live records only, so erased bytes leave the disk.

        Needs the store to itself: no other handle on it in this process, no
        other process; and room on its disk for the new copy, which is built
        beside the old one before it replaces it.

        Raises:
            InvalidInput: another handle or process has the store open, or it is read-only.
            StorageFull: the disk has no room for the new copy (the store is unchanged,
                and no part of the copy is left).
        """
        before, after = self._kv.compact()
        return CompactReport(file_bytes_before=before, file_bytes_after=after)
