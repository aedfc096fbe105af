"""Embedding vectors, stored in blocks (a handle's matrix of them: :mod:`mnemosyne.recall.matrix`).

Vectors are keyed by (model id, content hash): equal texts embed once, another
model never disturbs them. They are stored :data:`BLOCK_ROWS` to a block, so a
block fills whole pages (a lone 384-dim float32 vector would leave most of an
LMDB page empty) and catching up writes one key per block. Erasing a content
rewrites its block with that row zeroed.

Keys (behind the tenant scope) in the ``vectors`` keyspace, per model:
model 00 content hash → block (u32) and row (u16) ·
model 01 sequence → change (``+`` block: its rows were added; ``-`` block: rows
of it were dropped; ``*``: start over), which lets each handle refresh its
in-memory matrix incrementally (the log never names a content, so it keeps
nothing of an erased one) ·
model 02 block → row count (u16), the rows' content hashes, then their float32
vectors (a dropped row has a zero hash and a zero vector), then a CRC-32 of all
that (u32): vectors are derived data, but a damaged one changes what a semantic
search returns without any other sign, so each block is checked as it is read
(and by ``fsck``). The count's top bit marks a block with the checksum; blocks
written before it have none (``mnemo reindex --vectors`` rewrites them).
In the ``recall`` keyspace: ``m`` model id → dimension · ``i`` → the index identity,
16 random bytes naming this tenant's vectors in the files of a saved approximate
index (see :mod:`mnemosyne.recall.index_files`): a file written for another store
(or for this one before its recall keyspace was wiped) does not match.
"""

from __future__ import annotations

import secrets
import struct
import zlib
from collections.abc import Iterable, Iterator

import numpy as np

from mnemosyne.errors import CorruptObject
from mnemosyne.recall.embedders import Vectors
from mnemosyne.store.kv.base import AppendLog, ReadTxn, Space, WriteTxn, last_number

MODEL = b"m"
IDENTITY = b"i"
BLOCK_ROWS = 32
"""Vectors per block: small enough that erasing one rewrites little."""

_MAP, _LOG, _BLOCK = b"\x00", b"\x01", b"\x02"
_WHERE = struct.Struct(">IH")
_ROWS = [row.to_bytes(2, "big") for row in range(BLOCK_ROWS)]  # a map entry is block + row
_COUNT = struct.Struct(">H")
_CHECKED = 0x8000
"""The count's top bit: the block ends in a CRC-32 of what precedes it."""
_CRC = struct.Struct(">I")
DEAD = bytes(32)
"""The content hash of a dropped row in a block."""


def pack_block(hashes: list[bytes], vectors: bytes) -> bytes:
    """A block as stored: its rows' content hashes and float32 vectors, checksummed."""
    body = _COUNT.pack(len(hashes) | _CHECKED) + b"".join(hashes) + vectors
    return body + _CRC.pack(zlib.crc32(body))


def _rows_end(data: bytes) -> tuple[int, int]:
    """A block's row count and where its vectors end; its checksum checked.

    Raises:
        CorruptObject: the block does not match its checksum.
        struct.error: it is too short to hold a count.
    """
    (count,) = _COUNT.unpack_from(data)
    if not count & _CHECKED:
        if not count:  # no block is stored empty: zeroed bytes
            raise CorruptObject(
                "the search index is damaged (a vector block reads as empty); "
                "run 'mnemo reindex --vectors' to rebuild it"
            )
        return count, len(data)  # written before blocks had checksums
    end = len(data) - _CRC.size
    if end < _COUNT.size or zlib.crc32(memoryview(data)[:end]) != _CRC.unpack_from(data, end)[0]:
        raise CorruptObject(
            "the search index is damaged (a vector block does not match its checksum); "
            "run 'mnemo reindex --vectors' to rebuild it"
        )
    return count & ~_CHECKED, end


def parse_block(data: bytes) -> tuple[list[bytes], Vectors]:
    """A block's content hashes and vectors (a dropped row's hash is all zeros).

    Raises:
        CorruptObject: the block is damaged (its checksum, or its shape).
    """
    try:
        count, stop = _rows_end(data)
        end = _COUNT.size + 32 * count
        hashes = [data[i : i + 32] for i in range(_COUNT.size, end, 32)]
        if count:
            rows = np.frombuffer(data, dtype="<f4", offset=end, count=(stop - end) // 4).reshape(count, -1)
        else:
            rows = np.zeros((0, 0))
    except (struct.error, ValueError) as exc:
        raise CorruptObject(
            f"the search index is damaged (a vector block: {exc}); "
            "run 'mnemo reindex --vectors' to rebuild it"
        ) from None
    if len(hashes) != count:
        raise CorruptObject(
            "the search index is damaged (a vector block is cut short); run 'mnemo reindex --vectors'"
        )
    return hashes, rows.astype(np.float32, copy=False)


def block_row(data: bytes, slot: int, dim: int) -> Vectors | None:
    """Row ``slot`` of a stored block (``dim`` wide), read without parsing the rest; None if absent.

    Raises:
        CorruptObject: the block does not match its checksum.
    """
    try:
        count, stop = _rows_end(data)
    except struct.error:
        return None
    start = _COUNT.size + 32 * count + 4 * dim * slot
    if slot >= count or start + 4 * dim > stop:
        return None
    return np.frombuffer(data, dtype="<f4", count=dim, offset=start)


class Writer:
    """Stores new vectors of one model in new blocks, reading where the blocks end once.

    With ``defer_map`` the map entries wait for :meth:`close`, which writes them
    in key order (content hashes are random: written batch by batch, each would
    land on a page of its own).
    """

    def __init__(self, txn: WriteTxn, scope: bytes, model: str, defer_map: bool = False) -> None:
        self._txn = txn
        self._prefix = scope + model.encode()
        self._log = _log(txn, scope, model)
        self._block = last_number(txn, Space.VECTORS, self._prefix + _BLOCK)
        self._deferred: list[tuple[bytes, bytes]] | None = [] if defer_map else None

    def store(self, hashes: list[bytes], vectors: Vectors) -> None:
        """Store unit vectors of contents that have none under this model yet."""
        prefix = self._prefix
        rows = np.ascontiguousarray(vectors, dtype="<f4")
        blocks: list[tuple[bytes, bytes]] = []
        where: list[tuple[bytes, bytes]] = []
        for start in range(0, len(hashes), BLOCK_ROWS):
            self._block += 1
            number = self._block.to_bytes(4, "big")
            chunk = hashes[start : start + BLOCK_ROWS]
            data = rows[start : start + len(chunk)].tobytes()
            blocks.append((prefix + _BLOCK + number, pack_block(chunk, data)))
            where.extend(
                (prefix + _MAP + chash, number + row) for chash, row in zip(chunk, _ROWS, strict=False)
            )
            self._log.append(b"+" + number)
        self._txn.put_many(Space.VECTORS, blocks)
        if self._deferred is not None:
            self._deferred.extend(where)
        else:
            where.sort()
            self._txn.put_many(Space.VECTORS, where)

    def close(self) -> None:
        """Write the deferred map entries."""
        if self._deferred:
            self._deferred.sort()
            self._txn.put_many(Space.VECTORS, self._deferred)
            self._deferred = []


class VectorStore:
    """One tenant's embedding vectors: the ``vectors`` keyspace, and the ``recall`` ``m`` family."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def models(self, txn: ReadTxn) -> list[str]:
        """The model ids that have vectors in this tenant."""
        prefix = self.scope + MODEL
        return [key[len(prefix) :].decode(errors="replace") for key, _ in txn.scan(Space.RECALL, prefix)]

    def has_model(self, txn: ReadTxn, model: str) -> bool:
        """Whether ``model`` has embedded anything here."""
        return txn.get(Space.RECALL, self.scope + MODEL + model.encode()) is not None

    def model_dims(self, txn: ReadTxn) -> Iterator[tuple[str, bytes]]:
        """Every model with its stored dimension, as stored (for checks)."""
        prefix = self.scope + MODEL
        for key, value in txn.scan(Space.RECALL, prefix):
            yield key[len(prefix) :].decode(errors="replace"), value

    def set_model(self, txn: WriteTxn, model: str, dim: int) -> None:
        """Record that ``model`` (of dimension ``dim``) embeds here."""
        txn.put(Space.RECALL, self.scope + MODEL + model.encode(), str(dim).encode())

    def identity(self, txn: ReadTxn) -> bytes | None:
        """The tenant's index identity (see the module docstring), or None before one is made."""
        return txn.get(Space.RECALL, self.scope + IDENTITY)

    def ensure_identity(self, txn: WriteTxn) -> None:
        """Make the tenant's index identity, if it has none yet."""
        if self.identity(txn) is None:
            txn.put(Space.RECALL, self.scope + IDENTITY, secrets.token_bytes(16))

    def forget_models(self, txn: WriteTxn) -> None:
        """Forget which models embedded here (their vectors cleared)."""
        for key in [key for key, _ in txn.scan(Space.RECALL, self.scope + MODEL)]:
            txn.discard(Space.RECALL, key)

    def any(self, txn: ReadTxn) -> bool:
        """Whether any vector (or its log) is kept."""
        return next(iter(txn.scan(Space.VECTORS, self.scope)), None) is not None

    def with_vectors(self, txn: ReadTxn, model: str, hashes: list[bytes]) -> set[bytes]:
        """Those of content ``hashes`` that ``model`` has vectors for, read at once."""
        prefix = self.scope + model.encode() + _MAP
        found = txn.get_many(Space.VECTORS, [prefix + chash for chash in hashes])
        return {chash for chash, data in zip(hashes, found, strict=True) if data is not None}

    def vector_hashes(self, txn: ReadTxn, model: str) -> Iterator[bytes]:
        """The content hashes ``model`` has vectors for."""
        prefix = self.scope + model.encode() + _MAP
        for key, _ in txn.scan(Space.VECTORS, prefix):
            yield key[len(prefix) :]

    def blocks(self, txn: ReadTxn, model: str) -> Iterator[bytes]:
        """Every stored block of ``model``, as stored."""
        for _, data in txn.scan(Space.VECTORS, self.scope + model.encode() + _BLOCK):
            yield data

    def block_hashes(self, txn: ReadTxn, model: str) -> Iterator[bytes]:
        """The content hashes of every live row of ``model``'s blocks."""
        for data in self.blocks(txn, model):
            yield from (chash for chash in parse_block(data)[0] if chash != DEAD)

    def capacity(self, txn: ReadTxn, model: str) -> int:
        """How many vectors ``model``'s blocks could hold: a bound on its vectors, read in one step."""
        return BLOCK_ROWS * self._last(txn, self.scope + model.encode() + _BLOCK)

    def block(self, txn: ReadTxn, model: str, number: bytes) -> bytes | None:
        """One block of ``model`` as stored (``number``: 4 bytes), or None."""
        return txn.get(Space.VECTORS, self.scope + model.encode() + _BLOCK + number)

    def blocks_at(self, txn: ReadTxn, model: str, numbers: list[bytes]) -> dict[bytes, bytes]:
        """The blocks of ``model`` with these ``numbers`` (4 bytes each) that exist, read at once."""
        prefix = self.scope + model.encode() + _BLOCK
        found = txn.get_many(Space.VECTORS, [prefix + number for number in numbers])
        return {number: data for number, data in zip(numbers, found, strict=True) if data is not None}

    def where(self, txn: ReadTxn, model: str, chash: bytes) -> tuple[int, int] | None:
        """``(block, row)`` of a content's vector under ``model``, or None."""
        data = txn.get(Space.VECTORS, self.scope + model.encode() + _MAP + chash)
        return _WHERE.unpack(data) if data is not None else None

    def log_entry(self, txn: ReadTxn, model: str, seq: int) -> bytes | None:
        """Entry ``seq`` of ``model``'s change log, or None."""
        return txn.get(Space.VECTORS, self.scope + model.encode() + _LOG + seq.to_bytes(8, "big"))

    def last_seq(self, txn: ReadTxn, model: str) -> int:
        """The sequence number of ``model``'s last change-log entry (0: none)."""
        return self._last(txn, self.scope + model.encode() + _LOG)

    def log_since(self, txn: ReadTxn, model: str, seq: int) -> Iterator[tuple[int, bytes]]:
        """``(sequence, change)`` of ``model``'s change log after ``seq``."""
        log = self.scope + model.encode() + _LOG
        for key, change in txn.scan(Space.VECTORS, log, start=log + (seq + 1).to_bytes(8, "big")):
            yield int.from_bytes(key[len(log) :], "big"), change

    def writer(self, txn: WriteTxn, model: str, defer_map: bool = False) -> Writer:
        """A writer storing new vectors of ``model`` (see :class:`Writer`)."""
        return Writer(txn, self.scope, model, defer_map)

    def _last(self, txn: ReadTxn, prefix: bytes) -> int:
        return last_number(txn, Space.VECTORS, prefix)

    def drop(self, txn: WriteTxn, model: str, chashes: Iterable[bytes]) -> int:
        """Erase the vectors of these contents under ``model``; return how many there were.

        Each block is rewritten once, with the dropped rows zeroed (or deleted when
        no row is left), so the vector bytes leave the index, not only its map.
        """
        prefix = self.scope + model.encode()
        rows: dict[int, list[int]] = {}
        gone: list[bytes] = []
        for chash in chashes:
            key = prefix + _MAP + chash
            data = txn.get(Space.VECTORS, key)
            if data is None:
                continue
            block, row = _WHERE.unpack(data)
            rows.setdefault(block, []).append(row)
            txn.discard(Space.VECTORS, key)
            gone.append(chash)
        for block, dropped in rows.items():
            key = prefix + _BLOCK + block.to_bytes(4, "big")
            data = txn.get(Space.VECTORS, key)
            if data is None:
                continue
            hashes, vectors = parse_block(data)
            for row in dropped:
                hashes[row] = DEAD
            if all(chash == DEAD for chash in hashes):
                txn.discard(Space.VECTORS, key)
                continue
            kept = vectors.copy()
            kept[dropped] = 0.0
            txn.put(Space.VECTORS, key, pack_block(hashes, kept.astype("<f4").tobytes()))
        # The log names the blocks rewritten, never the contents: a content hash would
        # confirm a guess of the erased text.
        log = _log(txn, self.scope, model)
        for block in rows:
            log.append(b"-" + block.to_bytes(4, "big"))
        return len(gone)

    def keep_only(self, txn: WriteTxn, contents: set[bytes]) -> int:
        """Drop every vector whose content is not in ``contents``; return how many went."""
        return sum(
            self.drop(txn, model, [c for c in self.vector_hashes(txn, model) if c not in contents])
            for model in self.models(txn)
        )

    def clear(self, txn: WriteTxn) -> None:
        """Drop every vector of the tenant.

        Each model's change log keeps counting up from where it was, after a ``*``
        entry that tells every handle's cached matrix to start over (a log that
        restarted at 1 would hide new vectors from handles that had read further).
        """
        scope = self.scope
        restart = {model: self._last(txn, scope + model.encode() + _LOG) for model in self.models(txn)}
        for model in restart:
            prefix = scope + model.encode()
            for key in [key for key, _ in txn.scan(Space.VECTORS, prefix + _MAP)]:
                txn.discard(Space.VECTORS, key)
            # Blocks and log entries are numbered: deleted by number, their values unread.
            for part in (_BLOCK, _LOG):
                first = next(iter(txn.scan(Space.VECTORS, prefix + part)), None)
                if first is not None:
                    start = int.from_bytes(first[0][len(prefix) + 1 :], "big")
                    width = 4 if part == _BLOCK else 8
                    for number in range(start, self._last(txn, prefix + part) + 1):
                        txn.discard(Space.VECTORS, prefix + part + number.to_bytes(width, "big"))
        for key in [key for key, _ in txn.scan(Space.VECTORS, scope)]:
            # Anything else, such as the log of a model no longer listed (its vectors
            # all went): its count must go on too, for handles that read that far.
            rest = bytes(key[len(scope) :])
            cut = next((i for i, byte in enumerate(rest) if byte < 3), -1)
            if cut > 0 and rest[cut : cut + 1] == _LOG and len(rest) == cut + 9:
                model = rest[:cut].decode(errors="replace")
                restart[model] = max(restart.get(model, 0), int.from_bytes(rest[cut + 1 :], "big"))
            txn.discard(Space.VECTORS, key)
        for model, seq in restart.items():
            txn.put(Space.VECTORS, scope + model.encode() + _LOG + (seq + 1).to_bytes(8, "big"), b"*")


def _log(txn: WriteTxn, scope: bytes, model: str) -> AppendLog:
    """One model's change log."""
    return AppendLog(txn, Space.VECTORS, scope + model.encode() + _LOG)
