"""Remotes as porcelain: clone, fetch, push and pull, free functions over two stores (ADR 21, ADR 25).

A remote is another store, named in this store's configuration with where it
is (anything :meth:`Store.open` opens: a directory path, a ``postgresql://``
URL), or a store ``mnemo serve`` serves (``http://…``: one tenant, reached with
a token, :mod:`mnemosyne.admin.http_remote`); a caller already holding the other
store open may pass it as ``other``. History moves by hash
(:mod:`mnemosyne.admin.transfer`), the same steps in a process or over HTTP:
the receiving side gets exactly the objects it lacks, each hashed on arrival,
and its refs move last. A fetch moves remote-tracking refs
(``refs/remotes/NAME/BRANCH``) here; a push moves the remote's branch by
compare-and-swap, only forward unless forced. A transfer concerns one tenant,
or every tenant with ``all_tenants`` (not over HTTP, where a token reaches one).

Every read and write of a tenant, on either side, goes through a tenant
handle, so each transaction checks that the tenant is still the one it was
bound to. :class:`~mnemosyne.api.repo.Repo`'s ``fetch``, ``push``, ``pull``,
``remote_branches`` and ``clone`` are one-line calls into these functions.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mnemosyne.admin import bucket_transfer, wire
from mnemosyne.admin.bucket_remote import Bucket, BucketTenant
from mnemosyne.admin.transfer import (
    LocalDestination,
    LocalSender,
    Offer,
    Sender,
    Sent,
    exchange,
    transfer,
)
from mnemosyne.api._branch_service import BranchService
from mnemosyne.api._handle import Clock, Handle
from mnemosyne.api._ref_moves import hex_of, move_branch, track, track_one
from mnemosyne.api._remote_reach import connect, open_bucket, open_remote, token_file_path
from mnemosyne.api.locations import Location, store_path
from mnemosyne.api.store import Store
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import MergeStrategy
from mnemosyne.model.defaults import DEFAULT_AUTHOR, DEFAULT_BRANCH, DEFAULT_TENANT
from mnemosyne.model.reports import BucketOptions, PullReport, RefUpdate, SyncReport, TenantSync
from mnemosyne.store import remote_config, tenancy
from mnemosyne.store.kv.base import WriteTxn
from mnemosyne.store.kv.datafile import DATA_FILE, is_lmdb_file
from mnemosyne.store.refs import BRANCH_PREFIX, REMOTE_PREFIX, check_branch_name

if TYPE_CHECKING:
    from mnemosyne.admin.http_remote import HttpRemote
    from mnemosyne.history.branches import Resolution

ORIGIN = "origin"
"""The remote a clone names its source, and the default remote of fetch, pull and push."""


def fetch(
    here: Store,
    handle: Handle,
    remote: str,
    *,
    other: Store | None,
    all_tenants: bool,
    author: str,
    token: str | None = None,
    token_file: Location | None = None,
) -> SyncReport:
    """Bring in a remote's branches as remote-tracking refs (the work of :meth:`Repo.fetch`)."""
    location, there, opened = open_remote(
        here, remote, other, readonly=True, token=token, token_file=token_file
    )
    try:
        tenants = _tenants(there, remote, handle, all_tenants)
        parts = [_fetch_tenant(here, handle, there, remote, tenant, author)[0] for tenant in tenants]
    finally:
        if opened:
            there.close()
    return SyncReport(kind="fetch", remote=remote, location=location, tenants=parts)


def push(
    here: Store,
    handle: Handle,
    remote: str,
    branch: str | None,
    *,
    force: bool,
    other: Store | None,
    all_tenants: bool,
    author: str,
    token: str | None = None,
    token_file: Location | None = None,
) -> SyncReport:
    """Send a branch and move the remote's branch of that name (the work of :meth:`Repo.push`)."""
    if branch is not None:
        check_branch_name(branch)
    if not all_tenants:  # a branch that is not here is told before the remote is opened
        with handle.read() as view:
            name = branch or view.refs.head_branch(view.txn)
            if not view.refs.exists(view.txn, BRANCH_PREFIX + name) and name != view.refs.head_branch(
                view.txn
            ):
                raise NotFound(f"no branch named {name!r} to push")
    location, there, opened = open_remote(
        here, remote, other, readonly=False, token=token, token_file=token_file
    )
    try:
        if all_tenants:
            _tenants(there, remote, handle, all_tenants)  # refused over HTTP
        tenants = here.tenants() if all_tenants else [handle.tenant]
        parts = [
            _push_tenant(here, handle, there, remote, tenant, branch, force, author, skip_empty=all_tenants)
            for tenant in tenants
        ]
    finally:
        if opened:
            there.close()
    return SyncReport(kind="push", remote=remote, location=location, tenants=parts)


def pull(
    here: Store,
    handle: Handle,
    remote: str,
    branch: str | None,
    *,
    other: Store | None,
    author: str,
    message: str | None,
    strategy: MergeStrategy | None,
    resolutions: Mapping[str, Resolution] | None,
    allow_unrelated: bool = False,
    token: str | None = None,
    token_file: Location | None = None,
) -> PullReport:
    """:func:`fetch`, then merge ``REMOTE/BRANCH`` into the current branch (the work of :meth:`Repo.pull`).

    Unrelated histories are refused by the merge, after the fetch: what was
    fetched stays (as git keeps it), the current branch does not move.
    """
    if branch is not None:
        check_branch_name(branch)
    if not isinstance(allow_unrelated, bool):  # told before anything is fetched
        raise InvalidInput("allow_unrelated_histories must be True or False")
    fetched = fetch(
        here,
        handle,
        remote,
        other=other,
        all_tenants=False,
        author=author,
        token=token,
        token_file=token_file,
    )
    with handle.read() as view:
        name = branch or view.refs.head_branch(view.txn)
        tracking = f"{remote}/{name}"
        if not view.refs.exists(view.txn, REMOTE_PREFIX + tracking):
            raise NotFound(f"remote {remote!r} has no branch {name!r}")
        # NAME/BRANCH names the tracking ref unless a local branch has that name.
        shadowed = view.refs.exists(view.txn, BRANCH_PREFIX + tracking)
    source = REMOTE_PREFIX + tracking if shadowed else tracking
    merged = BranchService(handle).merge(
        source,
        resolutions=resolutions,
        strategy=strategy,
        message=message,
        author=author,
        allow_unrelated_histories=allow_unrelated,
    )
    return PullReport(fetch=fetched, merge=merged)


def clone(
    source: Location | Store,
    path: Location,
    *,
    tenant: str | None,
    all_tenants: bool,
    clock: Clock,
    author: str,
    token: str | None = None,
    token_file: Location | None = None,
    bucket: BucketOptions | None = None,
) -> tuple[Store, str]:
    """A new store at ``path`` holding the history of ``source`` (the work of :meth:`Repo.clone`).

    The store and the tenant cloned (``tenant``; when None, the default one, or
    over HTTP the one the token reaches). A clone that fails leaves nothing at
    ``path``. One killed or interrupted (``KeyboardInterrupt``) part-way leaves a
    store marked as an unfinished clone
    (:class:`remote_config.UnfinishedClone`, written with the store's first
    records): the same clone run again resumes it, fetching only what is still
    missing, and clears the mark last.
    """
    if tenant is not None:
        tenancy.check_tenant_name(tenant)
    target = store_path(path)
    existed = target.exists()
    kept: str | None = None
    other: Store | HttpRemote | Bucket
    if bucket is not None and not isinstance(bucket, BucketOptions):
        raise InvalidInput(f"bucket must be a BucketOptions, not {type(bucket).__name__}")
    if isinstance(source, Store):
        other, location = source, None
    else:
        location = remote_config.location_text(source)
        if token_file is not None:
            if not remote_config.is_http(location):
                raise InvalidInput("a token file is for a store served over HTTP (mnemo serve)")
            kept = token_file_path(token_file)
        if bucket is not None and not remote_config.is_bucket(location):
            raise InvalidInput("bucket options are for a remote in object storage (s3://BUCKET/PREFIX)")
        if remote_config.is_bucket(location):
            if all_tenants:
                raise InvalidInput(_BUCKET_ONE_TENANT.format(what="clone", remote=location))
            other = open_bucket(location, bucket, ORIGIN)
        elif remote_config.is_http(location):
            if all_tenants:
                raise InvalidInput(_ONE_TENANT.format(what="clone", remote=location))
            other = connect(location, ORIGIN, token, kept)
            tenant = tenant or other.tenant
        else:
            if "://" not in location and Path(location).resolve() == target.resolve():
                raise InvalidInput(f"{location} is the store being cloned into")
            other = Store.open(location, readonly=True)
    tenant = tenant or DEFAULT_TENANT
    try:
        return _clone_into(other, location, target, tenant, all_tenants, clock, author, kept, bucket), tenant
    except KeyboardInterrupt:
        # Stopped by the user (Ctrl-C), as SIGTERM stops it: what is marked as an unfinished
        # clone stays for the same clone to resume; a store not yet marked goes.
        if not existed and not _resumable(target):
            shutil.rmtree(target, ignore_errors=True)
        raise
    except BaseException:
        if not existed:
            shutil.rmtree(target, ignore_errors=True)  # a failed clone leaves nothing behind
        raise
    finally:
        if location is not None:
            other.close()


# -- the parts ------------------------------------------------------------------------


_ONE_TENANT = (
    "{remote} is served over HTTP, where a token reaches one tenant: {what} without --all-tenants "
    "(all_tenants), one tenant at a time, each with its own token"
)
_BUCKET_ONE_TENANT = (
    "{remote} is a bucket: {what} without --all-tenants (all_tenants), one tenant at a time (--tenant)"
)


def _tenants(there: Store | HttpRemote | Bucket, remote: str, handle: Handle, all_tenants: bool) -> list[str]:
    """The tenants a fetch from ``there`` concerns: this handle's, or (a store) every one there."""
    if not all_tenants:
        return [handle.tenant]
    if isinstance(there, Bucket):
        raise InvalidInput(_BUCKET_ONE_TENANT.format(what="fetch and push", remote=f"remote {remote!r}"))
    if not isinstance(there, Store):
        raise InvalidInput(_ONE_TENANT.format(what="fetch and push", remote=f"remote {remote!r}"))
    return there.tenants()


def _reaches(there: HttpRemote, remote: str, tenant: str) -> None:
    """Refuse a tenant other than the one the remote's token reaches."""
    if there.tenant != tenant:
        raise NotFound(
            f"remote {remote!r} has no tenant {tenant!r} that its token reaches (the token is for "
            f"tenant {there.tenant!r})"
        )


def _tenant(here: Store, handle: Handle, tenant: str) -> Handle:
    """A handle on ``tenant`` of this store (the handle itself for its own; created when absent)."""
    if tenant == handle.tenant:
        return handle
    return handle.on(here.kv, tenant, create=True, where=here.where)


def _source(handle: Handle, there: Store, remote: str, tenant: str) -> Handle:
    """A handle on ``tenant`` of the remote, which must have it."""
    try:
        return handle.on(there.kv, tenant, create=False, where=there.where)
    except NotFound:
        raise NotFound(f"remote {remote!r} has no tenant {tenant!r}") from None


def _fetch_tenant(
    here: Store, handle: Handle, there: Store | HttpRemote | Bucket, remote: str, tenant: str, author: str
) -> tuple[TenantSync, Offer]:
    """Fetch one tenant; what the remote offered too (its head and branches, for a clone)."""
    local = _tenant(here, handle, tenant)
    if isinstance(there, Bucket):
        now = handle.now()
        destination = LocalDestination(local)
        sent, commits, offer = bucket_transfer.fetch(BucketTenant(there, tenant), destination)
        branches = offer.branches
        sent.commits, moved = destination.finish(
            commits, lambda view: track(view, remote, branches, now, author)
        )
        return _part(tenant, sent, moved), offer
    if isinstance(there, Store):
        with _source(handle, there, remote, tenant).read() as source:
            return _fetch_from(LocalSender(source), local, handle, remote, tenant, author)
    _reaches(there, remote, tenant)
    return _fetch_from(there, local, handle, remote, tenant, author)


def _fetch_from(
    sender: Sender, local: Handle, handle: Handle, remote: str, tenant: str, author: str
) -> tuple[TenantSync, Offer]:
    now = handle.now()
    destination = LocalDestination(local)
    done = exchange(sender, destination, None)  # every branch there
    branches = done.offer.branches
    done.sent.commits, moved = destination.finish(
        done.commits, lambda view: track(view, remote, branches, now, author)
    )
    return _part(tenant, done.sent, moved), done.offer


def _push_tenant(
    here: Store,
    handle: Handle,
    there: Store | HttpRemote | Bucket,
    remote: str,
    tenant: str,
    branch: str | None,
    force: bool,
    author: str,
    *,
    skip_empty: bool,
) -> TenantSync:
    local = _tenant(here, handle, tenant)
    now = handle.now()
    with local.read() as source:
        name = branch or source.refs.head_branch(source.txn)
        tip = source.refs.read(source.txn, BRANCH_PREFIX + name)
        if tip is None:
            if skip_empty:
                return TenantSync(tenant=tenant, commits=0, objects=0, bytes=0, redactions=0, refs=[])
            if source.refs.exists(source.txn, BRANCH_PREFIX + name) or name == source.refs.head_branch(
                source.txn
            ):
                raise InvalidInput(f"branch {name!r} has no commits yet: nothing to push")
            raise NotFound(f"no branch named {name!r} to push")
        if isinstance(there, Bucket):
            sent, moved = _push_bucket(source, BucketTenant(there, tenant), name, tip, force)
        elif isinstance(there, Store):
            receiving = handle.on(there.kv, tenant, create=True, where=there.where)
            sent, moved = transfer(
                source,
                receiving,
                [tip],
                lambda view: move_branch(view, remote, name, tip, force, now, author),
            )
        else:
            _reaches(there, remote, tenant)
            done = exchange(LocalSender(source), there, [tip])
            who = None if author == DEFAULT_AUTHOR else author  # the server then names the token's
            move = wire.Move(remote=remote, branch=name, tip=tip, force=force, author=who)
            done.sent.commits, moved = there.finish(done.commits, move)
            sent = done.sent
    # Where the remote's branch now is, as a fetch would record it.
    local.write(lambda view: track_one(view, remote, name, tip, now, author, "push"))
    return _part(tenant, sent, [moved] if moved is not None else [])


def _push_bucket(
    source: View, there: BucketTenant, branch: str, tip: bytes, force: bool
) -> tuple[Sent, RefUpdate | None]:
    """Send ``tip``'s history to a bucket, then move its ``branch`` by compare-and-swap."""
    sent, _ = bucket_transfer.push(source, there, tip)

    def ancestor(old: bytes, new: bytes) -> bool:
        return source.graph.has(source.txn, old) and source.graph.is_ancestor(source.txn, old, new)

    moved = bucket_transfer.move_branch(there, branch, tip, force, ancestor)
    if moved is None:
        return sent, None
    old, forced = moved
    return sent, RefUpdate(ref=branch, old=hex_of(old), new=tip.hex(), forced=forced)


def _part(tenant: str, sent: Sent, refs: list[RefUpdate]) -> TenantSync:
    return TenantSync(
        tenant=tenant,
        commits=sent.commits,
        objects=sent.objects,
        bytes=sent.bytes,
        redactions=sent.redactions,
        refs=refs,
    )


def _clone_into(
    other: Store | HttpRemote | Bucket,
    location: str | None,
    target: Path,
    tenant: str,
    all_tenants: bool,
    clock: Clock,
    author: str,
    token_file: str | None,
    bucket: BucketOptions | None,
) -> Store:
    if isinstance(other, Bucket):
        if not BucketTenant(other, tenant).branches():
            raise NotFound(f"the bucket cloned has no tenant {tenant!r} (no branch of it was pushed there)")
        tenants, source = [tenant], other.url
    elif isinstance(other, Store):
        tenants = other.tenants() if all_tenants else [tenant]
        if tenant not in other.tenants():
            raise NotFound(f"the store cloned has no tenant {tenant!r}")
        source = location if location is not None else other.where
    else:
        if tenant != other.tenant:
            raise NotFound(
                f"the store cloned has no tenant {tenant!r} that the token reaches (the token is for "
                f"tenant {other.tenant!r})"
            )
        tenants, source = [tenant], other.url
    wanted = remote_config.UnfinishedClone(source=source, tenant=tenant, all_tenants=all_tenants)
    store = _destination(target, wanted)
    try:

        def begin(txn: WriteTxn) -> None:
            if remote_config.unfinished_clone(txn) is None:  # a rerun finds both already there
                remote_config.begin_clone(txn, wanted)
                if location is not None:
                    remote_config.put(txn, ORIGIN, location)
                if token_file is not None:
                    remote_config.put_token_file(txn, ORIGIN, token_file)
                if bucket is not None:
                    remote_config.put_bucket(txn, ORIGIN, bucket)

        store.kv.transact(begin)
        for name in tenants:
            handle = Handle.open(store.kv, name, create=True, where=store.where, clock=clock)
            _, offer = _fetch_tenant(store, handle, other, ORIGIN, name, author)
            _check_out(handle, offer, author)
        store.kv.transact(remote_config.finish_clone)
        return store
    except BaseException:
        store.close()
        raise


def _resumable(target: Path) -> bool:
    """Whether ``target`` holds a store marked as an unfinished clone (which a rerun resumes)."""
    try:
        with Store.open(target, readonly=True) as store:
            return store.unfinished_clone is not None
    except Exception:  # no store there, or one not yet whole: nothing to resume
        return False


def _destination(target: Path, wanted: remote_config.UnfinishedClone) -> Store:
    """The store a clone fills: a new one, or the unfinished clone of the same source it resumes.

    A store holding nothing yet (no history, no remote) may be filled too: that
    is also what a clone killed before its first record leaves.

    Raises:
        InvalidInput: a store holding anything else, or an unfinished clone asked for otherwise.
    """
    data = target / DATA_FILE
    if not (data.is_file() and is_lmdb_file(data)):
        return Store.init(target)  # which refuses anything that is not an empty directory
    store = Store.open(target)
    try:
        with store.kv.read() as txn:
            found = remote_config.unfinished_clone(txn)
            empty = found is None and tenancy.is_empty(txn) and not any(remote_config.every(txn))
        if found is None and not empty:
            raise InvalidInput(f"a store already exists at {target}")
        if found is not None and not _same_clone(found, wanted):
            raise InvalidInput(
                f"{target} is an unfinished clone of {found.described()}: run that clone again to "
                "finish it, or remove it"
            )
    except BaseException:
        store.close()
        raise
    return store


def _same_clone(found: remote_config.UnfinishedClone, wanted: remote_config.UnfinishedClone) -> bool:
    """Whether a clone asked for ``wanted`` resumes the one ``found`` unfinished.

    The tenant matters only when one tenant is cloned: with every tenant, it
    only names the one the returned handle is bound to.
    """
    return (
        found.source == wanted.source
        and found.all_tenants == wanted.all_tenants
        and (found.all_tenants or found.tenant == wanted.tenant)
    )


def _check_out(local: Handle, offer: Offer, author: str) -> None:
    """Make the cloned store's current branch (as the fetch found it) a local branch here, the current one."""
    head = offer.head or DEFAULT_BRANCH
    tip = dict(offer.branches).get(head)
    now = local.now()

    def work(view: WriteView) -> None:
        ref = BRANCH_PREFIX + head
        old = view.refs.read(view.txn, ref)
        # A resumed clone moves a branch an earlier run checked out only forward: a
        # commit made meanwhile in the unfinished store is never dropped.
        if tip is not None and old != tip and (old is None or view.graph.is_ancestor(view.txn, old, tip)):
            when = view.refs.next_time(view.txn, ref, now)
            view.refs.update(
                view.txn, ref, old, tip, when=when, author=author, reason=f"clone: from {ORIGIN}/{head}"
            )
        view.refs.set_head(view.txn, head)

    local.write(work)
