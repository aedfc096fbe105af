"""What a saver knows of each thread's latest checkpoints, keyed by the branch tip it was read at.

Objects never change, so what was read at a commit stays true of that commit. An
entry says "at tip T, the latest checkpoint of this namespace is this node, its
channels' values are these, its pending writes these": a saver that finds the
branch still at T, and the tenant's erasure count (``Repo.erasures``) where it
was before the entry was read, answers from it without descending the tree
(erasure leaves trees and tips as they were). The saver's own commits move the tip;
:meth:`LatestCheckpoints.advance` carries every entry the commit left alone to the
new tip, and the saver sets or drops the one it changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from mnemosyne import Commit, Node
from mnemosyne.integrations.langgraph.stored_values import Serialized

CACHED_THREADS = 128
"""How many threads' latest checkpoints a saver keeps (the least recently used go first)."""

KEPT_REPLACED = 3
"""How many of the checkpoints before each latest a saver keeps (writes two behind have been seen)."""


class Located(msgspec.Struct, frozen=True):
    """Where the value a checkpoint gives a channel is stored (ADR 33), and, when known, the value.

    Attributes:
        writer: the id of the checkpoint whose put stored the value (its value
            node says so: ``written_by``; ADR 33's was ``<namespace>/<writer>/c/<channel>``).
        version: the channel's version there.
        value: the value as it loads again (None: not read).
    """

    writer: str
    version: Any
    value: Serialized | None = None


class Replaced(msgspec.Struct, frozen=True):
    """The checkpoint a put replaced as its namespace's latest, as it was known then.

    LangGraph saves a task's writes from a worker thread: they can reach the saver
    after the put of the checkpoint that follows them. Kept, this lets those writes
    be stored without reading again where their checkpoint is.

    Attributes:
        node_id: the checkpoint node's id.
        checkpoint_id: the checkpoint's id.
        metadata: its metadata as it loads again.
        writes: its pending writes' contents by node id; None until they are read.
    """

    node_id: str
    checkpoint_id: str
    metadata: Serialized
    writes: dict[str, dict[str, Any]] | None


class Latest(msgspec.Struct, frozen=True):
    """The latest checkpoint of one thread and namespace, as the branch holds it at ``tip``.

    Attributes:
        tip: the commit of the thread's branch this is true at.
        node_id: the checkpoint node's id.
        content: the checkpoint node's content.
        checkpoint: the checkpoint as it loads again: without its channels' values
            (a checkpoint stored by channel), or whole (one stored as one blob).
        metadata: the metadata as it loads again.
        channels: each channel with a stored value, read (empty for a blob).
        writes: its pending writes' contents by node id; None until they are read.
        erasures: the tenant's erasure count read before any of this was: when it
            has grown since, something here may have been erased.
        pointer: the id of the node that names this checkpoint the latest (where
            an earlier version kept it, until a put moves it); empty when not read.
        at: the commit at ``tip`` when the saver made it: read at as a revision, it
            needs no lookup of a branch by that name (as the id's text does), so the
            pending writes of a checkpoint just put are read in one round trip on
            PostgreSQL. None when not made here, or from an earlier tip.
        exact: whether the namespace's value nodes at ``tip`` are exactly
            ``channels`` (so a put on this tip knows what each holds without a read).
        replaced: the checkpoints this one's put and those before it replaced as
            the latest, newest first, as far as this saver knew them (its parent and
            theirs, in a running graph); their nodes are at ``tip`` too.
    """

    tip: str
    node_id: str
    content: dict[str, Any]
    checkpoint: Serialized
    metadata: Serialized
    channels: dict[str, Located]
    writes: dict[str, dict[str, Any]] | None
    erasures: int
    pointer: str = ""
    at: Commit | None = None
    exact: bool = False
    replaced: tuple[Replaced, ...] = ()

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint's id."""
        return str(self.content["checkpoint_id"])


def complete(channels: Mapping[str, Located]) -> bool:
    """Whether every channel's value was read, so a :class:`Latest` may keep them."""
    return all(found.value is not None for found in channels.values())


_Checkpoint = TypeVar("_Checkpoint", Latest, Replaced)


def known_writes(known: _Checkpoint, writes: Sequence[Node]) -> _Checkpoint:
    """``known`` (the latest checkpoint, or one it replaced) with its pending writes read."""
    return msgspec.structs.replace(known, writes={node.id: node.content for node in writes})


def _with_puts(writes: dict[str, dict[str, Any]] | None, puts: Sequence[Node]) -> dict[str, dict[str, Any]]:
    """``writes`` and the write nodes ``puts``, by node id."""
    return {**(writes or {}), **{node.id: node.content for node in puts}}


def more_writes(known: Latest, made: Commit, puts: Sequence[Node]) -> Latest:
    """``known`` at the commit ``made``, which stored ``puts`` among its writes."""
    return msgspec.structs.replace(known, tip=made.id, writes=_with_puts(known.writes, puts), at=made)


def replaced_by(known: Latest) -> tuple[Replaced, ...]:
    """What a put that replaces ``known`` as the latest keeps of it and of those it replaced."""
    replaced = Replaced(known.node_id, known.checkpoint_id, known.metadata, known.writes)
    return (replaced, *known.replaced)[:KEPT_REPLACED]


def replaced_checkpoint(known: Latest | None, checkpoint_id: str) -> Replaced | None:
    """What ``known`` keeps of the checkpoint ``checkpoint_id`` it replaced, or None."""
    if known is None:
        return None
    return next((replaced for replaced in known.replaced if replaced.checkpoint_id == checkpoint_id), None)


def more_replaced_writes(known: Latest, replaced: Replaced, made: Commit, puts: Sequence[Node]) -> Latest:
    """``known`` at the commit ``made``, which stored ``puts`` among the writes of ``replaced``."""
    kept = msgspec.structs.replace(replaced, writes=_with_puts(replaced.writes, puts))
    chain = tuple(kept if r.checkpoint_id == kept.checkpoint_id else r for r in known.replaced)
    return msgspec.structs.replace(known, tip=made.id, at=made, replaced=chain)


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
        self, thread_id: str, before: str, after: Commit, *, changed: tuple[str, str] | None = None
    ) -> None:
        """A commit moved the thread from ``before`` to ``after``: carry what it left alone.

        Args:
            thread_id: the thread.
            before: the tip the commit was made on.
            after: the commit it made (the new tip).
            changed: (namespace, checkpoint id) whose pending writes the commit
                changed: that entry, if it is of that checkpoint, is dropped (and
                what an entry keeps of it as the checkpoint it replaced).
        """
        with self.lock:
            entries = self._threads.get(thread_id, {})
            for ns, known in list(entries.items()):
                if changed is not None and (ns, known.checkpoint_id) == changed:
                    del entries[ns]
                elif known.tip == before:
                    # One whose writes changed is dropped: whoever changed them says so, or nobody.
                    replaced = tuple(r for r in known.replaced if changed != (ns, r.checkpoint_id))
                    entries[ns] = msgspec.structs.replace(known, tip=after.id, at=after, replaced=replaced)
                else:
                    del entries[ns]  # known at another tip: no longer the branch's
