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

import os
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, NoReturn

from mnemosyne.api import _store_opening
from mnemosyne.api._handle import Clock, Resource, read_clock, system_clock
from mnemosyne.api._store_remotes import StoreRemotes
from mnemosyne.api.locations import Location, index_cache_dir
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.model.access import NewToken, Role, Token
from mnemosyne.model.defaults import DEFAULT_AUTHOR
from mnemosyne.model.reports import BucketOptions, CompactReport, ExportReport, ImportReport, Remote
from mnemosyne.recall.index_location import IndexLocation
from mnemosyne.store import settings, tenancy
from mnemosyne.store.kv.base import KV, WriteTxn
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE

if TYPE_CHECKING:
    from collections.abc import Sequence


class Store(Resource):
    """A whole store: its tenants, settings, backups and compaction.

    Open one with :meth:`init`, :meth:`open` or :meth:`in_memory`; use it as a
    context manager or call :meth:`close`. Handles from :meth:`repo` share it
    and stop working once it is closed.
    """

    def __init__(
        self, kv: KV, path: Path | None, url: str | None = None, index_cache: Path | None = None
    ) -> None:
        """Use :meth:`init`, :meth:`open` or :meth:`in_memory` instead."""
        self._kv = kv
        self.path = path
        self._url = url
        self._index_cache = index_cache
        self._remotes = StoreRemotes(kv, path, url)

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        location: Location,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        index_cache: str | os.PathLike[str] | None = None,
    ) -> Store:
        """Create a new store in the directory ``location`` (and any missing parents).

        Args:
            location: the directory; it must not exist, or be empty.
            map_size: initial LMDB map size in bytes (the file grows only as written).
            max_map_size: the map doubles on demand up to this size.
            sync: flush every commit to disk before returning (see :meth:`open`).
            index_cache: where to keep the saved approximate index (see :meth:`open`).

        Raises:
            InvalidInput: a store, or anything else, is already there.
            NotFound: a PostgreSQL server that cannot be reached, or has no such database.
            StorageFull: the disk is full (nothing of the store is left behind).
        """
        cache = index_cache_dir(index_cache)
        kv, where, url = _store_opening.create(
            location, map_size=map_size, max_map_size=max_map_size, sync=sync
        )
        return cls(kv, where, url, cache)

    @classmethod
    def open(
        cls,
        location: Location,
        *,
        readonly: bool | Literal["auto"] = False,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        index_cache: str | os.PathLike[str] | None = None,
        salvage: bool = False,
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
            index_cache: a directory to keep the saved approximate index of
                semantic search in (see :attr:`index_location`), for stores past
                ``recall.approximate_from``: any process opening the store with the
                same directory maps it instead of building it. Default: inside a
                store directory; none for a PostgreSQL store (each handle then
                builds its own in memory at its first semantic search).
            salvage: open a store refused as damaged (its meta pages disagree with
                each other or with what its last commit recorded) all the same,
                read-only (``readonly`` must be True), to export what it still
                reads: the state its newest meta page leads to, which may lack the
                latest commits. A store directory only; nothing is ever written.

        Raises:
            NotFound: no store there.
            InvalidInput: a store of a newer format, an ``index_cache`` that is no
                path, or ``salvage`` without ``readonly``.
            CorruptObject: the store file is damaged.
        """
        if salvage and readonly is not True:
            raise InvalidInput("salvage opens a store read-only: pass readonly=True")
        if readonly not in (True, False, "auto"):
            raise InvalidInput(f"readonly must be True, False or 'auto', not {readonly!r}")
        cache = index_cache_dir(index_cache)
        kv, where, url = _store_opening.existing(
            location,
            readonly=readonly,
            map_size=map_size,
            max_map_size=max_map_size,
            sync=sync,
            salvage=salvage,
        )
        return cls(kv, where, url, cache)

    @property
    def index_location(self) -> IndexLocation | None:
        """Where the approximate index of semantic search is saved, and whether this handle writes it.

        The ``index_cache`` given at opening (a cache that may hold several
        stores' files, each named for its store), else the ``recall-index``
        directory inside a store directory (written only by a writable handle),
        else None (PostgreSQL without ``index_cache``, or in memory: each handle
        builds its own index in memory). See docs/recall.md and ADR 32.
        """
        if self._index_cache is not None:
            return IndexLocation.cache(self._index_cache, self.where)
        if self.path is not None:
            return IndexLocation.inside(self.path, writable=not self._kv.readonly)
        return None

    def _index_locations(self) -> list[IndexLocation]:
        """Every place a saved index of this store may be.

        :attr:`index_location`, and the store directory's own ``recall-index``
        when a cache was given instead: a directory store opened once with
        ``index_cache`` and once without has files in both; compaction and
        dropping a tenant clean both, so erased bytes leave wherever an earlier
        handle saved them.
        """
        given = self.index_location
        found = [given] if given is not None else []
        if self._index_cache is not None and self.path is not None:
            found.append(IndexLocation.inside(self.path, writable=not self._kv.readonly))
        return found

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
        """Delete a whole tenant: its objects, refs, reflogs, indexes and access tokens.

        A tenant later created under the same name starts empty, in a new key
        scope. Handles still bound to the dropped tenant refuse every read and
        write with ``NotFound`` from then on.

        Returns:
            The number of keys deleted.

        Raises:
            InvalidInput: it is the default tenant, or a bad name.
            NotFound: no such tenant.
        """
        scopes: list[bytes] = []
        from mnemosyne.store import tokens

        def work(txn: WriteTxn) -> int:
            scope = tenancy.lookup(txn, name)
            scopes[:] = [scope] if scope is not None else []
            dropped = tenancy.drop(txn, name)
            tokens.drop_tenant(txn, name)  # a tenant made again later under the name is not theirs
            return dropped

        dropped = self._kv.transact(work)
        from mnemosyne.recall import index_files

        for location in self._index_locations():
            if location.writable:
                for scope in scopes:  # its saved index holds int8 copies of its vectors: it goes too
                    index_files.remove(location, scope)
        return dropped

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
        ``minilm-sentences`` when the ``embed`` extra is installed, else lexical
        search only), ``none`` (lexical only), ``hash``, ``hash-DIM``, ``minilm``
        or ``minilm-sentences``.

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

    def add_remote(
        self,
        name: str,
        location: Location,
        *,
        token_file: Location | None = None,
        bucket: BucketOptions | None = None,
    ) -> Remote:
        """Name another store as a remote of this one (store-wide: every tenant may use it).

        Args:
            name: its name here (``origin``, …): letters, digits, ``.``, ``_``, ``-``; no ``/``.
            location: where it is, as :meth:`open` takes it: a directory (kept as an
                absolute path) or a URL (kept as given); or the URL of a store that
                ``mnemo serve`` serves (``http://host:7777``), never holding a token.
            token_file: for a served store, a file holding the token its fetches and
                pushes send (its path is kept, made absolute; the token is read at
                each use and never kept). Without one, pass ``token=`` to each call.
            bucket: for a prefix of an object-storage bucket (``s3://BUCKET/PREFIX``),
                its endpoint, region and profile (ADR 0069); credentials are never
                kept: the AWS SDK finds them (``AWS_ACCESS_KEY_ID``, a profile, a role).

        Raises:
            InvalidInput: a bad name, a remote of that name exists, the location
                is this store or a URL holding a user or token, or a token file
                for a remote that is not served over HTTP, or one that is not a file.
        """
        return self._remotes.add(name, location, token_file=token_file, bucket=bucket)

    def remove_remote(self, name: str, *, author: str = DEFAULT_AUTHOR, clock: Clock = system_clock) -> int:
        """Forget a remote, and delete its remote-tracking refs in every tenant (reflogged).

        One transaction: the remote and all its tracking refs go together, or nothing does.

        Returns:
            The number of remote-tracking refs deleted.

        Raises:
            NotFound: no remote of that name.
        """
        return self._remotes.remove(name, author=author, clock=clock)

    def remotes(self) -> list[Remote]:
        """The store's remotes, in name order."""
        return self._remotes.every()

    @property
    def unfinished_clone(self) -> str | None:
        """What the clone making this store was asked for, while it is unfinished; else None.

        A clone killed part-way leaves its store marked until the same clone,
        run again, finishes it (``fsck`` reports the mark as a problem). The text
        names the source (a URL without its password) and the tenants asked for.
        """
        return self._remotes.unfinished_clone()

    def remote_location(self, name: str) -> str:
        """Where remote ``name`` is, as kept (a URL with any password: for opening it, not showing).

        Raises:
            NotFound: no remote by that name.
            InvalidInput: a bad name, or the remote is this store.
        """
        return self._remotes.location(name)

    # -- access tokens ----------------------------------------------------------------

    def create_token(
        self,
        tenant: str,
        role: Role,
        *,
        name: str | None = None,
        expires: timedelta | None = None,
        clock: Clock = system_clock,
    ) -> NewToken:
        """Make an access token for a served store (``mnemo serve``): one tenant, one role.

        The token's text is in the result and nowhere else: the store keeps only
        an HMAC of it under a key of its own. Roles nest: ``read`` reads,
        ``write`` also commits, verifies, branches and merges, ``admin`` also erases.

        Args:
            tenant: the one tenant the token reaches.
            role: ``read``, ``write`` or ``admin``.
            name: a name to list and revoke it by (unique among the store's tokens).
            expires: how long it works (default: until revoked).
            clock: where the creation time comes from.

        Raises:
            NotFound: no such tenant.
            InvalidInput: a bad role, name or duration, or a name another token has.
        """
        tenancy.check_tenant_name(tenant)
        if expires is not None and (not isinstance(expires, timedelta) or expires <= timedelta(0)):
            raise InvalidInput("expires must be a positive timedelta")
        now = read_clock(clock)
        until = now + expires if expires is not None else None
        from mnemosyne.store import tokens

        def work(txn: WriteTxn) -> NewToken:
            if tenancy.lookup(txn, tenant) is None:
                raise NotFound(f"no tenant named {tenant!r} (create it with 'mnemo tenant create {tenant}')")
            return tokens.create(txn, tenant=tenant, role=role, name=name, now=now, expires_at=until)

        return self._kv.transact(work)

    def tokens(self) -> list[Token]:
        """Every access token of the store (never its text), by tenant, then name, then id."""
        from mnemosyne.store import tokens

        with self._kv.read() as txn:
            return tokens.every(txn)

    def revoke_token(self, id_or_name: str) -> Token:
        """Delete a token, by its id or its name; a server refuses it from its next request on.

        Returns:
            The token revoked, as it was listed.

        Raises:
            NotFound: no token has that id or name.
        """
        from mnemosyne.store import tokens

        return self._kv.transact(lambda txn: tokens.revoke(txn, id_or_name))

    def check_token(self, text: str, *, clock: Clock = system_clock) -> Token | None:
        """The token ``text`` is, when the store issued it and it has neither expired nor been revoked.

        None otherwise, whatever the reason, so a caller cannot tell an unknown
        token from a revoked one. One record read; digests compared in constant time.
        """
        now = read_clock(clock)
        from mnemosyne.store import tokens  # hashlib, hmac, secrets: loaded by the calls on tokens

        with self._kv.read() as txn:
            return tokens.check(txn, text, now)

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

        The saved approximate index (see :attr:`index_location`) is compacted
        too: a file holding a row dropped since it was saved (an erased or
        collected content's int8 vector) is rewritten without it, or deleted when
        it cannot be (the next semantic search builds it again).

        Raises:
            InvalidInput: another handle or process has the store open, or it is read-only.
            StorageFull: the disk has no room for the new copy (the store is unchanged,
                and no part of the copy is left).
        """
        before, after = self._kv.compact()
        from mnemosyne.recall.matrix import scrub

        for location in self._index_locations():
            with self._kv.read() as txn:
                scopes = {tenancy.lookup(txn, name) for name in tenancy.tenant_names(txn)}
                scrub(txn, location, {scope for scope in scopes if scope is not None})
        return CompactReport(file_bytes_before=before, file_bytes_after=after)
