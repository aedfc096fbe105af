"""Content-addressed objects over a KV backend, scoped to one tenant, and their erasure records.

Bytes are verified against their hash every time they come back from storage,
so a corrupt object raises :class:`CorruptObject` instead of returning wrong
data. Decoded tree chunks and commits (immutable, small, read again and again)
are kept in a cache bounded in entries and in bytes; nodes are not, so erased
bytes never linger here.

The store owns two keyspaces: ``objects`` (scope · 32-byte id → the stored
bytes) and ``redactions`` (scope · 32-byte id → the ``redaction@1`` record of an
erased version). Nothing else reads or writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from operator import itemgetter
from typing import NamedTuple, cast

import blake3
import msgspec

from mnemosyne.errors import CorruptObject, NotFound, Redacted
from mnemosyne.model import codec
from mnemosyne.model.objects import (
    CommitObject,
    ContradictionObject,
    Node,
    ObjectId,
    Redaction,
    StoredObject,
    TreeChunk,
    VerifyingCommitObject,
    decode_object,
)
from mnemosyne.model.times import rfc3339
from mnemosyne.model.validation import MAX_NODE_BYTES, check_node_size
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

ERASURES = b"erasures"
"""Under ``redactions``: scope · ``erasures`` → :meth:`ObjectStore.erasures` (8 bytes, big-endian).

A count rather than a scan of the records, so that a face keeping what it read
checks in one read that nothing was erased since. No record's key is that short
(a record's is scope · a 32-byte object id), so listing the records skips it.
"""

CACHE_ENTRIES = 65536
"""Decoded chunks and commits a handle keeps at most."""
CACHE_BYTES = 32 << 20
"""Stored bytes of the chunks and commits a handle keeps at most. Decoded, they take
about three times that: a 100k-node tree (~7 MiB of chunks) fits whole, while
reading a 1M-node one (~70 MiB) grows a handle by ~100 MB, not ~200 MB (and
larger trees by no more, where 65,536 chunks came to ~330 MB)."""
ERASED_KEPT = 65536
"""Up to this many erasures, a handle keeps the ids of the erased versions (see
:meth:`ObjectStore.erased_absent`)."""
_redaction_encoder = msgspec.msgpack.Encoder()
_redaction_decoder = msgspec.msgpack.Decoder(Redaction)


def decode_redaction(data: bytes) -> Redaction:
    """Decode a stored redaction record.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: the bytes are not one.
    """
    return _redaction_decoder.decode(data)


def redacted_error(redaction: Redaction) -> Redacted:
    """The error a read of an erased version raises: who erased it, when and why."""
    return Redacted(
        f"version {redaction.hash[:12]} of {redaction.id} was erased at {rfc3339(redaction.time)} "
        f"by {redaction.author}: {redaction.reason}"
    )


class CacheContents(NamedTuple):
    """A copy of an object store's decode cache (see :meth:`ObjectStore.cache_contents`).

    Attributes:
        objects: the cached chunks and commits by id, oldest first.
        sizes: the stored size of each, as recorded when it was cached.
        total: the running total of those sizes, which the byte bound is checked against.
    """

    objects: dict[bytes, StoredObject]
    sizes: dict[bytes, int]
    total: int


class ObjectStore:
    """Objects of one tenant, addressed by the blake3 digest of their bytes."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope
        self._cache: dict[bytes, StoredObject] = {}
        self._sizes: dict[bytes, int] = {}  # stored size of each cached object
        self._cached_bytes = 0
        self._erased: tuple[int, frozenset[bytes]] = (0, frozenset())
        """The erased ids as of an :meth:`erasures` count: valid while the count stays."""
        self._erasing = 0
        """``id()`` of the last transaction that erased here: what it reads of records may roll back."""

    # -- reading --------------------------------------------------------------------

    def raw(self, txn: ReadTxn, oid: bytes) -> bytes | None:
        """Return the stored bytes of ``oid`` unverified, or None."""
        return txn.get(Space.OBJECTS, self.scope + oid)

    def raw_many(self, txn: ReadTxn, oids: list[bytes]) -> list[bytes | None]:
        """The stored bytes of each of ``oids``, unverified (None where absent): one PostgreSQL round trip."""
        return txn.get_many(Space.OBJECTS, [self.scope + oid for oid in oids])

    def contains(self, txn: ReadTxn, oid: bytes) -> bool:
        """Whether the object's bytes are stored."""
        # Storage only: the cache may hold objects of a write that was rolled back.
        return txn.get(Space.OBJECTS, self.scope + oid) is not None

    def scan(self, txn: ReadTxn, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(id, stored bytes)`` of every object (whose id starts with ``prefix``), unverified."""
        size = len(self.scope)
        for key, data in txn.scan(Space.OBJECTS, self.scope + prefix):
            yield key[size:], data

    def load(self, txn: ReadTxn, oid: bytes) -> StoredObject:
        """Read, verify and decode one object.

        Raises:
            NotFound: if no object has that id (``Redacted`` when it was erased).
            CorruptObject: if the bytes do not hash to ``oid`` or do not decode.
        """
        obj = self._cache.get(oid)
        if obj is not None:
            return obj
        data = txn.get(Space.OBJECTS, self.scope + oid)
        if data is None:
            redaction = self.redaction(txn, oid)
            if redaction is not None:
                raise redacted_error(redaction)
            raise NotFound(f"object {oid.hex()} is not in the store")
        return self._decoded(oid, data)

    def _decoded(self, oid: bytes, data: bytes) -> StoredObject:
        """Verify and decode stored bytes; chunks and commits are kept in the cache."""
        if codec.object_id(data) != oid:
            raise CorruptObject(f"object {oid.hex()} is corrupt: its bytes do not match its hash")
        obj = decode_object(data, oid)
        if isinstance(obj, Node):
            obj.__dict__["hash"] = oid.hex()
        else:
            self._remember(oid, obj, len(data))
        return obj

    def prefetch(self, txn: ReadTxn, oids: list[bytes]) -> None:
        """Read the chunks and commits of ``oids`` not cached, all at once (one round trip on PostgreSQL).

        Later loads of them are then served from the cache; what is missing or
        does not decode is left for :meth:`load` to report.
        """
        cache = self._cache
        wanted = list(dict.fromkeys(oid for oid in oids if oid not in cache))
        if len(wanted) < 2:
            return  # one is read as cheaply by load()
        found = txn.get_many(Space.OBJECTS, [self.scope + oid for oid in wanted])
        for oid, data in zip(wanted, found, strict=True):
            if data is not None:
                with suppress(CorruptObject):
                    self._decoded(oid, data)

    def nodes(self, txn: ReadTxn, oids: list[bytes]) -> list[Node | None]:
        """Load many node versions, those not at hand in one read (one round trip on PostgreSQL).

        In order; None for a version that was erased (its redaction record is there).

        Raises:
            NotFound: a version is neither stored nor erased.
            CorruptObject: as :meth:`load`.
        """
        out: list[Node | None] = []
        found = txn.get_many(Space.OBJECTS, [self.scope + oid for oid in oids])
        for oid, data in zip(oids, found, strict=True):
            if data is None:
                if self.redaction(txn, oid) is None:
                    raise NotFound(f"object {oid.hex()} is not in the store")
                out.append(None)
                continue
            node = self._decoded(oid, data)
            if not isinstance(node, Node):
                raise CorruptObject(f"object {oid.hex()} should be a node")
            out.append(node)
        return out

    def chunk(self, txn: ReadTxn, oid: bytes) -> TreeChunk:
        """Load a tree chunk."""
        obj = self.load(txn, oid)
        if not isinstance(obj, TreeChunk):
            raise CorruptObject(f"object {oid.hex()} should be a tree chunk")
        return obj

    def chunk_loader(self, txn: ReadTxn) -> Callable[[bytes], TreeChunk]:
        """A loader of tree chunks for tree walks, which call it in tight loops."""
        cache = self._cache

        def load(oid: bytes) -> TreeChunk:
            found = cache.get(oid)
            if found.__class__ is TreeChunk:
                return found
            return self.chunk(txn, oid)

        return load

    def commit(self, txn: ReadTxn, oid: bytes) -> CommitObject:
        """Load a commit."""
        obj = self.load(txn, oid)
        if not isinstance(obj, CommitObject):
            raise NotFound(f"{oid.hex()} is not a commit")
        return obj

    def node(self, txn: ReadTxn, oid: bytes) -> Node:
        """Load a node version."""
        obj = self.load(txn, oid)
        if not isinstance(obj, Node):
            raise CorruptObject(f"object {oid.hex()} should be a node")
        return obj

    def cache_contents(self) -> CacheContents:
        """A copy of the decode cache, for tests and diagnostics (its bounds, what eviction kept).

        Reads never need it: :meth:`load` serves from the cache itself.
        """
        return CacheContents(dict(self._cache), dict(self._sizes), self._cached_bytes)

    # -- writing --------------------------------------------------------------------

    def put(self, txn: WriteTxn, obj: StoredObject) -> ObjectId:
        """Encode and store ``obj`` (a no-op when present); return its id."""
        if isinstance(obj, Node):
            return self.put_nodes(txn, [obj])[0]
        return cast(ObjectId, self.put_chunk(txn, obj))

    def put_chunk(
        self, txn: WriteTxn, chunk: TreeChunk | CommitObject | VerifyingCommitObject | ContradictionObject
    ) -> bytes:
        """:meth:`put` of what is not a node; a commit calls it for each tree chunk it writes.

        The write a commit makes most (one per chunk on each edited path), so it skips
        :meth:`put`'s question of whether the object is a node.
        """
        data = codec.encode(chunk)
        oid: bytes = blake3.blake3(data).digest()
        txn.put_absent(Space.OBJECTS, [(self.scope + oid, data)])
        self._remember(oid, chunk, len(data))
        return oid

    def put_nodes(self, txn: WriteTxn, nodes: list[Node]) -> list[ObjectId]:
        """Store many node versions at once; return their ids in order."""
        encoded = self.encode_nodes(nodes)
        self.put_encoded(txn, encoded)
        return [oid for oid, _ in encoded]

    @staticmethod
    def encode_nodes(nodes: list[Node]) -> list[tuple[ObjectId, bytes]]:
        """Encode node versions and hash them, writing nothing: ``(id, bytes)`` in order.

        Raises:
            InvalidInput: a node cannot be encoded, or its encoding is larger than the limit.
        """
        # Node.hash is left to compute on demand: caching it would give each node a
        # __dict__, about a tenth of a bulk import's time.
        datas = codec.encode_all(nodes)
        if datas and max(map(len, datas)) > MAX_NODE_BYTES:
            for data in datas:
                check_node_size(len(data))
        return cast("list[tuple[ObjectId, bytes]]", list(zip(codec.object_ids(datas), datas, strict=True)))

    def put_encoded(self, txn: WriteTxn, encoded: list[tuple[ObjectId, bytes]]) -> None:
        """Store versions from :meth:`encode_nodes` (no-ops for those present)."""
        scope = self.scope
        items = [(scope + oid, data) for oid, data in encoded]
        # Sorted keys fill LMDB's pages in order: fewer splits, fewer dirty pages (a
        # million-node import writes in half the time). By the key alone: comparing
        # tuples compares every key twice.
        items.sort(key=itemgetter(0))
        txn.put_absent(Space.OBJECTS, items)

    def put_raw(self, txn: WriteTxn, oid: bytes, data: bytes) -> bool:
        """Store bytes already known to hash to ``oid`` (a restore); False when present."""
        return txn.put(Space.OBJECTS, self.scope + oid, data, overwrite=False)

    def remove(self, txn: WriteTxn, oid: bytes) -> None:
        """Delete an unreachable object (garbage collection)."""
        txn.discard(Space.OBJECTS, self.scope + oid)
        self._forget(oid)

    # -- erasure --------------------------------------------------------------------

    def redaction(self, txn: ReadTxn, oid: bytes) -> Redaction | None:
        """The redaction record of an erased version, or None."""
        data = txn.get(Space.REDACTIONS, self.scope + oid)
        if data is None:
            return None
        try:
            return decode_redaction(data)
        except msgspec.DecodeError as exc:
            raise CorruptObject(f"the redaction record of {oid.hex()} is damaged ({exc})") from None

    def redactions(self, txn: ReadTxn) -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(id, stored record)`` of every redaction record."""
        size = len(self.scope)
        for key, data in txn.scan(Space.REDACTIONS, self.scope):
            if len(key) == size + 32:  # not the count of erasures
                yield key[size:], data

    def erasures(self, txn: ReadTxn) -> int:
        """How many times a version of this tenant was erased, or a redaction record came in (only grows)."""
        found = txn.get(Space.REDACTIONS, self.scope + ERASURES)
        return int.from_bytes(found, "big") if found is not None else 0

    def erased_absent(self, txn: ReadTxn, oids: list[bytes]) -> list[bytes]:
        """Those of ``oids`` erased here whose bytes are not stored: storing them brings them back.

        The erasure count is read (on PostgreSQL a commit's read-ahead learns it: no
        round trip); the records, only when it changed since this handle last listed
        them, or when there are too many to keep (then one read of the records of
        ``oids``). The bytes are read only for versions that have a record.
        """
        count = self.erasures(txn)
        if not count:
            return []
        if count <= ERASED_KEPT:
            known, ids = self._erased
            if known != count:
                ids = frozenset(oid for oid, _ in self.redactions(txn))
                if self._erasing != id(txn):  # committed records only: a count names one set
                    self._erased = (count, ids)
            erased = [oid for oid in oids if oid in ids]
        else:
            records = txn.get_many(Space.REDACTIONS, [self.scope + oid for oid in oids])
            erased = [oid for oid, record in zip(oids, records, strict=True) if record is not None]
        if not erased:
            return []
        stored = self.raw_many(txn, erased)
        return [oid for oid, data in zip(erased, stored, strict=True) if data is None]

    def _count_erasure(self, txn: WriteTxn) -> None:
        self._erasing = id(txn)
        txn.put(Space.REDACTIONS, self.scope + ERASURES, (self.erasures(txn) + 1).to_bytes(8, "big"))

    def erase(self, txn: WriteTxn, oid: bytes, record: Redaction) -> Redaction:
        """Delete a version's bytes and keep a redaction record in their place.

        A version erased before keeps its first record (records are append-only);
        the one kept is returned.
        """
        txn.delete(Space.OBJECTS, self.scope + oid)
        self._forget(oid)
        self._count_erasure(txn)
        if not txn.put(
            Space.REDACTIONS, self.scope + oid, _redaction_encoder.encode(record), overwrite=False
        ):
            earlier = self.redaction(txn, oid)
            assert earlier is not None
            return earlier
        return record

    def put_raw_redaction(self, txn: WriteTxn, oid: bytes, data: bytes) -> bool:
        """Store a checked redaction record (a restore); False when one is there."""
        added = txn.put(Space.REDACTIONS, self.scope + oid, data, overwrite=False)
        if added:
            self._count_erasure(txn)
        return added

    def _remember(self, oid: bytes, obj: StoredObject, size: int) -> None:
        cache, sizes = self._cache, self._sizes
        if len(cache) >= CACHE_ENTRIES or self._cached_bytes + size > CACHE_BYTES:
            # Drop a quarter, oldest first: cheaper than LRU bookkeeping on every hit.
            # Inner chunks stay (every read passes through them, and there are about
            # a twentieth as many as leaves), unless nothing else is left to drop.
            quarter = max(1, len(cache) // 4)
            # list() copies the keys in one step under the GIL; iterating lazily would race
            # with other threads' inserts ("dictionary changed size during iteration").
            oldest = list(cache)[: 2 * quarter]
            doomed = [key for key in oldest if not getattr(cache.get(key), "level", 0)][:quarter]
            if len(doomed) < quarter:
                # Mostly inner chunks (many commits' versions of the upper tree): the oldest
                # of them go too, or the cache would evict a few entries at every insert.
                kept = set(doomed)
                doomed += [key for key in oldest if key not in kept][: quarter - len(doomed)]
            for stale in doomed:
                cache.pop(stale, None)  # another thread may be evicting the same entries
                sizes.pop(stale, None)
            # Summed afresh, not decremented: threads filling the cache at once may
            # have raced on the running total.
            self._cached_bytes = sum(list(sizes.values()))
        cache[oid] = obj
        if sizes.get(oid) is None:
            sizes[oid] = size
            self._cached_bytes += size

    def _forget(self, oid: bytes) -> None:
        self._cache.pop(oid, None)
        size = self._sizes.pop(oid, None)
        if size is not None:
            self._cached_bytes -= size
