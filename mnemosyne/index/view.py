"""One tenant's stores and indexes, and a view of them bound to one transaction."""

from __future__ import annotations

import functools

from mnemosyne.index.changes import ChangeIndex
from mnemosyne.index.graph import CommitGraph
from mnemosyne.index.recall_queue import RecallQueue
from mnemosyne.model.objects import CommitObject, Node, TreeChunk
from mnemosyne.store.kv.base import ReadTxn, WriteTxn
from mnemosyne.store.object_store import ObjectStore
from mnemosyne.store.pending import PendingMarks
from mnemosyne.store.prolly import EMPTY, Tree
from mnemosyne.store.refs import RefStore


class Stores:
    """The object store, refs and derived indexes of one tenant (its key scope)."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope
        self.objects = ObjectStore(scope)
        self.refs = RefStore(scope)
        self.graph = CommitGraph(scope)
        self.changes = ChangeIndex(scope)
        self.queue = RecallQueue(scope)
        self.pending = PendingMarks(scope)


class View:
    """The stores seen through one read transaction."""

    def __init__(self, stores: Stores, txn: ReadTxn) -> None:
        self.txn = txn
        self.stores = stores
        self.objects = stores.objects
        self.refs = stores.refs
        self.graph = stores.graph
        self.changes = stores.changes
        self.tree = self._tree(stores, txn)

    def _tree(self, stores: Stores, txn: ReadTxn) -> Tree:
        return Tree(stores.objects.chunk_loader(txn))

    def chunk(self, oid: bytes) -> TreeChunk:
        """Load a tree chunk."""
        return self.objects.chunk(self.txn, oid)

    def commit(self, oid: bytes) -> CommitObject:
        """Load a commit."""
        return self.objects.commit(self.txn, oid)

    def node(self, oid: bytes) -> Node:
        """Load a node version."""
        return self.objects.node(self.txn, oid)


class WriteView(View):
    """A view that can also write."""

    txn: WriteTxn

    def _tree(self, stores: Stores, txn: ReadTxn) -> Tree:
        # One tree, that writes (not a read-only one replaced). Asking for a walk's chunks
        # ahead pays only where each read is a round trip. Chunks go straight to the object
        # store (a partial, not a method of this view): a commit stores one per edited chunk.
        fetch = self.prefetch if txn.remote else None
        store = functools.partial(stores.objects.put_chunk, self.txn)
        return Tree(stores.objects.chunk_loader(txn), store, fetch)

    def prefetch(self, oids: list[bytes]) -> None:
        """Read the chunks of ``oids`` not cached, all at once (a round trip on PostgreSQL, not one each)."""
        self.objects.prefetch(self.txn, oids)

    def put_chunk(self, chunk: TreeChunk) -> bytes:
        """Store a tree chunk."""
        return self.objects.put_chunk(self.txn, chunk)

    def empty_tree(self) -> bytes:
        """The id of the empty tree, stored."""
        return self.put_chunk(EMPTY)
