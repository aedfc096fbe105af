"""Remotes: other stores this one exchanges history with, by name (``meta`` · ``remote/<name>``).

A remote is store-wide, like a setting: every tenant of the store may fetch from
and push to it, each into its own tenant there. The value is the remote's
location as :meth:`mnemosyne.Store.open` takes it: an absolute directory path,
or a URL (``postgresql://…``), or the URL of a served store (``http://…``,
``https://…``, as ``mnemo serve`` prints it), or a prefix of an object-storage
bucket (``s3://BUCKET/PREFIX``; how it is reached, endpoint, region and profile
but never credentials, kept beside it: ``meta`` · ``remote-bucket/<name>``). A served store is reached with a
token, never kept in its URL: the path of a file holding it may be kept beside
the remote (``meta`` · ``remote-token-file/<name>``). What was fetched lands per
tenant in remote-tracking refs (``refs/remotes/<name>/<branch>``), owned by
:class:`~mnemosyne.store.refs.RefStore`.

A store that a clone is still making carries a record of that clone
(``meta`` · ``clone-unfinished``: :class:`UnfinishedClone`) from its first
write until its last, so a clone killed part-way is known as unfinished:
``fsck`` reports it, and the same clone run again finishes it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, NotFound
from mnemosyne.model.reports import BucketOptions
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn
from mnemosyne.store.kv.location import is_postgres_url, shown_url

_PREFIX = b"remote/"
_TOKEN_FILE = b"remote-token-file/"  # outside the remote/ prefix: never listed as a remote
_BUCKET = b"remote-bucket/"  # likewise: how a bucket remote is reached (never its credentials)
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_CLONE_KEY = b"clone-unfinished"  # outside the remote/ prefix: never listed as a remote


class UnfinishedClone(msgspec.Struct, frozen=True, kw_only=True):
    """The clone making this store, until it finishes: what it was asked for.

    Attributes:
        source: the store cloned, as its location was given (a URL as given,
            a path made absolute), or ``Store.where`` of a store passed open.
        tenant: the tenant asked for.
        all_tenants: whether every tenant was asked for.
    """

    source: str
    tenant: str
    all_tenants: bool

    def described(self) -> str:
        """How messages name what the clone was asked for (a URL without its password)."""
        which = "every tenant" if self.all_tenants else f"tenant {self.tenant!r}"
        return f"{shown(self.source)} ({which})"


_clone_encoder = msgspec.msgpack.Encoder()
_bucket_encoder = msgspec.msgpack.Encoder()
_bucket_decoder = msgspec.msgpack.Decoder(BucketOptions)
_clone_decoder = msgspec.msgpack.Decoder(UnfinishedClone)


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


def location_text(location: object) -> str:
    """How a remote's location is kept: a URL as given, a path made absolute.

    Raises:
        InvalidInput: neither a path nor a URL.
    """
    if not isinstance(location, str | os.PathLike):
        raise InvalidInput(f"a remote's location must be a path or a URL, not {type(location).__name__}")
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise InvalidInput("a remote's location must be a non-empty path or URL")
    if is_http(text):
        return check_http_url(text)
    if is_bucket(text):
        bucket, prefix = split_bucket_url(text)
        return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    return text if "://" in text else os.path.abspath(text)


def is_http(location: str) -> bool:
    """Whether ``location`` is the URL of a served store (``http://`` or ``https://``)."""
    return location.lower().startswith(("http://", "https://"))


def is_bucket(location: str) -> bool:
    """Whether ``location`` names a prefix of an object-storage bucket (``s3://BUCKET/PREFIX``)."""
    return location.lower().startswith("s3://")


def split_bucket_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://BUCKET/PREFIX`` (the prefix without slashes at its ends).

    Raises:
        InvalidInput: not such a URL: a user, password, port, query or fragment in
            it (endpoint, region and credentials are given apart, never in the URL),
            or a bucket name S3 refuses.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise InvalidInput(f"{url!r} is not an s3://BUCKET/PREFIX URL ({error})") from None
    if parts.scheme.lower() != "s3":
        raise InvalidInput(f"{url!r} is not an s3://BUCKET/PREFIX URL")
    if parts.username is not None or parts.password is not None or port is not None:
        raise InvalidInput(
            "a bucket's URL is s3://BUCKET/PREFIX alone: credentials come from the AWS environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE), the server from --endpoint-url"
        )
    if parts.query or parts.fragment:
        raise InvalidInput(f"{url!r}: a bucket's URL takes no query or fragment")
    bucket = parts.netloc
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
        raise InvalidInput(
            f"{bucket!r} is not a bucket name (3 to 63 lowercase letters, digits, '.' and '-')"
        )
    prefix = parts.path.strip("/")
    if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise InvalidInput(f"{url!r}: the prefix has an empty, '.' or '..' segment")
    return bucket, prefix


def put_bucket(txn: WriteTxn, name: str, options: BucketOptions) -> None:
    """Keep how remote ``name``'s bucket is reached (endpoint, region, profile: no credentials)."""
    txn.put(Space.META, _BUCKET + check_remote_name(name).encode(), _bucket_encoder.encode(options))


def bucket(txn: ReadTxn, name: str) -> BucketOptions | None:
    """How remote ``name``'s bucket is reached, if it was given.

    Raises:
        CorruptObject: the record cannot be read.
    """
    raw = txn.get(Space.META, _BUCKET + check_remote_name(name).encode())
    if raw is None:
        return None
    try:
        return _bucket_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        damaged = f"the bucket options of remote {name!r} are damaged (the store file is)"
        raise CorruptObject(damaged) from None


def check_http_url(url: str) -> str:
    """Return the URL of a served store as kept (without a trailing ``/``), else raise.

    Raises:
        InvalidInput: a URL holding a user or a token (``remote -v`` prints the
            URL: the token goes in a file or the environment instead), a query,
            a fragment, or no host.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as error:
        raise InvalidInput(f"{url!r} is not a URL a served store answers at ({error})") from None
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(
            "a served store's URL holds no user or token (it is printed by 'remote -v'): give the "
            "token in MNEMO_TOKEN or a file ('--token-file PATH'; token_file= or token= in Python)"
        )
    if not parts.hostname:
        raise InvalidInput(f"{url!r} names no host")
    if parts.query or parts.fragment:
        raise InvalidInput(f"{url!r}: a served store's URL takes no query or fragment")
    return url.rstrip("/")


def shown(location: str) -> str:
    """A remote's location as results show it: a URL without its password.

    The configuration keeps the URL as given, since connecting needs it; what
    is returned is printed and logged, and messages never show a password.
    """
    return shown_url(location) if is_postgres_url(location) else location


def check_not_itself(path: Path | None, url: str | None, location: str) -> None:
    """Refuse a remote ``location`` that is the store at ``path`` (a directory) or ``url`` itself.

    Raises:
        InvalidInput: the location names this store.
    """
    if path is not None and "://" not in location and Path(location).resolve() == path.resolve():
        raise InvalidInput(f"{location} is this store itself: a remote is another store")
    if url is not None and is_postgres_url(location):
        mine = _pg_identity(url)
        if mine is not None and mine == _pg_identity(location):
            raise InvalidInput(f"{shown(location)} is this store itself: a remote is another store")


def _pg_identity(url: str) -> tuple[str, str, str, str] | None:
    """``(host, port, database, schema)`` a store URL names, as libpq reads it; None if unreadable.

    Spellings of one server that libpq resolves alike (``localhost`` and
    ``127.0.0.1``) still differ here: what this catches is the same URL
    written twice, not every way of reaching one store. The ``PG*`` variables
    are read as libpq reads them, since they decide where the URL leads.
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
    """Forget remote ``name`` (and the path of its token file).

    Raises:
        NotFound: no remote by that name.
    """
    if not txn.delete(Space.META, _PREFIX + check_remote_name(name).encode()):
        raise NotFound(f"no remote named {name!r}")
    txn.delete(Space.META, _TOKEN_FILE + name.encode())
    txn.delete(Space.META, _BUCKET + name.encode())


def put_token_file(txn: WriteTxn, name: str, path: str) -> None:
    """Keep the path of the file holding remote ``name``'s token (the token itself is never kept)."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidInput("a token file's path must be non-empty text")
    txn.put(Space.META, _TOKEN_FILE + check_remote_name(name).encode(), path.encode())


def token_file(txn: ReadTxn, name: str) -> str | None:
    """The path of the file holding remote ``name``'s token, if one was given."""
    value = txn.get(Space.META, _TOKEN_FILE + check_remote_name(name).encode())
    return _text(value) if value is not None else None


def every(txn: ReadTxn) -> Iterator[tuple[str, str]]:
    """``(name, location)`` of every remote, in name order."""
    for key, value in txn.scan(Space.META, _PREFIX):
        yield _text(key[len(_PREFIX) :]), _text(value)


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise CorruptObject(f"a remote record is damaged ({raw!r}); the store file is damaged") from None


def begin_clone(txn: WriteTxn, clone: UnfinishedClone) -> None:
    """Record that ``clone`` is making this store (until :func:`finish_clone`)."""
    txn.put(Space.META, _CLONE_KEY, _clone_encoder.encode(clone))


def unfinished_clone(txn: ReadTxn) -> UnfinishedClone | None:
    """The clone still making this store, or None (no clone made it, or it finished).

    Raises:
        CorruptObject: the record cannot be read.
    """
    raw = txn.get(Space.META, _CLONE_KEY)
    if raw is None:
        return None
    try:
        return _clone_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise CorruptObject("the record of an unfinished clone is damaged (the store file is)") from None


def finish_clone(txn: WriteTxn) -> None:
    """Forget the record of the clone making this store: it is finished."""
    txn.delete(Space.META, _CLONE_KEY)
