"""The read log: what searches and contexts run with a run id returned (the ``reads`` keyspace).

Keys: scope · run id · ``00`` · sequence (8 bytes) → one :class:`ReadRecord`.
Erasure scrubs erased versions from every record; the log is kept with the
store, never exported.
"""

from __future__ import annotations

import msgspec

from mnemosyne.errors import CorruptObject
from mnemosyne.model.results import ReadRecord
from mnemosyne.store.kv.base import AppendLog, ReadTxn, Space, WriteTxn

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ReadRecord)


def _record(data: bytes) -> ReadRecord:
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise CorruptObject(f"a read log record is damaged ({exc})") from None


class ReadLog:
    """One tenant's read log."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def _prefix(self, run_id: str) -> bytes:
        return self.scope + run_id.encode() + b"\x00"

    def record(self, txn: WriteTxn, record: ReadRecord) -> None:
        """Append a read record under its run id."""
        AppendLog(txn, Space.READS, self._prefix(record.run_id)).append(_encoder.encode(record))

    def reads(self, txn: ReadTxn, run_id: str) -> list[ReadRecord]:
        """Every read recorded under ``run_id``, oldest first."""
        return [_record(value) for _, value in txn.scan(Space.READS, self._prefix(run_id))]

    def scrub(self, txn: WriteTxn, erased: set[str]) -> None:
        """Remove erased versions (by hash) from every read record."""
        if not erased:
            return
        for key, value in list(txn.scan(Space.READS, self.scope)):
            record = _record(value)
            if not erased.intersection(record.hashes):
                continue
            keep = [(i, h) for i, h in zip(record.ids, record.hashes, strict=True) if h not in erased]
            updated = msgspec.structs.replace(record, ids=[i for i, _ in keep], hashes=[h for _, h in keep])
            txn.put(Space.READS, key, _encoder.encode(updated))
