"""Remotes: fetch, push, pull and clone between stores (see :class:`Repo` and ADR 21).

A remote is another store, named in this store's configuration with where it
is (anything :meth:`Store.open` opens: a directory path, a ``postgresql://``
URL); a caller already holding the other store open may pass it as ``store=``.
History moves by hash (:mod:`mnemosyne.admin.sync`): the receiving side gets
exactly the objects it lacks, each hashed on arrival, and its refs move last.
A fetch moves remote-tracking refs (``refs/remotes/NAME/BRANCH``) here; a push
moves the remote's branch by compare-and-swap, only forward unless forced.
A transfer concerns the handle's tenant, or every tenant with ``all_tenants``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from mnemosyne.admin.sync import Sent, Side, transfer
from mnemosyne.api.handle import Clock, Handle
from mnemosyne.api.store import Location, Store, store_path
from mnemosyne.errors import InvalidInput, MnemoError, NotFound, RefConflict
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.defaults import DEFAULT_BRANCH
from mnemosyne.model.objects import Commit
from mnemosyne.model.reports import PullReport, RefUpdate, Remote, SyncReport, TenantSync
from mnemosyne.store import remotes, tenancy
from mnemosyne.store.kv.base import WriteTxn
from mnemosyne.store.kv.location import is_postgres_url, shown_url
from mnemosyne.store.refs import BRANCH_PREFIX, REMOTE_PREFIX, check_branch_name

if TYPE_CHECKING:
    from mnemosyne.api.repo import Repo
    from mnemosyne.history.branches import Resolution

ORIGIN = "origin"
"""The remote a clone names its source, and the default remote of fetch, pull and push."""


# -- configuration ---------------------------------------------------------------------


def location_text(location: Location) -> str:
    """How a remote's location is kept: a URL as given, a path made absolute.

    Raises:
        InvalidInput: neither a path nor a URL.
    """
    if not isinstance(location, str | os.PathLike):
        raise InvalidInput(f"a remote's location must be a path or a URL, not {type(location).__name__}")
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise InvalidInput("a remote's location must be a non-empty path or URL")
    return text if "://" in text else os.path.abspath(text)


def shown(location: str) -> str:
    """A remote's location as results show it: a URL without its password.

    The configuration keeps the URL as given, since connecting needs it; what
    is returned is printed and logged, and messages never show a password.
    """
    return shown_url(location) if is_postgres_url(location) else location


def add(store: Store, name: str, location: Location) -> Remote:
    """The work of :meth:`Store.add_remote`."""
    remotes.check_remote_name(name)
    text = location_text(location)
    _not_itself(store, text)
    store.kv.transact(lambda txn: remotes.put(txn, name, text))
    return Remote(name=name, location=shown(text))


def remove(store: Store, name: str, author: str, now: datetime) -> int:
    """The work of :meth:`Store.remove_remote`: forget it and its remote-tracking refs in every tenant."""
    remotes.check_remote_name(name)

    def work(txn: WriteTxn) -> int:
        try:
            remotes.delete(txn, name)
            configured = True
        except NotFound:
            # Tracking refs may outlive their remote's entry (an imported export carries
            # the refs, not the remotes): removing the name still drops them.
            configured = False
        dropped = 0
        for tenant in tenancy.tenant_names(txn):
            scope = tenancy.lookup(txn, tenant)
            assert scope is not None  # listed in this same transaction
            refs = Stores(scope).refs
            for short, tip in list(refs.tracking(txn, name)):
                ref = REMOTE_PREFIX + short
                when = refs.next_time(txn, ref, now)
                refs.update(txn, ref, tip, None, when=when, author=author, reason=f"remote remove {name}")
                dropped += 1
        if not configured and not dropped:
            raise NotFound(f"no remote named {name!r}")
        return dropped

    return store.kv.transact(work)


def listing(store: Store) -> list[Remote]:
    """The work of :meth:`Store.remotes`."""
    with store.kv.read() as txn:
        return [Remote(name=name, location=shown(where)) for name, where in remotes.every(txn)]


def _not_itself(store: Store, location: str) -> None:
    if store.path is not None and "://" not in location and Path(location).resolve() == store.path.resolve():
        raise InvalidInput(f"{location} is this store itself: a remote is another store")
    if store.path is None and is_postgres_url(store.where) and is_postgres_url(location):
        mine = _pg_identity(store.where)
        if mine is not None and mine == _pg_identity(location):
            raise InvalidInput(f"{shown(location)} is this store itself: a remote is another store")


def _pg_identity(url: str) -> tuple[str, str, str, str] | None:
    """``(host, port, database, schema)`` a store URL names, as libpq reads it; None if unreadable.

    Spellings of one server that libpq resolves alike (``localhost`` and
    ``127.0.0.1``) still differ here: what this catches is the same URL
    written twice, not every way of reaching one store.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict

        from mnemosyne.store.kv.postgres_conn import PgLocation

        where = PgLocation.parse(url)
        params = conninfo_to_dict(where.conninfo)
    except (ImportError, MnemoError):  # no driver, or a URL opening will refuse with its own message
        return None
    env = os.environ
    host = params.get("host") or params.get("hostaddr") or env.get("PGHOST") or ""
    port = params.get("port") or env.get("PGPORT") or "5432"
    database = params.get("dbname") or env.get("PGDATABASE") or params.get("user") or env.get("PGUSER") or ""
    return str(host), str(port), str(database), where.schema


# -- transfers ----------------------------------------------------------------------


class Remotes:
    """Fetch, push and pull for one tenant's handle (see :class:`Repo` for each call)."""

    def __init__(self, store: Store, handle: Handle) -> None:
        self._store = store
        self._handle = handle

    def _open(self, remote: str, other: Store | None, *, readonly: bool) -> tuple[str, Store, bool]:
        """``(location, open store, whether this call opened it)`` of a remote."""
        remotes.check_remote_name(remote)
        if other is not None:
            with self._store.kv.read() as txn:
                known = dict(remotes.every(txn)).get(remote)
            return shown(known) if known else other.where, other, False
        with self._store.kv.read() as txn:
            location = remotes.get(txn, remote)
        _not_itself(self._store, location)
        return shown(location), Store.open(location, readonly=readonly), True

    def _scope(self, tenant: str) -> bytes:
        """This store's scope of ``tenant``, created when absent (a fetch of every tenant)."""
        if tenant == self._handle.tenant:
            return self._handle.scope
        return tenancy.open_tenant(self._store.kv, tenant, True, self._store.where)

    def fetch(self, remote: str, other: Store | None, all_tenants: bool, author: str) -> SyncReport:
        """The work of :meth:`Repo.fetch`."""
        location, store, opened = self._open(remote, other, readonly=True)
        try:
            tenants = store.tenants() if all_tenants else [self._handle.tenant]
            parts = [self._fetch_tenant(store, remote, tenant, author) for tenant in tenants]
        finally:
            if opened:
                store.close()
        return SyncReport(kind="fetch", remote=remote, location=location, tenants=parts)

    def _fetch_tenant(self, other: Store, remote: str, tenant: str, author: str) -> TenantSync:
        here = Side(self._store.kv, self._scope(tenant), self._store.where)
        now = self._handle.now()
        with other.kv.read() as txn:
            scope = tenancy.lookup(txn, tenant)
            if scope is None:
                raise NotFound(f"remote {remote!r} has no tenant {tenant!r}")
            source = View(Stores(scope), txn)
            branches = list(source.refs.branches(txn))
            sent, moved = transfer(
                source,
                here,
                [tip for _, tip in branches],
                lambda view: _track(view, remote, branches, now, author),
            )
        return _part(tenant, sent, moved)

    def push(
        self,
        remote: str,
        branch: str | None,
        force: bool,
        other: Store | None,
        all_tenants: bool,
        author: str,
    ) -> SyncReport:
        """The work of :meth:`Repo.push`."""
        if branch is not None:
            check_branch_name(branch)
        if not all_tenants:  # a branch that is not here is told before the remote is opened
            with self._handle.read() as view:
                name = branch or view.refs.head_branch(view.txn)
                if not view.refs.exists(view.txn, BRANCH_PREFIX + name) and name != view.refs.head_branch(
                    view.txn
                ):
                    raise NotFound(f"no branch named {name!r} to push")
        location, store, opened = self._open(remote, other, readonly=False)
        try:
            tenants = self._store.tenants() if all_tenants else [self._handle.tenant]
            parts = [
                self._push_tenant(store, remote, tenant, branch, force, author, skip_empty=all_tenants)
                for tenant in tenants
            ]
        finally:
            if opened:
                store.close()
        return SyncReport(kind="push", remote=remote, location=location, tenants=parts)

    def _push_tenant(
        self,
        other: Store,
        remote: str,
        tenant: str,
        branch: str | None,
        force: bool,
        author: str,
        *,
        skip_empty: bool,
    ) -> TenantSync:
        scope = self._scope(tenant)
        now = self._handle.now()
        with self._store.kv.read() as txn:
            source = View(Stores(scope), txn)
            name = branch or source.refs.head_branch(txn)
            tip = source.refs.read(txn, BRANCH_PREFIX + name)
            if tip is None:
                if skip_empty:
                    return TenantSync(tenant=tenant, commits=0, objects=0, bytes=0, redactions=0, refs=[])
                if source.refs.exists(txn, BRANCH_PREFIX + name) or name == source.refs.head_branch(txn):
                    raise InvalidInput(f"branch {name!r} has no commits yet: nothing to push")
                raise NotFound(f"no branch named {name!r} to push")
            there = Side(other.kv, tenancy.open_tenant(other.kv, tenant, True, other.where), other.where)
            sent, moved = transfer(
                source, there, [tip], lambda view: _move_branch(view, remote, name, tip, force, now, author)
            )
        # Where the remote's branch now is, as a fetch would record it.
        self._store.kv.transact(
            lambda txn: _track_one(WriteView(Stores(scope), txn), remote, name, tip, now, author, "push")
        )
        return _part(tenant, sent, [moved] if moved is not None else [])

    def tracking(self, remote: str | None) -> list[tuple[str, Commit]]:
        """The work of :meth:`Repo.remote_branches`."""
        if remote is not None:
            remotes.check_remote_name(remote)
        with self._handle.read() as view:
            return [
                (short, Commit.from_object(oid, view.commit(oid)))
                for short, oid in view.refs.tracking(view.txn, remote)
            ]

    def pull(
        self,
        remote: str,
        branch: str | None,
        other: Store | None,
        author: str,
        message: str | None,
        strategy: MergeStrategy | None,
        resolutions: Mapping[str, Resolution] | None,
    ) -> PullReport:
        """The work of :meth:`Repo.pull`."""
        from mnemosyne.api.branches import Branches

        if branch is not None:
            check_branch_name(branch)
        fetched = self.fetch(remote, other, False, author)
        with self._handle.read() as view:
            name = branch or view.refs.head_branch(view.txn)
            tracking = f"{remote}/{name}"
            if not view.refs.exists(view.txn, REMOTE_PREFIX + tracking):
                raise NotFound(f"remote {remote!r} has no branch {name!r}")
            # NAME/BRANCH names the tracking ref unless a local branch has that name.
            shadowed = view.refs.exists(view.txn, BRANCH_PREFIX + tracking)
        source = REMOTE_PREFIX + tracking if shadowed else tracking
        merged = Branches(self._handle).merge(source, None, resolutions, strategy, message, author)
        return PullReport(fetch=fetched, merge=merged)


def _part(tenant: str, sent: Sent, refs: list[RefUpdate]) -> TenantSync:
    return TenantSync(
        tenant=tenant,
        commits=sent.commits,
        objects=sent.objects,
        bytes=sent.bytes,
        redactions=sent.redactions,
        refs=refs,
    )


def _hex(oid: bytes | None) -> str | None:
    return oid.hex() if oid is not None else None


def _track_one(
    view: WriteView, remote: str, branch: str, tip: bytes | None, now: datetime, author: str, why: str
) -> RefUpdate | None:
    """Move the remote-tracking ref ``remote/branch`` to ``tip`` (None: delete it); the update, if any."""
    short = f"{remote}/{branch}"
    ref = REMOTE_PREFIX + short
    old = view.refs.read(view.txn, ref)
    if old == tip:
        return None
    forced = old is not None and tip is not None and not view.graph.is_ancestor(view.txn, old, tip)
    how = "deleted there" if tip is None else "new" if old is None else "forced" if forced else "fast-forward"
    when = view.refs.next_time(view.txn, ref, now)
    view.refs.update(view.txn, ref, old, tip, when=when, author=author, reason=f"{why} {remote}: {how}")
    return RefUpdate(ref=short, old=_hex(old), new=_hex(tip), forced=forced)


def _track(
    view: WriteView, remote: str, branches: list[tuple[str, bytes]], now: datetime, author: str
) -> list[RefUpdate]:
    """Make the remote-tracking refs of ``remote`` mirror its branches (gone ones are deleted)."""
    wanted = dict(branches)
    gone = [short.split("/", 1)[1] for short, _ in view.refs.tracking(view.txn, remote)]
    moves = [(name, wanted.get(name)) for name in sorted(set(wanted) | set(gone))]
    found = [_track_one(view, remote, name, tip, now, author, "fetch") for name, tip in moves]
    return [update for update in found if update is not None]


def _move_branch(
    view: WriteView, remote: str, branch: str, tip: bytes, force: bool, now: datetime, author: str
) -> RefUpdate | None:
    """Move the remote's ``branch`` to ``tip`` by compare-and-swap: forward only, unless forced."""
    ref = BRANCH_PREFIX + branch
    old = view.refs.read(view.txn, ref)
    if old == tip:
        return None
    forced = old is not None and not view.graph.is_ancestor(view.txn, old, tip)
    if forced and not force:
        raise RefConflict(
            f"push to {remote} rejected: its branch {branch!r} has commits this one lacks (not a "
            f"fast-forward); pull, then push again (or push --force to drop them there)"
        )
    when = view.refs.next_time(view.txn, ref, now)
    how = "new branch" if old is None else "forced" if forced else "fast-forward"
    reason = f"push{' --force' if forced else ''}: {how}"
    view.refs.update(view.txn, ref, old, tip, when=when, author=author, reason=reason)
    return RefUpdate(ref=branch, old=_hex(old), new=tip.hex(), forced=forced)


# -- clone --------------------------------------------------------------------------


def clone(
    source: Location | Store,
    path: Location,
    *,
    tenant: str,
    all_tenants: bool,
    clock: Clock,
    author: str,
) -> Repo:
    """The work of :meth:`Repo.clone`."""
    tenancy.check_tenant_name(tenant)
    target = store_path(path)
    existed = target.exists()
    if isinstance(source, Store):
        other, location = source, None
    else:
        location = location_text(source)
        if "://" not in location and Path(location).resolve() == target.resolve():
            raise InvalidInput(f"{location} is the store being cloned into")
        other = Store.open(location, readonly=True)
    try:
        return _clone_into(other, location, target, tenant, all_tenants, clock, author)
    except BaseException:
        if not existed:
            shutil.rmtree(target, ignore_errors=True)  # a failed clone leaves nothing behind
        raise
    finally:
        if location is not None:
            other.close()


def _clone_into(
    other: Store,
    location: str | None,
    target: Path,
    tenant: str,
    all_tenants: bool,
    clock: Clock,
    author: str,
) -> Repo:
    from mnemosyne.api.repo import Repo

    tenants = other.tenants() if all_tenants else [tenant]
    if tenant not in other.tenants():
        raise NotFound(f"the store cloned has no tenant {tenant!r}")
    store = Store.init(target)
    try:
        if location is not None:
            add(store, ORIGIN, location)
        for name in tenants:
            handle = Repo.bind(store, name, create=True, clock=clock, embedder=None, owned=False)
            handle.fetch(ORIGIN, store=other, author=author)
            _check_out(other, store, name, handle.now(), author)
        return Repo.bind(store, tenant, create=False, clock=clock, embedder=None, owned=True)
    except BaseException:
        store.close()
        raise


def _check_out(other: Store, store: Store, tenant: str, now: datetime, author: str) -> None:
    """Make the cloned store's current branch a local branch here, and the current one."""
    with other.kv.read() as txn:
        scope = tenancy.lookup(txn, tenant)
        assert scope is not None  # fetched from a moment ago; tenants are never renamed
        refs = Stores(scope).refs
        head = refs.head_branch(txn) or DEFAULT_BRANCH
        tip = refs.read(txn, BRANCH_PREFIX + head)
    local = Stores(tenancy.open_tenant(store.kv, tenant, False, store.where))

    def work(txn: WriteTxn) -> None:
        ref = BRANCH_PREFIX + head
        old = local.refs.read(txn, ref)
        if tip is not None and old != tip:
            when = local.refs.next_time(txn, ref, now)
            local.refs.update(
                txn, ref, old, tip, when=when, author=author, reason=f"clone: from {ORIGIN}/{head}"
            )
        local.refs.set_head(txn, head)

    store.kv.transact(work)
