"""Store configuration kept inside the store (the meta keyspace), e.g. the embedder."""

from __future__ import annotations

from mnemosyne.errors import InvalidInput
from mnemosyne.recall.embedders import embedder_named
from mnemosyne.store.kv.base import KV, ReadTxn, Space

_PREFIX = b"config/"
KEYS = {"embedder": "none"}
"""Known settings and their defaults."""


def get(txn: ReadTxn, key: str) -> str:
    """A setting's value, or its default."""
    if key not in KEYS:
        raise InvalidInput(f"unknown setting {key!r} (known: {', '.join(sorted(KEYS))})")
    value = txn.get(Space.META, _PREFIX + key.encode())
    return value.decode() if value is not None else KEYS[key]


def set_value(kv: KV, key: str, value: str) -> None:
    """Change a setting (validated first: an embedder must be loadable by name)."""
    if key not in KEYS:
        raise InvalidInput(f"unknown setting {key!r} (known: {', '.join(sorted(KEYS))})")
    if key == "embedder":
        embedder_named(value)
    kv.transact(lambda txn: txn.put(Space.META, _PREFIX + key.encode(), value.encode()))
