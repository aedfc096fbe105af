"""A prefix of an object-storage bucket as a remote: its layout, read and written through boto3 (ADR 0069).

A bucket is no store: nothing runs there. What a push leaves in it, under
``s3://BUCKET/PREFIX/<tenant>/``, is enough for any later fetch or clone:

- ``packs/<name>``: objects, their exact stored bytes, in a msgpack
  :class:`Pack` of a few megabytes; ``name`` is the blake3 of the ids it was
  written with, so a push run again writes the same packs and finds them there
  (written once: an existing pack is never sent again). Erasure alone rewrites
  a pack, without the erased versions, under the same name.
- ``parts/<name>``: a :class:`Part`, written once every pack it names is: the
  commits (with their parents) whose objects those packs hold, and the parts
  written before it by the same push (whose objects its packs leave out). A
  part's presence says its objects are all there.
- ``redactions/<version hex>``: a redaction record as the store keeps it; the
  version's bytes are in no pack.
- ``refs/heads/<branch>``: the branch's tip, 64 hex digits, moved last, by
  compare-and-swap on its ETag (ADR 0070); ``HEAD``: the name of the branch a
  clone checks out (the first branch pushed).

:class:`Bucket` is one prefix reached with one client (its errors become the
library's: :func:`_call`), :class:`BucketTenant` one tenant's keys under it.
:mod:`mnemosyne.admin.bucket_transfer` moves history with them. Needs boto3
(``pip install 'mnemosyne[s3]'``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from mnemosyne.admin.wire import Id
from mnemosyne.errors import AccessDenied, CorruptObject, InvalidInput, MnemoError, NotFound
from mnemosyne.model import codec
from mnemosyne.model.reports import BucketOptions
from mnemosyne.store import remote_config

T = TypeVar("T")

WORKERS = 8
"""Requests under way at once (uploads of packs, reads of parts and packs): a bucket answers
each in tens of milliseconds, so throughput comes from several at a time."""

ATTEMPTS = 3
"""Tries of each request (boto3's standard retry mode: a throttled or broken request is sent
again after a short back-off; a push cut for longer fails and is resumed by running it again)."""


_SESSIONS: dict[tuple[str | None, str | None], Any] = {}
"""boto3 sessions of this process, by profile and region."""
_SESSIONS_LOCK = threading.Lock()


class Pack(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Objects: ids and their stored bytes, in order."""

    ids: list[Id]
    data: list[bytes]


class Part(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one step of a push wrote, named once all of it is there.

    Attributes:
        commits: ``(id, parents)`` of the commits whose objects the packs hold, parents first.
        packs: ``(name, ids)`` of each pack written for them.
        after: the parts whose objects these packs leave out (written before by
            the same push): a fetch that needs this part reads those too.
    """

    commits: list[tuple[Id, list[Id]]]
    packs: list[tuple[str, list[Id]]]
    after: list[str] = []


_pack_decoder = msgspec.msgpack.Decoder(Pack)
_part_decoder = msgspec.msgpack.Decoder(Part)
_encoder = msgspec.msgpack.Encoder()


def name_of(ids: list[bytes]) -> str:
    """The name of a pack or part written for ``ids``: their blake3, in hex."""
    return codec.object_id(b"".join(ids)).hex()


class Catalog:
    """The complete parts of a tenant in the bucket: which commits it holds, and in which packs."""

    def __init__(self) -> None:
        self.parts: dict[str, Part] = {}
        self.commits: dict[bytes, tuple[bytes, ...]] = {}
        """Each commit held, with its parents."""
        self.part_of: dict[bytes, str] = {}
        """The part holding each commit."""

    def add(self, name: str, part: Part) -> None:
        """Count ``part`` in (written, or read from the bucket)."""
        self.parts[name] = part
        for oid, parents in part.commits:
            self.commits[oid] = tuple(parents)
            self.part_of.setdefault(oid, name)

    def holding(self, ids: set[bytes]) -> list[str]:
        """The packs listed as holding any of ``ids``."""
        return sorted({pack for part in self.parts.values() for pack, held in part.packs if ids & set(held)})


class Bucket:
    """One prefix of a bucket, reached with one boto3 client (thread-safe: requests go from threads).

    Args:
        url: ``s3://BUCKET/PREFIX``.
        options: endpoint, region and profile (None each: as the AWS SDK finds them).
        name: the remote's name here, for messages.

    Raises:
        InvalidInput: a malformed URL, or boto3 is not installed.
        AccessDenied: the profile named is not configured.
    """

    def __init__(self, url: str, options: BucketOptions | None, *, name: str) -> None:
        self.bucket, self.prefix = remote_config.split_bucket_url(url)
        self.name = name
        self.url = url
        self.requests = 0
        """Requests sent so far (for the benchmarks and the tests)."""
        self._lock = threading.Lock()
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise InvalidInput(
                f"remote {name!r} is an object-storage bucket, which needs boto3: pip install 'mnemosyne[s3]'"
            ) from None
        options = options or BucketOptions()
        config = Config(
            retries={"max_attempts": ATTEMPTS, "mode": "standard"},
            max_pool_connections=WORKERS * 2,
            connect_timeout=10,
            read_timeout=120,
        )

        def client() -> Any:
            with _SESSIONS_LOCK:
                # A session loads the service's model (~0.4 s) once; its clients reuse it.
                key = (options.profile, options.region)
                session = _SESSIONS.get(key)
                if session is None:
                    session = _SESSIONS[key] = boto3.session.Session(
                        profile_name=options.profile, region_name=options.region
                    )
                return session.client("s3", endpoint_url=options.endpoint_url, config=config)

        self.client: Any = _call(self, "open", client)
        self.workers = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mnemo-bucket")

    def close(self) -> None:
        """Wait for the requests under way, then release the connections."""
        self.workers.shutdown(wait=True, cancel_futures=True)
        self.client.close()

    def key(self, *parts: str) -> str:
        """The bucket key of ``parts`` under the prefix."""
        return "/".join((self.prefix, *parts)) if self.prefix else "/".join(parts)

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def get(self, key: str) -> tuple[bytes, str] | None:
        """``(bytes, ETag)`` of ``key``, or None when there is none."""
        self._count()
        request = functools.partial(self.client.get_object, Bucket=self.bucket, Key=key)
        found = _call(self, f"reading {key}", request, missing=True)
        if found is None:
            return None
        body = _call(self, f"reading {key}", found["Body"].read)
        return bytes(body), str(found["ETag"])

    def put(self, key: str, data: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        """Write ``key``; its new ETag. ``if_match``/``if_absent``: only if it is still that one / none.

        Raises:
            Precondition: the condition did not hold (another writer was first).
        """
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data}
        if if_match is not None:
            args["IfMatch"] = if_match
        if if_absent:
            args["IfNoneMatch"] = "*"
        self._count()
        return str(_call(self, f"writing {key}", lambda: self.client.put_object(**args))["ETag"])

    def delete(self, key: str) -> None:
        """Remove ``key`` (none there is no error)."""
        self._count()
        _call(self, f"deleting {key}", lambda: self.client.delete_object(Bucket=self.bucket, Key=key))

    def keys(self, under: str) -> Iterator[str]:
        """The keys under ``under`` (a folder: ends with ``/``), each without it, in key order."""
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": under}
            if token:
                args["ContinuationToken"] = token
            self._count()
            page = _call(self, f"listing {under}", functools.partial(self.client.list_objects_v2, **args))
            for item in page.get("Contents", ()):
                yield str(item["Key"])[len(under) :]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def each(self, fn: Callable[[str], T], keys: list[str]) -> list[T]:
        """``fn`` of every key, several at a time, in order (the first error raised)."""
        if len(keys) <= 1:
            return [fn(key) for key in keys]
        return list(self.workers.map(fn, keys))


class Precondition(MnemoError):
    """A conditional write found the key changed (or present): another writer was first."""


def _call(bucket: Bucket, what: str, fn: Callable[[], Any], *, missing: bool = False) -> Any:
    """Run one request of ``bucket``; its failures as the library's errors, naming the remote.

    ``missing``: a key that is not there answers None rather than raising.
    """
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    where = f"remote {bucket.name!r} ({bucket.url})"
    try:
        return fn()
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if status == 412 or code == "PreconditionFailed":
            raise Precondition(f"{where}: {what}: another writer changed it first") from None
        if missing and (code in ("NoSuchKey", "404") or status == 404) and code != "NoSuchBucket":
            return None
        if code == "NoSuchBucket":
            raise NotFound(f"{where}: no bucket named {bucket.bucket!r} there") from None
        if status in (401, 403) or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            refused = f"{where}: {what}: refused ({code or status}); check the AWS credentials"
            raise AccessDenied(refused) from None
        raise MnemoError(f"{where}: {what} failed: {code or status}: {error}") from None
    except (NoCredentialsError, PartialCredentialsError):
        raise AccessDenied(
            f"{where}: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
            "(or give the remote --profile)"
        ) from None
    except ProfileNotFound as error:
        raise AccessDenied(f"{where}: {error}") from None
    except EndpointConnectionError as error:
        raise NotFound(f"cannot reach {where}: {error}") from None
    except BotoCoreError as error:  # a connection broken part-way, a read timed out, ...
        raise MnemoError(f"{where}: {what} failed: {type(error).__name__}: {error}") from None


class BucketTenant:
    """One tenant's keys in a bucket (``PREFIX/<tenant>/``): refs, redactions, parts and packs.

    Args:
        bucket: the bucket's prefix.
        tenant: the tenant.
    """

    def __init__(self, bucket: Bucket, tenant: str) -> None:
        self.bucket = bucket
        self.tenant = tenant
        self._catalog: Catalog | None = None

    @property
    def name(self) -> str:
        """The remote's name here."""
        return self.bucket.name

    def key(self, *parts: str) -> str:
        """The bucket key of ``parts`` in this tenant."""
        return self.bucket.key(self.tenant, *parts)

    # -- refs ------------------------------------------------------------------------

    def head(self) -> str:
        """The branch a clone checks out (empty: none pushed yet)."""
        found = self.bucket.get(self.key("HEAD"))
        return found[0].decode("utf-8", "replace").strip() if found is not None else ""

    def set_head(self, branch: str) -> None:
        """Name ``branch`` the bucket's current branch, unless one is named already."""
        try:
            self.bucket.put(self.key("HEAD"), branch.encode(), if_absent=True)
        except Precondition:
            pass  # named already: the first branch pushed stays the one clones check out

    def branches(self) -> list[tuple[str, bytes]]:
        """``(name, tip)`` of every branch, by name.

        Raises:
            CorruptObject: a ref that does not hold a commit id.
        """
        folder = self.key("refs", "heads") + "/"
        names = list(self.bucket.keys(folder))
        tips = self.bucket.each(lambda name: self.ref(name)[0], names)
        return [(name, tip) for name, tip in zip(names, tips, strict=True) if tip is not None]

    def ref(self, branch: str) -> tuple[bytes | None, str | None]:
        """``(tip, ETag)`` of ``branch`` (``(None, None)``: no such branch there)."""
        found = self.bucket.get(self.key("refs", "heads", branch))
        if found is None:
            return None, None
        data, etag = found
        try:
            tip = bytes.fromhex(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            tip = b""
        if len(tip) != 32:
            raise CorruptObject(f"remote {self.name!r}: its branch {branch!r} does not hold a commit id")
        return tip, etag

    def put_ref(self, branch: str, tip: bytes, etag: str | None) -> None:
        """Move ``branch`` to ``tip`` if it is still as read (``etag``; None: if it is still absent).

        Raises:
            Precondition: another push moved (or made) it since.
        """
        key = self.key("refs", "heads", branch)
        data = (tip.hex() + "\n").encode()
        if etag is None:
            self.bucket.put(key, data, if_absent=True)
        else:
            self.bucket.put(key, data, if_match=etag)

    # -- redactions ------------------------------------------------------------------

    def erased(self) -> set[bytes]:
        """The versions the bucket holds redaction records for."""
        found: set[bytes] = set()
        for name in self.bucket.keys(self.key("redactions") + "/"):
            try:
                oid = bytes.fromhex(name)
            except ValueError:
                continue  # not one of ours
            if len(oid) == 32:
                found.add(oid)
        return found

    def redactions(self, ids: list[bytes]) -> list[tuple[bytes, bytes]]:
        """``(id, stored record)`` of the redaction records of ``ids``."""
        keys = [self.key("redactions", oid.hex()) for oid in ids]
        found = self.bucket.each(self.bucket.get, keys)
        return [(oid, hit[0]) for oid, hit in zip(ids, found, strict=True) if hit is not None]

    def put_redaction(self, oid: bytes, record: bytes) -> bool:
        """Keep a redaction record (before the bytes go); False: it was there already."""
        try:
            self.bucket.put(self.key("redactions", oid.hex()), record, if_absent=True)
        except Precondition:
            return False
        return True

    # -- parts and packs -------------------------------------------------------------

    def catalog(self) -> Catalog:
        """The complete parts in the bucket (read once per transfer, then kept up to date by it)."""
        if self._catalog is None:
            catalog = Catalog()
            folder = self.key("parts") + "/"
            names = list(self.bucket.keys(folder))
            for name, part in zip(names, self.bucket.each(self.part, names), strict=True):
                if part is not None:
                    catalog.add(name, part)
            self._catalog = catalog
        return self._catalog

    def part(self, name: str) -> Part | None:
        """The part called ``name`` (None: gone since it was listed)."""
        found = self.bucket.get(self.key("parts", name))
        if found is None:
            return None
        try:
            return _part_decoder.decode(found[0])
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise CorruptObject(f"remote {self.name!r}: its part {name} cannot be read") from None

    def put_part(self, part: Part) -> str:
        """Write ``part`` once (its packs are all there); its name."""
        name = name_of([oid for oid, _ in part.commits])
        try:
            self.bucket.put(self.key("parts", name), _encoder.encode(part), if_absent=True)
        except Precondition:
            pass  # the same commits' part, written by a push that ran beside this one
        self.catalog().add(name, part)
        return name

    def pack_names(self) -> set[str]:
        """The names of the packs in the bucket (whole or not yet named by a part)."""
        return set(self.bucket.keys(self.key("packs") + "/"))

    def pack(self, name: str) -> Pack:
        """The pack called ``name``.

        Raises:
            CorruptObject: it is missing or cannot be read (the bucket was damaged).
        """
        found = self.bucket.get(self.key("packs", name))
        if found is None:
            raise CorruptObject(f"remote {self.name!r}: pack {name} is missing from the bucket")
        try:
            pack = _pack_decoder.decode(found[0])
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise CorruptObject(f"remote {self.name!r}: pack {name} cannot be read (damaged?)") from None
        if len(pack.ids) != len(pack.data):
            raise CorruptObject(f"remote {self.name!r}: pack {name} cannot be read (damaged?)")
        return pack

    def put_pack(self, name: str, pack: Pack) -> None:
        """Write a pack (its name says what it holds: an existing one is the same)."""
        self.bucket.put(self.key("packs", name), _encoder.encode(pack))

    def erase(self, ids: set[bytes]) -> None:
        """Rewrite every pack holding any of ``ids`` without them (their records are kept already).

        The packs the parts name are found in the catalog; those no part names yet
        (a push cut part-way, or one under way) are read to be sure.
        """
        catalog = self.catalog()
        listed = {pack for part in catalog.parts.values() for pack, _ in part.packs}
        names = catalog.holding(ids) + sorted(self.pack_names() - listed)

        def rewrite(name: str) -> None:
            try:
                pack = self.pack(name)
            except CorruptObject:
                return  # gone, or not one of ours: it holds no bytes of these
            kept = [(oid, data) for oid, data in zip(pack.ids, pack.data, strict=True) if oid not in ids]
            if len(kept) < len(pack.ids):
                self.put_pack(name, Pack(ids=[oid for oid, _ in kept], data=[data for _, data in kept]))

        self.bucket.each(rewrite, names)
