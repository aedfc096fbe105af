"""A store's remotes: the other stores it names, kept store-wide for every tenant.

:class:`StoreRemotes` is the part of :class:`~mnemosyne.api.store.Store` that
adds, lists and removes them; ``Store``'s remote methods (documented there) hand
their work to it. What a remote is for (fetch, push, clone) is the porcelain's:
``mnemosyne.api._remotes``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from mnemosyne.api._handle import Clock, Handle, read_clock
from mnemosyne.api.locations import Location
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.model.reports import BucketOptions, Remote
from mnemosyne.store import remote_config, tenancy
from mnemosyne.store.kv.base import KV, WriteTxn
from mnemosyne.store.refs import REMOTE_PREFIX


class StoreRemotes:
    """The remotes of the store on ``kv`` at ``path`` or ``url`` (where it is, so it cannot name itself)."""

    def __init__(self, kv: KV, path: Path | None, url: str | None) -> None:
        """Hold the store's backend and where it is."""
        self._kv = kv
        self._path = path
        self._url = url

    def add(
        self,
        name: str,
        location: Location,
        *,
        token_file: Location | None,
        bucket: BucketOptions | None = None,
    ) -> Remote:
        """Name another store as a remote (see :meth:`Store.add_remote`)."""
        remote_config.check_remote_name(name)
        text = remote_config.location_text(location)
        remote_config.check_not_itself(self._path, self._url, text)
        kept = None
        if token_file is not None:
            if not remote_config.is_http(text):
                raise InvalidInput("a token file is for a remote served over HTTP (mnemo serve)")
            if not isinstance(token_file, str | os.PathLike) or not os.fspath(token_file):
                raise InvalidInput("token_file must be the path of a file")
            kept = os.path.abspath(os.fspath(token_file))
            if not Path(kept).is_file():
                raise InvalidInput(f"token file {kept}: no such file")
        if bucket is not None:
            if not isinstance(bucket, BucketOptions):
                raise InvalidInput(f"bucket must be a BucketOptions, not {type(bucket).__name__}")
            if not remote_config.is_bucket(text):
                raise InvalidInput("bucket options are for a remote in object storage (s3://BUCKET/PREFIX)")
            bucket = _checked(bucket)

        def work(txn: WriteTxn) -> None:
            remote_config.put(txn, name, text)
            if kept is not None:
                remote_config.put_token_file(txn, name, kept)
            if bucket is not None:
                remote_config.put_bucket(txn, name, bucket)

        self._kv.transact(work)
        return Remote(name=name, location=remote_config.shown(text), token_file=kept, bucket=bucket)

    def remove(self, name: str, *, author: str, clock: Clock) -> int:
        """Forget a remote and its tracking refs (see :meth:`Store.remove_remote`)."""
        remote_config.check_remote_name(name)

        def work(txn: WriteTxn) -> int:
            try:
                remote_config.delete(txn, name)
                configured = True
            except NotFound:
                # Tracking refs may outlive their remote's entry (an imported export carries
                # the refs, not the remotes): removing the name still drops them.
                configured = False
            dropped = 0
            now = read_clock(clock)
            for tenant in tenancy.tenant_names(txn):
                scope = tenancy.lookup(txn, tenant)
                assert scope is not None  # listed in this same transaction
                refs = Handle(self._kv, scope, tenant, clock).within(txn).refs
                for short, tip in list(refs.tracking(txn, name)):
                    ref = REMOTE_PREFIX + short
                    when = refs.next_time(txn, ref, now)
                    refs.update(txn, ref, tip, None, when=when, author=author, reason=f"remote remove {name}")
                    dropped += 1
            if not configured and not dropped:
                raise NotFound(f"no remote named {name!r}")
            return dropped

        return self._kv.transact(work)

    def every(self) -> list[Remote]:
        """The store's remotes, in name order."""
        with self._kv.read() as txn:
            return [
                Remote(
                    name=name,
                    location=remote_config.shown(where),
                    token_file=remote_config.token_file(txn, name),
                    bucket=remote_config.bucket(txn, name),
                )
                for name, where in remote_config.every(txn)
            ]

    def unfinished_clone(self) -> str | None:
        """What an unfinished clone making this store was asked for, else None."""
        with self._kv.read() as txn:
            found = remote_config.unfinished_clone(txn)
        return found.described() if found is not None else None

    def bucket(self, name: str) -> BucketOptions | None:
        """How remote ``name``'s bucket is reached, as kept (None: as the AWS SDK finds it)."""
        with self._kv.read() as txn:
            return remote_config.bucket(txn, name)

    def location(self, name: str) -> str:
        """Where remote ``name`` is, as kept (see :meth:`Store.remote_location`)."""
        with self._kv.read() as txn:
            location = remote_config.get(txn, name)
        remote_config.check_not_itself(self._path, self._url, location)
        return location


def _checked(options: BucketOptions) -> BucketOptions:
    """``options`` with empty values as None; an endpoint that is not an http(s) URL refused.

    Raises:
        InvalidInput: a value that is not text, or an endpoint URL with a user or password in it.
    """
    values = {}
    for field in ("endpoint_url", "region", "profile"):
        value = getattr(options, field)
        if value is not None and (not isinstance(value, str) or "\x00" in value):
            raise InvalidInput(f"bucket {field} must be text")
        values[field] = value.strip() or None if value is not None else None
    endpoint = values["endpoint_url"]
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"{endpoint!r} is not an endpoint URL (http://HOST:PORT or https://HOST)")
        if parts.username is not None or parts.password is not None:
            raise InvalidInput(
                "an endpoint URL holds no credentials: the AWS SDK reads them from AWS_ACCESS_KEY_ID "
                "and AWS_SECRET_ACCESS_KEY, or a profile"
            )
    return BucketOptions(**values)
