"""Opening a :class:`~mnemosyne.api.repo.Repo`: a new store, one at a location or open, in memory, a clone.

The work behind ``Repo.init``, ``Repo.open``, ``Repo.in_memory`` and
``Repo.clone``, whose docstrings are these functions' (ADR 63): ``Repo`` keeps
each class method's signature, since its return type names ``Repo``, which this
module, below ``repo``, does not import. Each function takes the class to make
(anything built as ``Repo`` is, from a store, a tenant handle and whether it owns
the store) and binds it to a tenant of the store it opens, closing a store it
opened if that fails.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from mnemosyne.api import _tenant_binding
from mnemosyne.api._handle import Clock, Handle
from mnemosyne.api.locations import Location
from mnemosyne.api.store import Store
from mnemosyne.model.defaults import DEFAULT_TENANT
from mnemosyne.model.reports import BucketOptions

if TYPE_CHECKING:
    from mnemosyne.recall.embedders import Embedder


class Opened(Protocol):
    """What a ``Repo`` is here: made of a store and a tenant handle, it takes an embedder."""

    def __init__(self, store: Store, handle: Handle, *, owned: bool) -> None: ...

    def use_embedder(self, embedder: Embedder | str | None) -> None: ...


R = TypeVar("R", bound=Opened)


def init(
    make: type[R],
    path: Location,
    *,
    clock: Clock,
    map_size: int,
    max_map_size: int,
    sync: bool,
    embedder: Embedder | str | None,
    index_cache: str | os.PathLike[str] | None,
) -> R:
    """Create a new store in the directory ``path`` and open its default tenant.

    Keyword arguments are those of :meth:`open` (see :meth:`Store.init`).

    Raises:
        InvalidInput: if a store (or any other file) is already there.
    """
    store = Store.init(path, map_size=map_size, max_map_size=max_map_size, sync=sync, index_cache=index_cache)
    return bound(make, store, DEFAULT_TENANT, False, clock, embedder, owned=True)


# The docstring is Repo.open's: ``make`` is the class it is called on, not an argument.
def open(  # noqa: D417
    make: type[R],
    path: Location | Store,
    *,
    tenant: str,
    create: bool,
    readonly: bool | Literal["auto"],
    clock: Clock,
    map_size: int,
    max_map_size: int,
    sync: bool,
    embedder: Embedder | str | None,
    index_cache: str | os.PathLike[str] | None,
) -> R:
    """Open one tenant of a store: a store at a location, or one already open.

    Given a location, the ``Repo`` opens the store and closes it when closed
    itself. Given an open :class:`Store` (several tenants of one store, or a
    store opened with options of its own), the ``Repo`` shares it and leaves
    it open when closed: ``Repo.open(store, tenant="acme")``.

    Args:
        path: the store directory, a ``postgresql://`` URL, or an open ``Store``.
        tenant: the tenant whose keyspace this handle is bound to.
        create: create the tenant if it does not exist yet.
        readonly: open for inspection; any write raises ``InvalidInput``.
            ``"auto"``: for writing when this process may write the store,
            else read-only (see :meth:`Store.open`).
        clock: where record time comes from.
        map_size: initial LMDB map size in bytes.
        max_map_size: the map grows on demand up to this size.
        sync: flush every commit to disk before returning (off: faster bulk
            loads, and a crash may lose the latest commits, never the store).
        embedder: the embedder for semantic search (an ``Embedder`` or a name:
            ``hash``, ``hash-DIM``, ``minilm``, ``minilm-sentences``, ``none``);
            default: the store's ``embedder`` setting.
        index_cache: a directory for the saved approximate index of semantic
            search (default: inside a store directory; none for PostgreSQL:
            see :meth:`Store.open`).

    Raises:
        NotFound: no store at ``path``, or an unknown tenant without ``create``.
        InvalidInput: a store of a newer format, or a bad tenant name; with an
            open ``Store``, an opening option (``readonly``, ``map_size``,
            ``max_map_size``, ``sync``, ``index_cache``) other than the store's own.
    """
    store, owned = _tenant_binding.open_store(
        path,
        tenant,
        readonly=readonly,
        map_size=map_size,
        max_map_size=max_map_size,
        sync=sync,
        index_cache=index_cache,
    )
    return bound(make, store, tenant, create, clock, embedder, owned=owned)


def in_memory(make: type[R], *, clock: Clock, embedder: Embedder | str | None) -> R:
    """A store held in memory only: for tests and throwaway experiments."""
    return bound(make, Store.in_memory(), DEFAULT_TENANT, False, clock, embedder, owned=True)


def clone(
    make: type[R],
    source: Location | Store,
    path: Location,
    *,
    tenant: str | None,
    all_tenants: bool,
    clock: Clock,
    author: str,
    token: str | None,
    token_file: Location | None,
    bucket: BucketOptions | None = None,
) -> R:
    """Create a store at ``path`` holding the history of the store at ``source``; open it.

    ``source`` becomes remote ``origin`` (an open ``Store`` may be given
    instead, for one not reachable by location: no remote is recorded then).
    Every branch arrives as a remote-tracking ref ``origin/BRANCH``, and the
    source's current branch as a local branch, checked out. One tenant is
    cloned (``tenant``, default ``"default"``), or every one with
    ``all_tenants``; the handle returned is bound to ``tenant``. ``path`` must
    not exist, or be an empty directory, or hold a store with nothing in it yet.

    ``source`` may be a store ``mnemo serve`` serves (``http://host:7777``):
    then the token (``token``, else the one in ``token_file``, whose path
    ``origin`` keeps for later fetches and pushes; the token itself is never
    kept) names the one tenant cloned, which ``tenant`` defaults to.

    ``source`` may be a prefix of an object-storage bucket (``s3://BUCKET/PREFIX``,
    ADR 0069): ``bucket`` says how it is reached (endpoint, region, profile;
    ``origin`` keeps them), the AWS SDK finds the credentials.

    A clone that fails leaves nothing at ``path``. One killed part-way leaves
    a store marked unfinished (:attr:`Store.unfinished_clone`; ``fsck``
    reports it): the same clone, called again, resumes it, fetching only
    what is still missing (a branch it already checked out only moves forward).

    Raises:
        InvalidInput: a store holding anything is already at ``path`` (other
            than an unfinished clone of the same source, tenant and
            ``all_tenants``), or anything else is; ``all_tenants`` over HTTP.
        NotFound: no store at ``source``, or it has no such tenant (over
            HTTP: not the token's).
        AccessDenied: a served store without a token, or one it refuses.
    """
    from mnemosyne.api import _remotes

    store, cloned = _remotes.clone(
        source,
        path,
        tenant=tenant,
        all_tenants=all_tenants,
        clock=clock,
        author=author,
        token=token,
        token_file=token_file,
        bucket=bucket,
    )
    return bound(make, store, cloned, False, clock, None, owned=True)


def bound(
    make: type[R],
    store: Store,
    tenant: str,
    create: bool,
    clock: Clock,
    embedder: Embedder | str | None,
    *,
    owned: bool,
) -> R:
    """A ``Repo`` on ``tenant`` of ``store``; a store it owns is closed if that fails."""

    def build(handle: Handle) -> R:
        repo = make(store, handle, owned=owned)
        if embedder is not None:
            repo.use_embedder(embedder)
        return repo

    return _tenant_binding.bind(store, tenant, create, clock, build, owned=owned)
