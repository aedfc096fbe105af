r"""Backup and restore: a portable, versioned, streaming copy of a whole store.

:func:`export_store` writes every tenant's objects, refs, reflog entries and
redaction records; :func:`import_store` restores them into a new, empty store,
byte for byte, so every hash (nodes, trees, commits) is the same afterwards.
Derived indexes are not exported: the import rebuilds them from the objects,
exactly as ``reindex`` does, and runs ``fsck``.

Export format, version 1
------------------------

A file is a sequence of *records*. Each is framed as a 4-byte big-endian length
followed by that many bytes of msgpack: a map whose ``kind`` says what it is.
Byte strings are msgpack ``bin``; every other value is a string or an integer.

1. ``header``: ``{"kind": "header", "format": "mnemosyne-export", "version": 1,
   "store_format": 1, "producer": "mnemosyne 0.1.0"}``. Every version of the
   format starts with a header framed this way, so a reader can always tell a
   newer export (which it refuses) from a damaged one.
2. For each tenant, in name order: ``{"kind": "tenant", "name": NAME}``, then its
   records, each naming the tenant (names, not the 4-byte key scopes: scopes are
   local to one store):

   - ``{"kind": "object", "tenant", "id": 32 bytes, "data": bytes}``: the object's
     stored bytes, exactly; ``id`` is their blake3 digest.
   - ``{"kind": "ref", "tenant", "key", "value"}``: ``key`` is the ref name
     (``HEAD`` or ``refs/heads/<branch>``), ``value`` the stored value
     (``ref:refs/heads/<branch>`` for HEAD, else a 32-byte commit id).
   - ``{"kind": "reflog", "tenant", "key", "value"}``: ``key`` is
     ``<ref name> 00 <8-byte time>`` and ``value`` the stored entry, as in the
     reflog keyspace without the scope.
   - ``{"kind": "redaction", "tenant", "key", "value"}``: ``key`` is the erased
     version's 32-byte hash, ``value`` its stored ``redaction@1`` record.

3. ``end``: ``{"kind": "end", "tenants": [{"name", "objects", "refs", "reflog",
   "redactions"}], "digest": 32 bytes}``: how many records of each kind every
   tenant has, and the blake3 digest of every byte of the file before this
   record. Nothing may follow it.

Records with unknown fields or kinds, a header of a newer version and objects of
a newer format (``node@2``) are refused with :class:`InvalidInput`, never
misread; truncation and damage anywhere are caught by the digest and reported
as :class:`CorruptObject` before anything is written.

An export is read in one snapshot, so it is consistent even while others write.
An import is one write transaction: the store holds all of the export or none
of it. The input is read twice (a check of its framing and digest, then the
import), so a stream that cannot seek is first copied to a temporary file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import msgspec

from mnemosyne.admin.export_file import (
    EXPORT_VERSION,
    FORMAT_NAME,
    TenantCounts,
    _decode,
    _describe,
    _End,
    _Header,
    _header,
    _Object,
    _Reader,
    _Record,
    _Redaction,
    _Ref,
    _Reflog,
    _Tenant,
    _verify,
    _Writer,
    read_records,
    write_records,
)
from mnemosyne.admin.fsck import FsckReport, fsck, reindex
from mnemosyne.api.repo import Repo
from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, NotFound
from mnemosyne.index.view import Stores, View
from mnemosyne.model import codec
from mnemosyne.model.objects import Redaction
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE
from mnemosyne.store.refs import BRANCH_PREFIX, DEFAULT_BRANCH, HEAD, RefStore, check_branch_name, time_key

# The registry keys are private to tenancy.py, which has no name-to-scope lookup or
# tenant creation that runs inside a caller's transaction; the layout is ADR 0006's.
from mnemosyne.store.tenancy import (
    _NEXT_TENANT_KEY,
    _TENANT_KEY,
    FORMAT,
    check_tenant_name,
    scope,
    tenant_names,
)

__all__ = [
    "DERIVED_SPACES",
    "EXPORTED_SPACES",
    "EXPORT_VERSION",
    "FORMAT_NAME",
    "LAZY_SPACES",
    "LOCAL_SPACES",
    "ExportReport",
    "ImportReport",
    "TenantCounts",
    "export_store",
    "import_store",
    "read_records",
    "write_records",
]

EXPORTED_SPACES = (Space.OBJECTS, Space.REFS, Space.REFLOG, Space.REDACTIONS)
"""The keyspaces an export carries, besides tenant names from ``meta``."""

DERIVED_SPACES = (Space.INDEX,)
"""The keyspaces an import rebuilds from the objects instead (``reindex``).

A new keyspace belongs in one of these groups, or backups silently lose it: a test
checks that every keyspace is in exactly one (or is ``meta``).
"""

LAZY_SPACES = (Space.RECALL, Space.VECTORS)
"""Recall indexes: ``reindex`` queues every version again and the first search
after an import rebuilds postings and embeddings (vectors cost model time, so they
are not carried: another machine may use another model)."""

LOCAL_SPACES = (Space.READS,)
"""Kept with the store, not carried by exports: the read audit log records what one
store's searches returned, and erasure scrubs it in place."""

_SCOPE_BYTES = 4
_REDACTION_TAG = "redaction@1"


class ExportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`export_store` wrote.

    Attributes:
        tenants: the counts of each tenant exported, in name order.
        size: bytes written.
        digest: hex blake3 digest of the file up to its end record (as stored in it).
    """

    tenants: list[TenantCounts]
    size: int
    digest: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`import_store` restored, and the ``fsck`` of the result.

    Attributes:
        tenants: the counts of each tenant imported, in name order.
        size: bytes read.
        digest: hex blake3 digest of the export (as stored in its end record).
        fsck: each imported tenant's fsck report.
        ok: True when every tenant's fsck found no problem.
    """

    tenants: list[TenantCounts]
    size: int
    digest: str
    fsck: dict[str, FsckReport]
    ok: bool


# -- records -------------------------------------------------------------------


_redaction_decoder = msgspec.msgpack.Decoder(Redaction)


# -- export --------------------------------------------------------------------


def export_store(
    source: Repo | str | os.PathLike[str], out: IO[bytes], *, tenants: Sequence[str] | None = None
) -> ExportReport:
    """Write a portable copy of a store to ``out`` (the format is in the module docstring).

    Every tenant is exported, whatever tenant a ``Repo`` given as ``source`` is
    bound to, unless ``tenants`` names some. The copy is read in one snapshot, and
    every object is re-hashed on the way out so a damaged store is noticed now
    rather than at restore time.

    Args:
        source: an open store, or the path of one (opened read-only for the export).
        out: a binary stream to write to; it is not closed.
        tenants: export only these tenants (default: all of them).

    Returns:
        The counts per tenant, the bytes written and the export's digest.

    Raises:
        NotFound: no store at the path, or a tenant named in ``tenants`` does not exist.
        CorruptObject: a stored object's bytes do not match its hash.
    """
    repo, owned = (source, False) if isinstance(source, Repo) else (Repo.open(source, readonly=True), True)
    try:
        with repo.kv.read() as txn:
            chosen = _choose_tenants(txn, tenants)
            writer = _Writer(out)
            writer.record(
                _Header(
                    format=FORMAT_NAME,
                    version=EXPORT_VERSION,
                    store_format=FORMAT,
                    producer=f"mnemosyne {_version()}",
                )
            )
            counts = [_export_tenant(txn, writer, name, found) for name, found in chosen]
            digest = writer.end(counts)
    finally:
        if owned:
            repo.close()
    return ExportReport(tenants=counts, size=writer.size, digest=digest.hex())


def _choose_tenants(txn: ReadTxn, wanted: Sequence[str] | None) -> list[tuple[str, bytes]]:
    """``(name, scope)`` of the tenants to export, in name order."""
    names = tenant_names(txn)
    if wanted is not None:
        for name in wanted:
            check_tenant_name(name)
            if name not in names:
                raise NotFound(f"no tenant named {name!r}")
        names = sorted(set(wanted))
    chosen = []
    for name in names:
        found = txn.get(Space.META, _TENANT_KEY + name.encode())
        if found is None:  # listed a moment ago in this same snapshot
            raise NotFound(f"no tenant named {name!r}")
        chosen.append((name, found))
    return chosen


def _export_tenant(txn: ReadTxn, writer: _Writer, name: str, prefix: bytes) -> TenantCounts:
    writer.record(_Tenant(name=name))
    objects = 0
    for key, data in txn.scan(Space.OBJECTS, prefix):
        oid = key[len(prefix) :]
        if codec.object_id(data) != oid:
            raise CorruptObject(
                f"object {oid.hex()} of tenant {name!r} is corrupt: its bytes do not match its hash "
                "(run 'mnemo fsck'); nothing usable was exported"
            )
        writer.record(_Object(tenant=name, id=oid, data=data))
        objects += 1
    refs = reflog = redactions = 0
    for key, value in txn.scan(Space.REFS, prefix):
        writer.record(_Ref(tenant=name, key=key[len(prefix) :], value=value))
        refs += 1
    for key, value in txn.scan(Space.REFLOG, prefix):
        writer.record(_Reflog(tenant=name, key=key[len(prefix) :], value=value))
        reflog += 1
    for key, value in txn.scan(Space.REDACTIONS, prefix):
        writer.record(_Redaction(tenant=name, key=key[len(prefix) :], value=value))
        redactions += 1
    return TenantCounts(name=name, objects=objects, refs=refs, reflog=reflog, redactions=redactions)


def _version() -> str:
    from mnemosyne import __version__

    return __version__


# -- import --------------------------------------------------------------------


class _Restore:
    """One run of the import transaction (LMDB may run it again: it keeps no outside state)."""

    def __init__(self, txn: WriteTxn, reader: _Reader) -> None:
        self.txn = txn
        self.reader = reader
        self.scopes: dict[str, bytes] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.refs: set[tuple[str, bytes]] = set()

    def run(self) -> _End:
        _header(self.reader)
        record = self.apply_until_end()
        if record.digest != self.reader.hasher.digest():
            raise self.reader.damaged("its digest does not match its contents")
        if self.reader.next() is not None:
            raise self.reader.damaged("data follows its end record")
        found = [TenantCounts(name=name, **self.counts[name]) for name in sorted(self.counts)]
        if found != sorted(record.tenants, key=lambda t: t.name):
            raise self.reader.damaged("its end record counts other records than it holds")
        for name, prefix in self.scopes.items():
            try:
                reindex(Stores(prefix), self.txn)
            except MnemoError as exc:
                raise CorruptObject(
                    f"{self.reader.source}: the derived indexes of tenant {name!r} cannot be rebuilt from "
                    f"its objects ({exc}); nothing was imported"
                ) from None
        return record

    def apply_until_end(self) -> _End:
        while True:
            body = self.reader.next()
            if body is None:
                raise self.reader.damaged("it has no end record")
            record = _decode(body, self.reader)
            if isinstance(record, _End):
                return record
            self.apply(record)

    def apply(self, record: _Record) -> None:
        if isinstance(record, _Header):
            raise InvalidInput(f"{self.reader.source}: record {self.reader.count} is a second header")
        if isinstance(record, _Tenant):
            self.tenant(record.name)
            return
        assert isinstance(record, _Object | _Ref | _Reflog | _Redaction)
        prefix = self.scopes.get(record.tenant)
        if prefix is None:
            raise InvalidInput(
                f"{self.reader.source}: record {self.reader.count} belongs to tenant {record.tenant!r}, "
                "which has no tenant record before it"
            )
        counts = self.counts[record.tenant]
        if isinstance(record, _Object):
            self.object(prefix, record)
            counts["objects"] += 1
        elif isinstance(record, _Ref):
            self.ref(prefix, record)
            counts["refs"] += 1
        elif isinstance(record, _Reflog):
            self.reflog(prefix, record)
            counts["reflog"] += 1
        else:
            self.redaction(prefix, record)
            counts["redactions"] += 1

    def where(self) -> str:
        return f"{self.reader.source}: record {self.reader.count}"

    def tenant(self, name: str) -> None:
        check_tenant_name(name)
        if name in self.scopes:
            raise InvalidInput(f"{self.where()} declares tenant {name!r} a second time")
        self.scopes[name] = _create_tenant(self.txn, name)
        self.counts[name] = {"objects": 0, "refs": 0, "reflog": 0, "redactions": 0}

    def object(self, prefix: bytes, record: _Object) -> None:
        oid = record.id
        if len(oid) != 32 or codec.object_id(record.data) != oid:
            raise CorruptObject(f"{self.where()}: object {oid.hex()} does not match its hash")
        try:
            codec.decode(record.data, oid)
        except CorruptObject:
            tag = codec.describe_tag(record.data)
            if tag is not None:  # a newer format: refuse it by name rather than call it damage
                raise InvalidInput(
                    f"{self.where()}: {tag}; upgrade Mnemosyne to import this export"
                ) from None
            raise
        if not self.txn.put(Space.OBJECTS, prefix + oid, record.data, overwrite=False):
            raise InvalidInput(f"{self.where()}: object {oid.hex()} appears twice")

    def ref(self, prefix: bytes, record: _Ref) -> None:
        name = _ref_name(record.key, self.where())
        value = record.value
        if name == HEAD:
            target = value.removeprefix(b"ref:" + BRANCH_PREFIX.encode())
            if target == value or not _is_branch(target):
                raise InvalidInput(f"{self.where()}: HEAD holds {value!r}, not a branch")
        elif len(value) != 32:
            raise InvalidInput(f"{self.where()}: {name} holds {len(value)} bytes, not a commit id")
        if (record.tenant, record.key) in self.refs:
            raise InvalidInput(f"{self.where()}: ref {name} appears twice")
        self.refs.add((record.tenant, record.key))
        # Overwrite: a new tenant's HEAD already points at main.
        self.txn.put(Space.REFS, prefix + record.key, value)

    def reflog(self, prefix: bytes, record: _Reflog) -> None:
        key = record.key
        if len(key) < 10 or key[-9] != 0:
            raise InvalidInput(f"{self.where()}: {key!r} is not a reflog key")
        _ref_name(key[:-9], self.where())
        try:
            entry = RefStore.decode_entry(record.value)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidInput(f"{self.where()}: the reflog entry is malformed: {exc}") from None
        if time_key(entry.time) != key[-8:]:
            raise InvalidInput(f"{self.where()}: the reflog entry's time does not match its key")
        if not self.txn.put(Space.REFLOG, prefix + key, record.value, overwrite=False):
            raise InvalidInput(f"{self.where()}: reflog entry {key!r} appears twice")

    def redaction(self, prefix: bytes, record: _Redaction) -> None:
        try:
            found = _redaction_decoder.decode(record.value)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            tag = _tag_of(record.value)
            if tag is not None and tag != _REDACTION_TAG:
                raise InvalidInput(
                    f"{self.where()}: redaction record format {tag!r} is not one this version of "
                    "Mnemosyne reads (newer?); upgrade Mnemosyne to import this export"
                ) from None
            raise InvalidInput(f"{self.where()}: the redaction record is malformed: {exc}") from None
        if len(record.key) != 32 or found.hash != record.key.hex():
            raise InvalidInput(f"{self.where()}: the redaction record does not match its key")
        if not self.txn.put(Space.REDACTIONS, prefix + record.key, record.value, overwrite=False):
            raise InvalidInput(f"{self.where()}: redaction of {record.key.hex()} appears twice")


def _ref_name(key: bytes, where: str) -> str:
    """The ref name a key spells, if it is one a store can hold."""
    try:
        name = key.decode()
    except UnicodeDecodeError:
        name = ""
    if name != HEAD and not (name.startswith(BRANCH_PREFIX) and _is_branch(key[len(BRANCH_PREFIX) :])):
        raise InvalidInput(f"{where}: {key!r} is not a ref name")
    return name


def _is_branch(raw: bytes) -> bool:
    try:
        check_branch_name(raw.decode())
    except (UnicodeDecodeError, InvalidInput):
        return False
    return True


def _tag_of(data: bytes) -> str | None:
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        return None
    return raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], str) else None


def _create_tenant(txn: WriteTxn, name: str) -> bytes:
    """The scope of tenant ``name`` in the target, registered in this transaction if new.

    Like ``tenancy.open_tenant``, but inside the import's own transaction, so a
    failed import leaves no empty tenants behind.
    """
    key = _TENANT_KEY + name.encode()
    found = txn.get(Space.META, key)
    if found is not None:
        return found
    counter = txn.get(Space.META, _NEXT_TENANT_KEY) or scope(1)
    number = int.from_bytes(counter, "big")
    txn.put(Space.META, _NEXT_TENANT_KEY, scope(number + 1))
    txn.put(Space.META, key, scope(number))
    RefStore(scope(number)).set_head(txn, DEFAULT_BRANCH)
    return scope(number)


def _check_empty(txn: ReadTxn, where: str) -> None:
    """Refuse a store that holds anything but empty tenants (a ``HEAD`` each), in any keyspace."""
    for space in Space:
        if space is Space.META:
            continue
        for key, _ in txn.scan(space, b""):
            if space is not Space.REFS or key[_SCOPE_BYTES:] != HEAD.encode():
                raise InvalidInput(_not_empty(where))


def _not_empty(where: str) -> str:
    return f"the store at {where} is not empty: an export is imported only into a new store"


def import_store(target: Repo | str | os.PathLike[str], inp: IO[bytes]) -> ImportReport:
    """Restore an export into an empty store, with every hash as it was.

    The input is checked whole (framing, digest) before anything is written, and
    written in one transaction: the store ends up with all of the export or none
    of it. Tenants are created under their exported names (with new local key
    scopes); derived indexes are rebuilt, then each tenant is checked with fsck.

    Args:
        target: an open store, or a path: a store there is opened, and one is
            created when there is none.
        inp: a binary stream positioned at the start of the export; it is not closed.

    Returns:
        The counts per tenant, and each tenant's fsck report (``ok`` is False when
        fsck found problems; the data stays imported, as the export had it).

    Raises:
        InvalidInput: the store is not empty; the input is not an export, or is of a
            newer format version, or holds objects of a newer format or records
            that cannot belong in a store.
        CorruptObject: the input is truncated or damaged (digest or hash mismatch).
    """
    source = _describe(inp)
    repo = _existing(target)
    owned = repo is not None and not isinstance(target, Repo)
    try:
        if repo is not None:
            # Refuse a store that is not empty before reading what may be a large file.
            with repo.kv.read() as txn:
                _check_empty(txn, _where(repo))
        with _seekable(inp) as stream:
            start = stream.tell()
            end = _verify(stream, start, source)
            if repo is None:
                assert not isinstance(target, Repo)  # _existing returns a Repo target itself
                # Room for the whole import from the start: a full map re-runs the transaction.
                size = stream.tell() - start
                repo = Repo.init(target, map_size=max(DEFAULT_MAP_SIZE, -(-4 * size // (1 << 20)) << 20))
                owned = True
            return _import(repo, stream, start, source, end)
    finally:
        if owned and repo is not None:
            repo.close()


def _where(repo: Repo) -> str:
    return str(repo.path) if repo.path is not None else "memory"


def _existing(target: Repo | str | os.PathLike[str]) -> Repo | None:
    """The target store, opened; None when there is none yet (to be created)."""
    if isinstance(target, Repo):
        return target
    try:
        return Repo.open(target)
    except NotFound:
        if (Path(target) / "data.mdb").exists():
            raise  # a store whose default tenant was dropped: not one to create again
    return None


@contextmanager
def _seekable(inp: IO[bytes]) -> Iterator[IO[bytes]]:
    """``inp``, or a temporary copy of it when it cannot seek (a pipe).

    The import reads its input twice (verify, then write), and LMDB may run the
    write again after growing its map.
    """
    if inp.seekable():
        yield inp
        return
    with tempfile.TemporaryFile() as spool:
        shutil.copyfileobj(inp, spool)
        spool.seek(0)
        yield spool


def _import(repo: Repo, inp: IO[bytes], start: int, source: str, end: _End) -> ImportReport:
    where = _where(repo)

    def work(txn: WriteTxn) -> tuple[dict[str, bytes], int]:
        _check_empty(txn, where)
        inp.seek(start)
        restore = _Restore(txn, _Reader(inp, source))
        restore.run()
        return restore.scopes, restore.reader.size

    scopes, size = repo.kv.transact(work)
    with repo.kv.read() as txn:
        reports = {name: fsck(View(Stores(prefix), txn)) for name, prefix in sorted(scopes.items())}
    return ImportReport(
        tenants=sorted(end.tenants, key=lambda t: t.name),
        size=size,
        digest=end.digest.hex(),
        fsck=reports,
        ok=all(report.ok for report in reports.values()),
    )
