r"""Backup and restore: a portable, versioned, streaming copy of a whole store.

:func:`dump` writes every tenant's objects, refs, reflog entries and
redaction records; :func:`restore` restores them into a new, empty store,
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
     (``HEAD``, ``refs/heads/<branch>`` or ``refs/remotes/<remote>/<branch>``), ``value`` the stored value
     (``ref:refs/heads/<branch>`` for HEAD, a 32-byte commit id, or empty for
     a branch with no commits yet).
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
    End,
    Header,
    ObjectRecord,
    Reader,
    Record,
    RedactionRecord,
    ReflogRecord,
    RefRecord,
    TenantRecord,
    Writer,
    decode_record,
    describe,
    read_header,
    shown,
    verify,
)
from mnemosyne.admin.fsck import fsck
from mnemosyne.errors import CorruptObject, InvalidInput, MnemoError, NotFound, StorageFull
from mnemosyne.index.build import reindex
from mnemosyne.index.view import Stores, View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import decode_object
from mnemosyne.model.reports import ExportReport, ImportReport, TenantCounts
from mnemosyne.model.version import VERSION
from mnemosyne.store import tenancy
from mnemosyne.store.kv.base import KV, ReadTxn, WriteTxn
from mnemosyne.store.kv.lmdb_space import full_message, is_disk_full
from mnemosyne.store.object_store import decode_redaction
from mnemosyne.store.refs import BRANCH_PREFIX, HEAD, REMOTE_PREFIX, RefStore, check_branch_name, time_key
from mnemosyne.store.remote_config import check_remote_name

_REDACTION_TAG = "redaction@1"


# -- export --------------------------------------------------------------------


def dump(kv: KV, out: IO[bytes], *, tenants: Sequence[str] | None = None) -> ExportReport:
    """Write a portable copy of the store in ``kv`` to ``out`` (the format is in the module docstring).

    Every tenant is exported unless ``tenants`` names some. The copy is read in
    one snapshot, and every object is re-hashed on the way out so a damaged
    store is noticed now rather than at restore time.

    Raises:
        NotFound: a tenant named in ``tenants`` does not exist.
        CorruptObject: a stored object's bytes do not match its hash, or the store
            file is damaged (the read runs in a child process: see :mod:`~mnemosyne.store.kv.apart`).
        StorageFull: the disk ``out`` writes to is full.
    """
    from mnemosyne.store.kv.apart import apart  # pickle and a fork: loaded when an export runs

    try:
        report = apart(kv, lambda stream: _dump(kv, stream or out, tenants), out)
        out.flush()  # so a full disk under a buffered stream is told here, not at exit
    except OSError as exc:
        _raise_if_full(exc, getattr(out, "name", None))
        raise
    return report


def _dump(kv: KV, out: IO[bytes], tenants: Sequence[str] | None) -> ExportReport:
    with kv.read() as txn:
        chosen = _choose_tenants(txn, tenants)
        writer = Writer(out)
        writer.record(
            Header(
                format=FORMAT_NAME,
                version=EXPORT_VERSION,
                store_format=tenancy.FORMAT,
                producer=f"mnemosyne {VERSION}",
            )
        )
        counts = [_export_tenant(txn, writer, name, found) for name, found in chosen]
        digest = writer.end(counts)
    out.flush()
    return ExportReport(tenants=counts, size=writer.size, digest=digest.hex())


def _raise_if_full(exc: OSError, where: object) -> None:
    """Raise :class:`StorageFull` when ``exc``, from writing an export to ``where``, means a full disk."""
    path = where if isinstance(where, str) and where else os.curdir  # a stream: no place to measure
    if is_disk_full(exc, path):
        raise StorageFull(f"{full_message(path, exc)}; the export is not complete") from None


def dump_to_file(kv: KV, path: Path, *, tenants: Sequence[str] | None = None) -> ExportReport:
    """:func:`dump` into the file ``path``, which appears only once the export is whole.

    The export is written beside ``path`` (owner-only: it holds every memory),
    flushed to disk, then renamed over it; a failed or interrupted export
    leaves no file that could pass for a backup.

    Raises:
        InvalidInput: ``path`` is a directory, or its folder cannot be written.
        NotFound: a tenant named in ``tenants`` does not exist.
        CorruptObject: a stored object's bytes do not match its hash.
        StorageFull: the disk filled up; no file is left.
    """
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give a file name to export to")
    try:
        partial = tempfile.NamedTemporaryFile(  # mode 0600
            dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
        )
    except OSError as exc:
        _raise_if_full(exc, str(path.parent))
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with partial:
            report = dump(kv, partial, tenants=tenants)
            partial.flush()
            os.fsync(partial.fileno())
        os.replace(partial.name, path)
    except OSError as exc:
        Path(partial.name).unlink(missing_ok=True)
        _raise_if_full(exc, partial.name)  # the close and the fsync may be first to say it
        raise
    except BaseException:
        Path(partial.name).unlink(missing_ok=True)
        raise
    return report


def _choose_tenants(txn: ReadTxn, wanted: Sequence[str] | None) -> list[tuple[str, bytes]]:
    """``(name, scope)`` of the tenants to export, in name order."""
    names = tenancy.tenant_names(txn)
    if wanted is not None:
        for name in wanted:
            tenancy.check_tenant_name(name)
            if name not in names:
                raise NotFound(f"no tenant named {name!r}")
        names = sorted(set(wanted))
    chosen = []
    for name in names:
        found = tenancy.lookup(txn, name)
        if found is None:  # listed a moment ago in this same snapshot
            raise NotFound(f"no tenant named {name!r}")
        chosen.append((name, found))
    return chosen


def _export_tenant(txn: ReadTxn, writer: Writer, name: str, prefix: bytes) -> TenantCounts:
    writer.record(TenantRecord(name=name))
    stores = Stores(prefix)
    objects = 0
    for oid, data in stores.objects.scan(txn):
        if codec.object_id(data) != oid:
            raise CorruptObject(
                f"object {oid.hex()} of tenant {name!r} is corrupt: its bytes do not match its hash "
                "(run 'mnemo fsck'); nothing usable was exported"
            )
        writer.record(ObjectRecord(tenant=name, id=oid, data=data))
        objects += 1
    refs = reflog = redactions = 0
    for key, value in stores.refs.raw_refs(txn):
        writer.record(RefRecord(tenant=name, key=key, value=value))
        refs += 1
    for key, value in stores.refs.raw_reflog(txn):
        writer.record(ReflogRecord(tenant=name, key=key, value=value))
        reflog += 1
    for key, value in stores.objects.redactions(txn):
        writer.record(RedactionRecord(tenant=name, key=key, value=value))
        redactions += 1
    return TenantCounts(name=name, objects=objects, refs=refs, reflog=reflog, redactions=redactions)


# -- import --------------------------------------------------------------------


class Checked:
    """An export whose framing and digest were checked, ready to be restored.

    Attributes:
        stream: the export, seekable.
        start: where it starts in ``stream``.
        source: how messages name it.
        end: its end record.
        size: its size in bytes.
    """

    def __init__(self, stream: IO[bytes], start: int, source: str, end: End, size: int) -> None:
        self.stream = stream
        self.start = start
        self.source = source
        self.end = end
        self.size = size


@contextmanager
def checked(inp: IO[bytes]) -> Iterator[Checked]:
    """Check an export whole (header, framing, digest) before anything is written.

    A stream that cannot seek (a pipe) is first copied to a temporary file: the
    import reads its input twice (check, then write), and LMDB may run the write
    again after growing its map.

    Raises:
        InvalidInput: not an export, or one of a newer version.
        CorruptObject: the export is truncated or damaged.
    """
    source = describe(inp)
    with _seekable(inp) as stream:
        start = stream.tell()
        end = verify(stream, start, source)
        yield Checked(stream, start, source, end, stream.tell() - start)


@contextmanager
def _seekable(inp: IO[bytes]) -> Iterator[IO[bytes]]:
    if inp.seekable():
        yield inp
        return
    with tempfile.TemporaryFile() as spool:
        shutil.copyfileobj(inp, spool)
        spool.seek(0)
        yield spool


def check_empty(kv: KV, where: str) -> None:
    """Refuse a store that holds anything but empty tenants.

    Raises:
        InvalidInput: the store holds something.
    """
    with kv.read() as txn:
        if not tenancy.is_empty(txn):
            raise InvalidInput(_not_empty(where))


def _not_empty(where: str) -> str:
    return f"the store at {where} is not empty: an export is imported only into a new store"


def restore(kv: KV, export: Checked, where: str) -> ImportReport:
    """Restore a checked export into the empty store in ``kv``, with every hash as it was.

    Written in one transaction: the store ends up with all of the export or none
    of it. Tenants are created under their exported names (with new local key
    scopes); derived indexes are rebuilt, then each tenant is checked with fsck.

    Raises:
        InvalidInput: the store is not empty; the export holds objects of a newer
            format or records that cannot belong in a store.
        CorruptObject: the export's records contradict it (hash mismatch, counts).
    """

    def work(txn: WriteTxn) -> tuple[dict[str, bytes], int]:
        if not tenancy.is_empty(txn):
            raise InvalidInput(_not_empty(where))
        export.stream.seek(export.start)
        run = _Restore(txn, Reader(export.stream, export.source))
        run.run()
        return run.scopes, run.reader.size

    scopes, size = kv.transact(work)
    with kv.read() as txn:
        reports = {name: fsck(View(Stores(prefix), txn)) for name, prefix in sorted(scopes.items())}
    return ImportReport(
        tenants=sorted(export.end.tenants, key=lambda t: t.name),
        size=size,
        digest=export.end.digest.hex(),
        fsck=reports,
        ok=all(report.ok for report in reports.values()),
    )


class _Restore:
    """One run of the import transaction (LMDB may run it again: it keeps no outside state)."""

    def __init__(self, txn: WriteTxn, reader: Reader) -> None:
        self.txn = txn
        self.reader = reader
        self.scopes: dict[str, bytes] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.refs: set[tuple[str, bytes]] = set()

    def run(self) -> End:
        read_header(self.reader)
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
                reindex(WriteView(Stores(prefix), self.txn))
            except MnemoError as exc:
                raise CorruptObject(
                    f"{self.reader.source}: the derived indexes of tenant {name!r} cannot be rebuilt from "
                    f"its objects ({exc}); nothing was imported"
                ) from None
            # Every version waits for the recall indexes, built at the first search.
            stores = Stores(prefix)
            stores.queue.add(
                self.txn, [oid for oid, data in stores.objects.scan(self.txn) if data[1:8] == codec.NODE_TAG]
            )
        return record

    def apply_until_end(self) -> End:
        while True:
            body = self.reader.next()
            if body is None:
                raise self.reader.damaged("it has no end record")
            record = decode_record(body, self.reader)
            if isinstance(record, End):
                return record
            self.apply(record)

    def apply(self, record: Record) -> None:
        if isinstance(record, Header):
            raise InvalidInput(f"{self.reader.source}: record {self.reader.count} is a second header")
        if isinstance(record, TenantRecord):
            self.tenant(record.name)
            return
        assert isinstance(record, ObjectRecord | RefRecord | ReflogRecord | RedactionRecord)
        prefix = self.scopes.get(record.tenant)
        if prefix is None:
            raise InvalidInput(
                f"{self.reader.source}: record {self.reader.count} belongs to tenant {record.tenant!r}, "
                "which has no tenant record before it"
            )
        counts = self.counts[record.tenant]
        stores = Stores(prefix)
        if isinstance(record, ObjectRecord):
            self.object(stores, record)
            counts["objects"] += 1
        elif isinstance(record, RefRecord):
            self.ref(stores, record)
            counts["refs"] += 1
        elif isinstance(record, ReflogRecord):
            self.reflog(stores, record)
            counts["reflog"] += 1
        else:
            self.redaction(stores, record)
            counts["redactions"] += 1

    def where(self) -> str:
        return f"{self.reader.source}: record {self.reader.count}"

    def tenant(self, name: str) -> None:
        tenancy.check_tenant_name(name)
        if name in self.scopes:
            raise InvalidInput(f"{self.where()} declares tenant {name!r} a second time")
        self.scopes[name] = tenancy.create(self.txn, name)
        self.counts[name] = {"objects": 0, "refs": 0, "reflog": 0, "redactions": 0}

    def object(self, stores: Stores, record: ObjectRecord) -> None:
        oid = record.id
        if len(oid) != 32 or codec.object_id(record.data) != oid:
            raise CorruptObject(f"{self.where()}: object {oid.hex()} does not match its hash")
        try:
            decode_object(record.data, oid)
        except CorruptObject:
            tag = codec.describe_tag(record.data)
            if tag is not None:  # a newer format: refuse it by name rather than call it damage
                raise InvalidInput(
                    f"{self.where()}: {tag}; upgrade Mnemosyne to import this export"
                ) from None
            raise
        if not stores.objects.put_raw(self.txn, oid, record.data):
            raise InvalidInput(f"{self.where()}: object {oid.hex()} appears twice")

    def ref(self, stores: Stores, record: RefRecord) -> None:
        name = _ref_name(record.key, self.where())
        value = record.value
        if name == HEAD:
            target = value.removeprefix(b"ref:" + BRANCH_PREFIX.encode())
            if target == value or not _is_branch(target):
                raise InvalidInput(f"{self.where()}: HEAD holds {shown(value)}, not a branch")
        elif len(value) not in (0, 32):  # empty: a branch created before its first commit
            raise InvalidInput(f"{self.where()}: {name} holds {len(value)} bytes, not a commit id")
        if (record.tenant, record.key) in self.refs:
            raise InvalidInput(f"{self.where()}: ref {name} appears twice")
        self.refs.add((record.tenant, record.key))
        # Overwrite: a new tenant's HEAD already points at main.
        stores.refs.put_raw_ref(self.txn, record.key, value)

    def reflog(self, stores: Stores, record: ReflogRecord) -> None:
        key = record.key
        if len(key) < 10 or key[-9] != 0:
            raise InvalidInput(f"{self.where()}: {shown(key)} is not a reflog key")
        _ref_name(key[:-9], self.where())
        try:
            entry = RefStore.decode_entry(record.value)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidInput(f"{self.where()}: the reflog entry is malformed: {exc}") from None
        if time_key(entry.time) != key[-8:]:
            raise InvalidInput(f"{self.where()}: the reflog entry's time does not match its key")
        if not stores.refs.put_raw_log(self.txn, key, record.value):
            raise InvalidInput(f"{self.where()}: reflog entry {shown(key)} appears twice")

    def redaction(self, stores: Stores, record: RedactionRecord) -> None:
        try:
            found = decode_redaction(record.value)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            tag = codec.tag_of(record.value)
            if tag is not None and tag != _REDACTION_TAG:
                raise InvalidInput(
                    f"{self.where()}: redaction record format {tag!r} is not one this version of "
                    "Mnemosyne reads (newer?); upgrade Mnemosyne to import this export"
                ) from None
            raise InvalidInput(f"{self.where()}: the redaction record is malformed: {exc}") from None
        if len(record.key) != 32 or found.hash != record.key.hex():
            raise InvalidInput(f"{self.where()}: the redaction record does not match its key")
        if not stores.objects.put_raw_redaction(self.txn, record.key, record.value):
            raise InvalidInput(f"{self.where()}: redaction of {record.key.hex()} appears twice")


def _ref_name(key: bytes, where: str) -> str:
    """The ref name a key spells, if it is one a store can hold."""
    try:
        name = key.decode()
    except UnicodeDecodeError:
        name = ""
    if name != HEAD and not (name.startswith(BRANCH_PREFIX) and _is_branch(key[len(BRANCH_PREFIX) :])):
        # A remote-tracking ref: refs/remotes/<remote>/<branch>.
        remote, _, branch = name.removeprefix(REMOTE_PREFIX).partition("/")
        if not name.startswith(REMOTE_PREFIX) or not _is_remote(remote) or not _is_branch(branch.encode()):
            raise InvalidInput(f"{where}: {shown(key)} is not a ref name")
    return name


def _is_remote(name: str) -> bool:
    try:
        check_remote_name(name)
    except InvalidInput:
        return False
    return True


def _is_branch(raw: bytes) -> bool:
    try:
        check_branch_name(raw.decode())
    except (UnicodeDecodeError, InvalidInput):
        return False
    return True
