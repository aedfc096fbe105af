"""Remotes: other stores this one exchanges history with, by name (``meta`` · ``remote/<name>``).

A remote is store-wide, like a setting: every tenant of the store may fetch from
and push to it, each into its own tenant there. The value is the remote's
location as :meth:`mnemosyne.Store.open` takes it: an absolute directory path,
or a URL (``postgresql://…``). What was fetched lands per tenant in
remote-tracking refs (``refs/remotes/<name>/<branch>``), owned by
:class:`~mnemosyne.store.refs.RefStore`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

_PREFIX = b"remote/"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def check_remote_name(name: str) -> str:
    """Return ``name`` if it may name a remote, else raise :class:`InvalidInput`.

    One segment (no ``/``), so ``NAME/BRANCH`` always splits at its first ``/``.
    """
    if (
        not isinstance(name, str)
        or not _NAME.fullmatch(name)
        or ".." in name
        or name.endswith((".", ".lock"))
        or name == "HEAD"
    ):
        raise InvalidInput(
            f"{name!r} is not a valid remote name (letters, digits, '.', '_', '-'; no '/'; at most 64)"
        )
    return name


def get(txn: ReadTxn, name: str) -> str:
    """The location of remote ``name``.

    Raises:
        NotFound: no remote by that name.
    """
    value = txn.get(Space.META, _PREFIX + check_remote_name(name).encode())
    if value is None:
        raise NotFound(f"no remote named {name!r} (add one with 'mnemo remote add {name} URL')")
    return _text(value)


def put(txn: WriteTxn, name: str, location: str, *, replace: bool = False) -> None:
    """Record remote ``name`` at ``location``.

    Raises:
        InvalidInput: the remote exists (unless ``replace``), or the location is empty.
    """
    if not isinstance(location, str) or not location or "\x00" in location:
        raise InvalidInput("a remote's location must be a non-empty path or URL")
    if not txn.put(
        Space.META, _PREFIX + check_remote_name(name).encode(), location.encode(), overwrite=replace
    ):
        raise InvalidInput(f"remote {name!r} already exists (remove it first)")


def delete(txn: WriteTxn, name: str) -> None:
    """Forget remote ``name``.

    Raises:
        NotFound: no remote by that name.
    """
    if not txn.delete(Space.META, _PREFIX + check_remote_name(name).encode()):
        raise NotFound(f"no remote named {name!r}")


def every(txn: ReadTxn) -> Iterator[tuple[str, str]]:
    """``(name, location)`` of every remote, in name order."""
    for key, value in txn.scan(Space.META, _PREFIX):
        yield _text(key[len(_PREFIX) :]), _text(value)


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise CorruptObject(f"a remote record is damaged ({raw!r}); the store file is damaged") from None
