"""Tenants: separate keyspaces inside one store, behind a 4-byte key scope.

Every key of a tenant's objects, refs, reflogs and indexes starts with its scope,
so a handle bound to one tenant cannot reach another's data by id, hash, hash
prefix, ref or time. The registry (name → scope) and the store's format number
live in the ``meta`` keyspace, owned here; the default tenant has scope 0, and
scopes are never reused.
"""

from __future__ import annotations

import re

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.model.defaults import DEFAULT_BRANCH, DEFAULT_TENANT
from mnemosyne.store.kv.base import KV, ReadTxn, Space, WriteTxn
from mnemosyne.store.pending import PendingMarks
from mnemosyne.store.refs import RefStore

FORMAT = 1
"""Store format version written by this release."""

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FORMAT_KEY = b"format"
_TENANT_KEY = b"tenant/"
_NEXT_TENANT_KEY = b"next-tenant"


def check_tenant_name(name: str) -> str:
    """Return ``name`` if it may name a tenant, else raise :class:`InvalidInput`."""
    if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
        raise InvalidInput(f"{name!r} is not a tenant name ([a-z0-9][a-z0-9_-]{{0,63}})")
    return name


def scope(number: int) -> bytes:
    """The key scope of tenant number ``number``."""
    return number.to_bytes(4, "big")


def initialise(txn: WriteTxn) -> None:
    """Write the meta records of a new store and its default tenant."""
    txn.put(Space.META, _FORMAT_KEY, str(FORMAT).encode())
    txn.put(Space.META, _TENANT_KEY + DEFAULT_TENANT.encode(), scope(0))
    txn.put(Space.META, _NEXT_TENANT_KEY, scope(1))
    RefStore(scope(0)).set_head(txn, DEFAULT_BRANCH)


def store_format(txn: ReadTxn) -> int | None:
    """The store's format number; None when the keyspaces hold no store."""
    found = txn.get(Space.META, _FORMAT_KEY)
    return int(found) if found is not None else None


def check_format(txn: ReadTxn, where: str) -> None:
    """Refuse what is not a store, or a store of a newer format.

    Raises:
        NotFound: no store there.
        InvalidInput: the store has a newer format.
    """
    fmt = store_format(txn)
    if fmt is None:
        raise NotFound(f"no store at {where}")
    if fmt > FORMAT:
        raise InvalidInput(f"the store at {where} has format {fmt}; this Mnemosyne reads up to {FORMAT}")


def lookup(txn: ReadTxn, name: str) -> bytes | None:
    """The scope of tenant ``name``, or None."""
    return txn.get(Space.META, _TENANT_KEY + name.encode())


def create(txn: WriteTxn, name: str) -> bytes:
    """The scope of tenant ``name``, registered (with its ``HEAD``) in ``txn`` if new."""
    existing = lookup(txn, name)
    if existing is not None:
        return existing
    counter = txn.get(Space.META, _NEXT_TENANT_KEY) or scope(1)
    number = int.from_bytes(counter, "big")
    txn.put(Space.META, _NEXT_TENANT_KEY, scope(number + 1))
    txn.put(Space.META, _TENANT_KEY + name.encode(), scope(number))
    RefStore(scope(number)).set_head(txn, DEFAULT_BRANCH)
    return scope(number)


def open_tenant(kv: KV, tenant: str, create_it: bool, where: str) -> bytes:
    """Check the store's format and return the tenant's scope, creating it if asked.

    Raises:
        NotFound: no store, or an unknown tenant without ``create_it``.
        InvalidInput: the store has a newer format.
    """
    with kv.read() as txn:
        check_format(txn, where)
        found = lookup(txn, tenant)
    if found is not None:
        return found
    if not create_it:
        raise NotFound(f"no tenant named {tenant!r}; create it first")
    return kv.transact(lambda txn: create(txn, tenant))


def check_bound(txn: ReadTxn, tenant: str, bound: bytes) -> None:
    """Refuse a handle whose tenant was dropped (or dropped and created again since).

    Raises:
        NotFound: the registry no longer maps ``tenant`` to ``bound``.
    """
    if lookup(txn, tenant) != bound:
        raise NotFound(f"tenant {tenant!r} was dropped after this handle opened it; open it again")


def tenant_names(txn: ReadTxn) -> list[str]:
    """Names of the store's tenants, sorted."""
    names = []
    for key, _ in txn.scan(Space.META, _TENANT_KEY):
        try:
            names.append(key[len(_TENANT_KEY) :].decode())
        except UnicodeDecodeError:
            raise CorruptObject(f"a tenant name is damaged ({key!r}); the store file is damaged") from None
    return sorted(names)


def is_empty(txn: ReadTxn) -> bool:
    """Whether the store holds nothing but tenants with no data (each with only its ``HEAD``)."""
    head = RefStore.HEAD_KEY
    for space in Space:
        if space is Space.META:
            continue
        for key, value in txn.scan(space, b""):
            if key[len(scope(0)) :] == head and RefStore.is_symbolic(value):
                continue  # a tenant's HEAD
            return False
    return True


def check_droppable(txn: ReadTxn, name: str) -> bytes:
    """The scope of tenant ``name``, if it may be dropped.

    Raises:
        InvalidInput: it is the default tenant (the store starts there), or a bad name.
        NotFound: no such tenant.
    """
    check_tenant_name(name)
    if name == DEFAULT_TENANT:
        raise InvalidInput("the default tenant cannot be dropped (it is where the store starts)")
    found = lookup(txn, name)
    if found is None:
        raise NotFound(f"no tenant named {name!r}")
    return found


def drop(txn: WriteTxn, name: str) -> int:
    """Delete every key of a tenant and its registry entry; return the number of keys.

    Raises:
        InvalidInput: it is the default tenant (the store starts there).
        NotFound: no such tenant.
    """
    found = check_droppable(txn, name)
    count = 0
    # The scope prefixes every key of the tenant in every keyspace but meta: deleting
    # by scope needs no knowledge of what each keyspace holds.
    for space in Space:
        if space is Space.META:
            continue
        keys = [key for key, _ in txn.scan(space, found)]
        for key in keys:
            txn.delete(space, key)
        count += len(keys)
    PendingMarks(found).clear(txn)
    txn.delete(Space.META, _TENANT_KEY + name.encode())
    return count
