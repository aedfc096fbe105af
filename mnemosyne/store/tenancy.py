"""Tenants: separate keyspaces inside one store, behind a 4-byte key scope.

Every key of a tenant's objects, refs, reflogs and indexes starts with its scope,
so a handle bound to one tenant cannot reach another's data by id, hash, hash
prefix, ref or time. The registry (name → scope) lives in the meta keyspace; the
default tenant has scope 0, and scopes are never reused.
"""

from __future__ import annotations

import re
from pathlib import Path

from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.store.kv.base import KV, ReadTxn, Space, WriteTxn
from mnemosyne.store.refs import DEFAULT_BRANCH, RefStore

FORMAT = 1
"""Store format version written by this release."""

DEFAULT_TENANT = "default"
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FORMAT_KEY = b"format"
_TENANT_KEY = b"tenant/"
_NEXT_TENANT_KEY = b"next-tenant"


def check_tenant_name(name: str) -> str:
    """Return ``name`` if it may name a tenant, else raise :class:`InvalidInput`."""
    if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
        raise InvalidInput(f"{name!r} is not a tenant name ([a-z0-9][a-z0-9_-]{{0,63}})")
    return name


def initialise(txn: WriteTxn) -> None:
    """Write the meta records of a new store and its default tenant."""
    txn.put(Space.META, _FORMAT_KEY, str(FORMAT).encode())
    txn.put(Space.META, _TENANT_KEY + DEFAULT_TENANT.encode(), scope(0))
    txn.put(Space.META, _NEXT_TENANT_KEY, (1).to_bytes(4, "big"))
    RefStore(scope(0)).set_head(txn, DEFAULT_BRANCH)


def scope(number: int) -> bytes:
    """The key scope of tenant number ``number``."""
    return number.to_bytes(4, "big")


def open_tenant(kv: KV, tenant: str, create: bool, where: Path) -> bytes:
    """Check the store's format and return the tenant's scope, creating it if asked.

    Raises:
        NotFound: no store, or an unknown tenant without ``create``.
        InvalidInput: the store has a newer format.
    """
    with kv.read() as txn:
        fmt = txn.get(Space.META, _FORMAT_KEY)
        if fmt is None:
            raise NotFound(f"no store at {where}")
        if int(fmt) > FORMAT:
            raise InvalidInput(
                f"the store at {where} has format {int(fmt)}; this Mnemosyne reads up to {FORMAT}"
            )
        found = txn.get(Space.META, _TENANT_KEY + tenant.encode())
    if found is not None:
        return found
    if not create:
        raise NotFound(f"no tenant named {tenant!r}; create it first")

    def work(txn: WriteTxn) -> bytes:
        existing = txn.get(Space.META, _TENANT_KEY + tenant.encode())
        if existing is not None:
            return existing
        counter = txn.get(Space.META, _NEXT_TENANT_KEY) or (1).to_bytes(4, "big")
        number = int.from_bytes(counter, "big")
        txn.put(Space.META, _NEXT_TENANT_KEY, (number + 1).to_bytes(4, "big"))
        txn.put(Space.META, _TENANT_KEY + tenant.encode(), scope(number))
        RefStore(scope(number)).set_head(txn, DEFAULT_BRANCH)
        return scope(number)

    return kv.transact(work)


def check_bound(txn: ReadTxn, tenant: str, scope: bytes) -> None:
    """Refuse a handle whose tenant was dropped (or dropped and created again since).

    Raises:
        NotFound: the registry no longer maps ``tenant`` to ``scope``.
    """
    if txn.get(Space.META, _TENANT_KEY + tenant.encode()) != scope:
        raise NotFound(f"tenant {tenant!r} was dropped after this handle opened it; open it again")


def tenant_names(txn: ReadTxn) -> list[str]:
    """Names of the store's tenants, sorted."""
    return sorted(key[len(_TENANT_KEY) :].decode() for key, _ in txn.scan(Space.META, _TENANT_KEY))


def drop_tenant(txn: WriteTxn, name: str) -> int:
    """Delete every key of a tenant and its registry entry; return the number of keys.

    Raises:
        NotFound: no such tenant.
    """
    found = txn.get(Space.META, _TENANT_KEY + name.encode())
    if found is None:
        raise NotFound(f"no tenant named {name!r}")
    count = 0
    for space in (s for s in Space if s is not Space.META):
        keys = [key for key, _ in txn.scan(space, found)]
        for key in keys:
            txn.delete(space, key)
        count += len(keys)
    pending = [key for key, _ in txn.scan(Space.META, b"gc-pending/" + found)]
    for key in pending:
        txn.delete(Space.META, key)
    txn.delete(Space.META, _TENANT_KEY + name.encode())
    return count
