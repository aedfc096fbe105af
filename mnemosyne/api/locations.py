"""Where a store is: a directory path or a ``postgresql://`` URL, told apart, checked and shown.

``Store.open``/``Store.init`` take a :data:`Location`; messages name it with
:func:`shown_location` (never a password).
"""

from __future__ import annotations

import os
from pathlib import Path

from mnemosyne.errors import InvalidInput
from mnemosyne.store.kv.base import KV
from mnemosyne.store.kv.location import is_postgres_url, shown_url

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


def open_postgres(url: str, **options: bool) -> tuple[KV, str]:
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


def index_cache_dir(given: object) -> Path | None:
    """The ``index_cache`` option as a directory path (None: not given).

    Raises:
        InvalidInput: neither a path nor None.
    """
    if given is None:
        return None
    if not isinstance(given, str | os.PathLike) or not os.fspath(given):
        raise InvalidInput(f"index_cache must be a directory path, not {given!r}")
    return Path(os.fspath(given)).absolute()


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
