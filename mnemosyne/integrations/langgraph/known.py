"""What a saver knows of each thread's latest checkpoints, keyed by the branch tip it was read at.

Objects never change, so what was read at a commit stays true of that commit. An
entry says "at tip T, the latest checkpoint of this namespace is this node, with
these pending writes": a saver that finds the branch still at T answers from it
without descending the tree, once it has checked that none of it was erased since
(erasure leaves trees and tips as they were). The saver's own commits move the tip;
:meth:`LatestCheckpoints.advance` carries every entry the commit left alone to the
new tip, and the saver sets or drops the one it changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec

from mnemosyne import Node

CACHED_THREADS = 128
"""How many threads' latest checkpoints a saver keeps (the least recently used go first)."""


class Latest(msgspec.Struct, frozen=True):
    """The latest checkpoint of one thread and namespace, as the branch holds it at ``tip``.

    Attributes:
        tip: the commit of the thread's branch this is true at.
        node_id: the checkpoint node's id.
        content: the checkpoint node's content.
        checkpoint: the serialized checkpoint (type, bytes), decoded from the node once.
        metadata: the serialized metadata (type, bytes).
        writes: its pending writes' contents by node id; None until they are read.
        hashes: the versions this rests on (the checkpoint node and the writes known).
    """

    tip: str
    node_id: str
    content: dict[str, Any]
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    writes: dict[str, dict[str, Any]] | None
    hashes: tuple[str, ...]

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint's id."""
        return str(self.content["checkpoint_id"])


def known_writes(known: Latest, writes: Sequence[Node]) -> Latest:
    """``known`` with its pending writes read (``hashes`` keeps the checkpoint node's first)."""
    return msgspec.structs.replace(
        known,
        writes={node.id: node.content for node in writes},
        hashes=(known.hashes[0], *(node.hash for node in writes)),
    )


def more_writes(known: Latest, tip: str, puts: Sequence[Node]) -> Latest:
    """``known`` at ``tip``, after a commit that stored ``puts`` among its writes."""
    writes = dict(known.writes or {})
    hashes = dict(zip(writes, known.hashes[1:], strict=True))
    for node in puts:
        writes[node.id] = node.content
        hashes[node.id] = node.hash
    return msgspec.structs.replace(
        known, tip=tip, writes=writes, hashes=(known.hashes[0], *(hashes[i] for i in writes))
    )


class LatestCheckpoints:
    """A bounded map (thread, namespace) → :class:`Latest`, and the lock a saver's writes hold.

    LangGraph saves pending writes from worker threads; a saver holds :attr:`lock`
    from reading what it knows to recording what its commit changed, so two of its
    own writes never interleave between those steps.
    """

    def __init__(self, size: int = CACHED_THREADS) -> None:
        self.lock = threading.RLock()
        self._size = size
        self._threads: OrderedDict[str, dict[str, Latest]] = OrderedDict()

    def get(self, thread_id: str, ns: str) -> Latest | None:
        """What is known of a namespace's latest checkpoint, or None."""
        with self.lock:
            return self._threads.get(thread_id, {}).get(ns)

    def set(self, thread_id: str, ns: str, latest: Latest | None) -> None:
        """Know ``latest`` (or nothing) of a namespace."""
        with self.lock:
            entries = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            if latest is None:
                entries.pop(ns, None)
            else:
                entries[ns] = latest
            while len(self._threads) > self._size:
                self._threads.popitem(last=False)

    def forget(self, thread_ids: Sequence[str] | None) -> None:
        """Know nothing of these threads (of any thread: None)."""
        with self.lock:
            if thread_ids is None:
                self._threads.clear()
            for thread_id in thread_ids or ():
                self._threads.pop(thread_id, None)

    def advance(
        self, thread_id: str, before: str, after: str, *, changed: tuple[str, str] | None = None
    ) -> None:
        """A commit moved the thread from ``before`` to ``after``: carry what it left alone.

        Args:
            thread_id: the thread.
            before: the tip the commit was made on.
            after: the tip it made.
            changed: (namespace, checkpoint id) whose pending writes the commit
                changed: that entry, if it is of that checkpoint, is dropped.
        """
        with self.lock:
            entries = self._threads.get(thread_id, {})
            for ns, known in list(entries.items()):
                if changed is not None and (ns, known.checkpoint_id) == changed:
                    del entries[ns]
                elif known.tip == before:
                    entries[ns] = msgspec.structs.replace(known, tip=after)
                else:
                    del entries[ns]  # known at another tip: no longer the branch's
