"""Store settings, kept inside the store (``meta`` · ``config/<key>``) and shared by every tenant."""

from __future__ import annotations

from mnemosyne.errors import InvalidInput
from mnemosyne.model.defaults import SETTINGS as KEYS
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

_PREFIX = b"config/"


def check_key(key: str) -> str:
    """Return ``key`` if it names a setting.

    Raises:
        InvalidInput: an unknown setting.
    """
    if key not in KEYS:
        raise InvalidInput(f"unknown setting {key!r} (known: {', '.join(sorted(KEYS))})")
    return key


def get(txn: ReadTxn, key: str) -> str:
    """A setting's value, or its default."""
    value = txn.get(Space.META, _PREFIX + check_key(key).encode())
    return value.decode() if value is not None else KEYS[key]


def put(txn: WriteTxn, key: str, value: str) -> None:
    """Change a setting (its value checked by the caller, who knows what it means)."""
    txn.put(Space.META, _PREFIX + check_key(key).encode(), value.encode())
