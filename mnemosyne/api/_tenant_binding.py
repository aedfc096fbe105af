"""Binding a :class:`~mnemosyne.api.repo.Repo` to one tenant of a store.

Opening the store a ``Repo`` is given (a location it opens and owns, or an
open :class:`~mnemosyne.api.store.Store` it shares, whose opening options are
the store's own), opening the tenant's handle (closing an owned store when that
fails), and the checks that a binding still holds or is not undone from
inside. Private to the API: users reach all of it through ``Repo``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Literal, TypeVar

from mnemosyne.api._handle import Clock, Handle
from mnemosyne.api.locations import Location
from mnemosyne.api.store import Store
from mnemosyne.errors import InvalidInput
from mnemosyne.store import tenancy
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE

R = TypeVar("R")


def open_store(
    path: Location | Store,
    tenant: str,
    *,
    readonly: bool | Literal["auto"],
    map_size: int,
    max_map_size: int,
    sync: bool,
    index_cache: str | os.PathLike[str] | None,
) -> tuple[Store, bool]:
    """The store for ``Repo.open`` of ``tenant``, and whether the ``Repo`` owns it (opened it).

    Raises:
        NotFound: no store at ``path``.
        InvalidInput: a store of a newer format, or a bad tenant name; with an
            open ``Store``, an opening option other than the store's own.
    """
    tenancy.check_tenant_name(tenant)
    if isinstance(path, Store):
        changed = [
            name
            for name, given, default in (
                ("readonly", readonly is True, path.readonly),
                ("map_size", map_size, DEFAULT_MAP_SIZE),
                ("max_map_size", max_map_size, DEFAULT_MAX_MAP_SIZE),
                ("sync", sync, True),
                ("index_cache", index_cache, None),
            )
            if given != default and not (name == "readonly" and not given)
        ]
        if changed:
            raise InvalidInput(
                f"{', '.join(changed)} belong to the store: give them to Store.open, "
                f"not to Repo.open of a store already open"
            )
        return path, False
    store = Store.open(
        path,
        readonly=readonly,
        map_size=map_size,
        max_map_size=max_map_size,
        sync=sync,
        index_cache=index_cache,
    )
    return store, True


def bind(
    store: Store,
    tenant: str,
    create: bool,
    clock: Clock,
    build: Callable[[Handle], R],
    *,
    owned: bool,
) -> R:
    """What ``build`` makes of a handle on ``tenant`` of ``store``.

    A store the ``Repo`` owns is closed if opening the handle or ``build`` fails.
    """
    try:
        tenancy.check_tenant_name(tenant)
        handle = Handle.open(store.kv, tenant, create=create, where=store.where, clock=clock)
        return build(handle)
    except BaseException:
        if owned:
            store.close()
        raise


def dropped(store: Store, handle: Handle) -> bool:
    """Whether ``handle``'s tenant was dropped (or dropped and made again) since it opened."""
    with store.kv.read() as txn:
        return tenancy.lookup(txn, handle.tenant) != handle.scope


def drop_other_tenant(store: Store, handle: Handle, name: str) -> int:
    """Delete tenant ``name`` of ``store``, refusing ``handle``'s own (see :meth:`Store.drop_tenant`).

    Raises:
        InvalidInput: it is this handle's tenant, or the default tenant.
        NotFound: no such tenant.
    """
    tenancy.check_tenant_name(name)
    if name == handle.tenant:
        raise InvalidInput(f"cannot drop tenant {name!r} from a handle bound to it")
    return store.drop_tenant(name)
