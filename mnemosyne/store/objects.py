"""Content-addressed objects over a KV backend, scoped to one tenant.

Bytes are verified against their hash every time they come back from storage,
so a corrupt object raises :class:`CorruptObject` instead of returning wrong
data. Decoded tree chunks and commits (immutable, small, read again and again)
are kept in a bounded cache; nodes are not, so erased bytes never linger here.
"""

from __future__ import annotations

import msgspec

from mnemosyne.errors import CorruptObject, NotFound, Redacted
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, Node, ObjectId, Redaction, StoredObject, TreeChunk
from mnemosyne.model.validation import MAX_NODE_BYTES, check_node_size, rfc3339
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

CACHE_ENTRIES = 65536
_redaction_decoder = msgspec.msgpack.Decoder(Redaction)


class ObjectStore:
    """Objects of one tenant, addressed by the blake3 digest of their bytes."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope
        self._cache: dict[bytes, StoredObject] = {}

    def key(self, oid: bytes) -> bytes:
        """The storage key of an object id."""
        return self.scope + oid

    def raw(self, txn: ReadTxn, oid: bytes) -> bytes | None:
        """Return the stored bytes of ``oid`` unverified, or None."""
        return txn.get(Space.OBJECTS, self.scope + oid)

    def contains(self, txn: ReadTxn, oid: bytes) -> bool:
        """Whether the object's bytes are stored."""
        # Storage only: the cache may hold objects of a write that was rolled back.
        return txn.get(Space.OBJECTS, self.scope + oid) is not None

    def load(self, txn: ReadTxn, oid: bytes) -> StoredObject:
        """Read, verify and decode one object.

        Raises:
            NotFound: if no object has that id.
            CorruptObject: if the bytes do not hash to ``oid`` or do not decode.
        """
        obj = self._cache.get(oid)
        if obj is not None:
            return obj
        data = txn.get(Space.OBJECTS, self.scope + oid)
        if data is None:
            redaction = self.redaction(txn, oid)
            if redaction is not None:
                raise Redacted(
                    f"version {oid.hex()[:12]} of {redaction.id} was erased at {rfc3339(redaction.time)} "
                    f"by {redaction.author}: {redaction.reason}"
                )
            raise NotFound(f"object {oid.hex()} is not in the store")
        if codec.object_id(data) != oid:
            raise CorruptObject(f"object {oid.hex()} is corrupt: its bytes do not match its hash")
        obj = codec.decode(data, oid)
        if isinstance(obj, Node):
            obj.__dict__["hash"] = oid.hex()
        else:
            self._remember(oid, obj)
        return obj

    def redaction(self, txn: ReadTxn, oid: bytes) -> Redaction | None:
        """The redaction record of an erased version, or None."""
        data = txn.get(Space.REDACTIONS, self.scope + oid)
        return _redaction_decoder.decode(data) if data is not None else None

    def chunk(self, txn: ReadTxn, oid: bytes) -> TreeChunk:
        """Load a tree chunk."""
        obj = self.load(txn, oid)
        if not isinstance(obj, TreeChunk):
            raise CorruptObject(f"object {oid.hex()} should be a tree chunk")
        return obj

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

    def put(self, txn: WriteTxn, obj: StoredObject) -> ObjectId:
        """Encode and store ``obj`` (a no-op when present); return its id."""
        if isinstance(obj, Node):
            return self.put_nodes(txn, [obj])[0]
        data = codec.encode(obj)
        oid = ObjectId(codec.object_id(data))
        txn.put(Space.OBJECTS, self.scope + oid, data, overwrite=False)
        self._remember(oid, obj)
        return oid

    def put_nodes(self, txn: WriteTxn, nodes: list[Node]) -> list[ObjectId]:
        """Store many node versions at once; return their ids in order."""
        oids: list[ObjectId] = []
        items: list[tuple[bytes, bytes]] = []
        scope = self.scope
        encode = codec.encode
        object_id = codec.object_id
        for node in nodes:
            data = encode(node)
            if len(data) > MAX_NODE_BYTES:
                check_node_size(len(data))
            oid = ObjectId(object_id(data))
            oids.append(oid)
            items.append((scope + oid, data))
            # Node.hash is left to compute on demand: caching it would give each node a
            # __dict__, about a tenth of a bulk import's time.
        # Sorted keys fill LMDB's pages in order: fewer splits, fewer dirty pages.
        items.sort()
        txn.put_many(Space.OBJECTS, items, overwrite=False)
        return oids

    def _remember(self, oid: bytes, obj: StoredObject) -> None:
        cache = self._cache
        if len(cache) >= CACHE_ENTRIES:
            # Drop the oldest quarter: cheaper than LRU bookkeeping on every hit.
            for stale in list(cache)[: CACHE_ENTRIES // 4]:
                cache.pop(stale, None)  # another thread may be evicting the same entries
        cache[oid] = obj

    def forget_cached(self, oid: bytes) -> None:
        """Drop one object from the cache."""
        self._cache.pop(oid, None)
