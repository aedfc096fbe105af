"""Reaching a remote: open a store where it is, or connect to one served over HTTP with a token.

The token of a served remote comes from the caller, else from a token file (this
command's, else the remote's own), read to a bound. :mod:`mnemosyne.api._remotes`
moves history once a remote is reached.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from mnemosyne.api.locations import Location
from mnemosyne.api.store import Store
from mnemosyne.errors import AccessDenied, InvalidInput
from mnemosyne.model.reports import BucketOptions
from mnemosyne.store import remote_config

if TYPE_CHECKING:
    from mnemosyne.admin.bucket_remote import Bucket
    from mnemosyne.admin.http_remote import HttpRemote


def open_remote(
    here: Store,
    remote: str,
    other: Store | None,
    *,
    readonly: bool,
    token: str | None,
    token_file: Location | None = None,
) -> tuple[str, Store | HttpRemote | Bucket, bool]:
    """``(location as shown, the remote opened, whether this call opened it)`` of a remote.

    Over HTTP the token is ``token``, else the one in ``token_file`` (this call's),
    else the one in the remote's own token file. A bucket is reached as its
    remote says (endpoint, region, profile), with the AWS SDK's credentials.
    """
    remote_config.check_remote_name(remote)
    given = token_file_path(token_file) if token_file is not None else None
    if other is not None:
        known = {found.name: found.location for found in here.remotes()}.get(remote)
        return known or other.where, other, False
    location = here.remote_location(remote)
    if remote_config.is_http(location):
        kept = next((found.token_file for found in here.remotes() if found.name == remote), None)
        return location, connect(location, remote, token, given or kept), True
    if given is not None:
        raise InvalidInput(f"remote {remote!r} is not served over HTTP: a token file is for one that is")
    if remote_config.is_bucket(location):
        if token is not None:
            raise InvalidInput(f"remote {remote!r} is a bucket: it takes AWS credentials, not a token")
        options = next((found.bucket for found in here.remotes() if found.name == remote), None)
        return location, open_bucket(location, options, remote), True
    return remote_config.shown(location), Store.open(location, readonly=readonly), True


def connect(url: str, remote: str, token: str | None, token_file: str | None) -> HttpRemote:
    """The served store at ``url``, reached with ``token``, else the one in ``token_file``.

    Raises:
        AccessDenied: no token given, or the server does not honour it.
        InvalidInput: a token file that cannot be read, or httpx is not installed.
        NotFound: nothing answers at ``url``.
    """
    if token is not None and not isinstance(token, str):
        raise InvalidInput(f"token must be text, not {type(token).__name__}")
    if token is None:
        if token_file is None:
            raise AccessDenied(
                f"remote {remote!r} ({url}) is served over HTTP and needs a token: give the command "
                "--token-file PATH, set MNEMO_TOKEN, or give the remote a token file (remote add NAME URL "
                "--token-file PATH); in Python, token= or token_file="
            )
        token = read_token(remote, token_file)
    try:
        from mnemosyne.admin.http_remote import HttpRemote
    except ImportError:
        raise InvalidInput(
            f"remote {remote!r} is served over HTTP, which needs httpx: pip install 'mnemosyne[client]'"
        ) from None
    return HttpRemote(url, token, name=remote)


def open_bucket(url: str, options: BucketOptions | None, remote: str) -> Bucket:
    """The bucket prefix at ``url`` (``s3://BUCKET/PREFIX``), reached as ``options`` say.

    Raises:
        InvalidInput: a malformed URL, or boto3 is not installed.
    """
    from mnemosyne.admin.bucket_remote import Bucket

    return Bucket(url, options, name=remote)


MAX_TOKEN_FILE = 64 * 1024
"""Most bytes read from a token file: a token is a line; a larger file is not one."""


def read_token(remote: str, path: str) -> str:
    """The token in the file at ``path``, for ``remote`` (named in the errors).

    Raises:
        InvalidInput: the file cannot be read, is not text, is empty, or is too large.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOKEN_FILE + 1)
    except OSError as error:
        raise InvalidInput(
            f"remote {remote!r}: cannot read its token file {path}: {error.strerror}"
        ) from None
    if len(raw) > MAX_TOKEN_FILE:
        raise InvalidInput(f"remote {remote!r}: its token file {path} is larger than a token file can be")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidInput(f"remote {remote!r}: its token file {path} is not text") from None
    if not text:
        raise InvalidInput(f"remote {remote!r}: its token file {path} is empty")
    return text


def token_file_path(path: Location) -> str:
    """``path`` made absolute, checked to name a file.

    Raises:
        InvalidInput: not a path, or no such file.
    """
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        raise InvalidInput("token_file must be the path of a file")
    text = os.path.abspath(os.fspath(path))
    if not Path(text).is_file():
        raise InvalidInput(f"token file {text}: no such file")
    return str(text)
