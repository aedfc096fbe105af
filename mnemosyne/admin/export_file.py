"""The export file format: framed msgpack records, one digest over them all.

Each record is a 4-byte big-endian length and a msgpack map with a ``kind``;
the last record (``end``) carries counts and the blake3 digest of every byte
before it, so truncation and damage are found before anything is imported.
:mod:`mnemosyne.admin.dump_restore` writes and restores stores with it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import IO, Any

import blake3
import msgspec

from mnemosyne.errors import CorruptObject, InvalidInput
from mnemosyne.model.reports import TenantCounts
from mnemosyne.model.validation import has_control
from mnemosyne.store.tenancy import FORMAT

FORMAT_NAME = "mnemosyne-export"
"""The ``format`` field of every export's header."""


EXPORT_VERSION = 1
"""The export format version this release writes, and the newest it reads."""


_LENGTH = struct.Struct(">I")


_MAX_HEADER = 1 << 16  # a longer first record is not a header: the file is not an export


_READ_CHUNK = 1 << 20  # a damaged length must not make us allocate gigabytes at once


_WRITE_BUFFER = 1 << 20


class Header(msgspec.Struct, tag_field="kind", tag="header", kw_only=True, forbid_unknown_fields=True):
    """The first record: what the file is, its export version and the store format it holds."""

    format: str
    version: int
    store_format: int
    producer: str


class TenantRecord(msgspec.Struct, tag_field="kind", tag="tenant", kw_only=True, forbid_unknown_fields=True):
    """Starts a tenant's records."""

    name: str


class ObjectRecord(msgspec.Struct, tag_field="kind", tag="object", kw_only=True, forbid_unknown_fields=True):
    """One stored object: its id and its exact stored bytes."""

    tenant: str
    id: bytes
    data: bytes


class EntryRecord(msgspec.Struct, tag_field="kind", kw_only=True, forbid_unknown_fields=True):
    """A raw key and value of one tenant's keyspace; the subclass's tag names which."""

    tenant: str
    key: bytes
    value: bytes


class RefRecord(EntryRecord, tag="ref"):
    """One ref: its name and stored value."""


class ReflogRecord(EntryRecord, tag="reflog"):
    """One reflog entry: its key (ref name, 00, time) and stored value."""


class RedactionRecord(EntryRecord, tag="redaction"):
    """One redaction record: the erased version's hash and the stored record."""


class End(msgspec.Struct, tag_field="kind", tag="end", kw_only=True, forbid_unknown_fields=True):
    """The last record: every tenant's counts, and the digest of everything before it."""

    tenants: list[TenantCounts]
    digest: bytes


Record = Header | TenantRecord | ObjectRecord | RefRecord | ReflogRecord | RedactionRecord | End


_KINDS = ("header", "tenant", "object", "ref", "reflog", "redaction", "end")


_encoder = msgspec.msgpack.Encoder(order="deterministic")


_record_decoder: msgspec.msgpack.Decoder[Record] = msgspec.msgpack.Decoder(Record)


_end_decoder = msgspec.msgpack.Decoder(End)


class Writer:
    """Frames records, hashes them, and writes them in large pieces."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.hasher = blake3.blake3()
        self.buffer = bytearray()
        self.size = 0

    def record(self, record: Record) -> None:
        """Frame, hash and buffer one record."""
        body = _encoder.encode(record)
        frame = _LENGTH.pack(len(body)) + body
        self.hasher.update(frame)
        self.buffer += frame
        if len(self.buffer) >= _WRITE_BUFFER:
            self.flush()

    def end(self, tenants: list[TenantCounts]) -> bytes:
        """Write the end record with the digest of everything before it; return the digest."""
        digest = self.hasher.digest()
        body = _encoder.encode(End(tenants=tenants, digest=digest))
        self.buffer += _LENGTH.pack(len(body)) + body
        self.flush()
        return digest

    def flush(self) -> None:
        """Write what is buffered."""
        self.out.write(self.buffer)
        self.size += len(self.buffer)
        self.buffer = bytearray()


class Reader:
    """Reads framed records, hashing each one only once a record follows it.

    So when the end record has been read (and when the file has been read to its
    end), ``hasher`` covers exactly the bytes before the last record: what the
    end record's digest is of.
    """

    def __init__(self, inp: IO[bytes], source: str) -> None:
        self.inp = inp
        self.source = source
        self.hasher = blake3.blake3()
        self.pending = b""
        self.count = 0
        self.size = 0

    def next(self, limit: int | None = None) -> bytes | None:
        """The next record's body, or None at the end of the file."""
        head = _read_exactly(self.inp, _LENGTH.size)
        if not head:
            return None  # the last record stays out of the digest: it is the end record
        self.hasher.update(self.pending)
        self.pending = b""
        self.count += 1
        if len(head) < _LENGTH.size:
            raise self.damaged(f"it ends inside the length of record {self.count}")
        (length,) = _LENGTH.unpack(head)
        if limit is not None and length > limit:
            raise InvalidInput(f"{self.source} is not a Mnemosyne export")
        body = _read_exactly(self.inp, length)
        if len(body) < length:
            if self.count == 1:
                raise InvalidInput(f"{self.source} is not a Mnemosyne export (or is cut short in its header)")
            raise self.damaged(f"it ends inside record {self.count}")
        self.pending = head + body
        self.size += len(self.pending)
        return body

    def damaged(self, why: str) -> CorruptObject:
        """The error for a truncated or damaged export."""
        return CorruptObject(f"{self.source} is truncated or corrupt: {why}; nothing was imported")


def _read_exactly(inp: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes: fewer only at the end of the stream."""
    parts: list[bytes] = []
    left = n
    while left:
        piece = inp.read(min(left, _READ_CHUNK))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def read_header(reader: Reader) -> Header:
    """Read and check the header: refuse what is not an export, or a newer one."""
    body = reader.next(limit=_MAX_HEADER)
    if body is None:
        raise InvalidInput(f"{reader.source} is empty: not a Mnemosyne export")
    try:
        raw = msgspec.msgpack.decode(body)
    except msgspec.DecodeError:
        raw = None
    if not isinstance(raw, dict) or raw.get("kind") != "header" or raw.get("format") != FORMAT_NAME:
        raise InvalidInput(f"{reader.source} is not a Mnemosyne export")
    version = raw.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput(f"{reader.source}: {shown(version)} is not an export format version")
    if version > EXPORT_VERSION:
        raise InvalidInput(
            f"{reader.source} is a version {version} export; this Mnemosyne reads export versions up to "
            f"{EXPORT_VERSION}: upgrade Mnemosyne to import it"
        )
    try:
        header = msgspec.convert(raw, Header)
    except msgspec.ValidationError as exc:
        raise reader.damaged(f"its header is malformed ({exc})") from None
    if header.store_format > FORMAT:
        raise InvalidInput(
            f"{reader.source} holds a store of format {header.store_format}; this Mnemosyne reads up to "
            f"{FORMAT}: upgrade Mnemosyne to import it"
        )
    return header


def verify(inp: IO[bytes], start: int, source: str) -> End:
    """First pass: the header, the framing and the digest, before anything is written.

    So damage is reported as damage, not as whatever odd record it happens to
    produce, and a truncated file never gets as far as the store.
    """
    inp.seek(start)
    reader = Reader(inp, source)
    read_header(reader)
    last = b""
    while (body := reader.next()) is not None:
        last = body
    end = _decode_end(last, reader)
    if end.digest != reader.hasher.digest():
        raise reader.damaged("its digest does not match its contents")
    return end


def _decode_end(body: bytes, reader: Reader) -> End:
    try:
        return _end_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise reader.damaged("it has no end record") from None


def decode_record(body: bytes, reader: Reader) -> Record:
    """Decode one record, telling an unknown kind (a newer export) from damage."""
    try:
        return _record_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        try:
            raw = msgspec.msgpack.decode(body)
        except msgspec.DecodeError:
            raw = None
        kind = raw.get("kind") if isinstance(raw, dict) else None
        if isinstance(kind, str) and kind not in _KINDS:
            raise InvalidInput(
                f"{reader.source}: record {reader.count} is of kind {kind!r}, which this Mnemosyne "
                f"does not know (export version {EXPORT_VERSION})"
            ) from None
        raise InvalidInput(f"{reader.source}: record {reader.count} is malformed: {exc}") from None


SHOWN_BYTES = 64
"""Bytes (or characters) of a value from a file that an error message shows at most."""


def shown(raw: object) -> str:
    """A value read from an export as an error message shows it.

    Bytes that spell text without control characters are quoted as text (a ref
    name); any other bytes are given in hex (Python's own form, a ``b'...'`` of escapes,
    names no byte plainly); anything else as Python writes it. Cut after
    :data:`SHOWN_BYTES`.
    """
    if not isinstance(raw, bytes):
        text = repr(raw)
        return text if len(text) <= SHOWN_BYTES else f"{text[:SHOWN_BYTES]}…"
    if not raw:
        return "nothing (0 bytes)"
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = ""
    if text and not has_control(text):
        return f"{text[:SHOWN_BYTES]!r}{'…' if len(text) > SHOWN_BYTES else ''}"
    cut = "…" if len(raw) > SHOWN_BYTES else ""
    return f"{raw[:SHOWN_BYTES].hex()}{cut} (hex, {len(raw)} bytes)"


def describe(inp: IO[bytes]) -> str:
    """How messages name an input stream: its file name, or "the export"."""
    name = getattr(inp, "name", None)
    return name if isinstance(name, str) else "the export"


def read_records(inp: IO[bytes]) -> Iterator[dict[str, Any]]:
    """Yield an export's records as plain maps, without checking them (for inspection).

    Raises:
        CorruptObject: the input ends inside a record.
    """
    reader = Reader(inp, describe(inp))
    while (body := reader.next()) is not None:
        record = msgspec.msgpack.decode(body)
        yield record if isinstance(record, dict) else {"kind": None, "value": record}


def write_records(out: IO[bytes], items: Iterable[dict[str, Any]]) -> int:
    """Frame plain maps as export records, the last one an end record given its digest.

    For tools and tests that build or rewrite exports: every record is written as
    given, except that an ``end`` record gets the digest of what precedes it.

    Returns:
        The number of bytes written.
    """
    hasher = blake3.blake3()
    size = 0
    for item in items:
        if item.get("kind") == "end":
            item = {**item, "digest": hasher.digest()}
        body = _encoder.encode(item)
        frame = _LENGTH.pack(len(body)) + body
        hasher.update(frame)
        out.write(frame)
        size += len(frame)
    return size
