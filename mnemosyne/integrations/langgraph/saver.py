"""``MnemosyneSaver``: LangGraph's checkpointer on a Mnemosyne store.

The mapping (ADRs 17 and 33):

- a thread is a branch, ``threads/<thread>`` (ADR 28: the id, escaped when it is
  not plain; ``Repo.thread_branch`` names it); every checkpoint namespace of the
  thread lives on it, so ``mnemo log --thread <thread id>`` is the thread's history,
  one commit per checkpoint (``checkpoint step 3 (loop)``; a time-travel fork
  ``fork of <checkpoint id>: checkpoint step 3 (update)``);
- a checkpoint is stored by channel (ADRs 33 and 65): each channel's value lives at
  one id, ``threads/<thread>/<ns>/~channels/<channel>``, its value as JSON where it
  has an exact JSON form and as the serializer's bytes otherwise, and the commit of
  a checkpoint's put holds the checkpoint's values there (a put writes the channels
  LangGraph says changed, ``new_versions``); the checkpoint node,
  ``threads/<thread>/<ns>/<checkpoint_id>``, holds the checkpoint without its
  values, the metadata, and which checkpoint's put wrote each channel's value, so an
  unchanged channel costs a put nothing and a diff of two steps shows each changed
  channel as one id, old → new; earlier values are read from earlier commits; one commit per put, whose
  parent is the branch tip, while the checkpoint's own parent (LangGraph's
  ``parent_config``) is kept in the node, so a fork inside a thread (time travel)
  never leaves a checkpoint unreachable; a checkpoint an earlier version stored
  as one blob is read as it is;
- the latest checkpoint of a namespace is named by a small pointer node,
  ``threads/<thread>/<ns>/~latest`` (``threads/<thread>/<ns>`` before ADR 33, still
  read, moved by the next put), updated by the same commit;
- pending writes are nodes under ``threads/<thread>/<ns>/<checkpoint_id>/w/``, one
  commit per ``put_writes``, their values stored as channel values are.

Below the thread, a namespace is its name (the root one ``_root``, one that is not
plain ``_`` and its name, escaped), a channel its name, escaped; a checkpoint or
task id is the name itself when it is plain (letters, digits, ``.``, ``_``, ``-``)
and otherwise ``_`` plus a digest, so any name maps to a valid id; the real names
are kept in the nodes. A namespace an earlier version named by a digest stays there.

Deleting (``delete_thread``, ``delete_for_runs``, ``prune``) removes what LangGraph
reads at once. The bytes stay in the store's history until they leave it: a
deleted thread's branch is collected by ``gc`` once its reflog entries expire;
checkpoints deleted from a live thread stay in that thread's earlier commits. With
``erase=True`` every delete also erases the deleted versions' bytes (a redaction
record stays), and ``gc(compact=True)`` then leaves none of them in the file.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from mnemosyne import Commit, InvalidInput, Node
from mnemosyne.integrations.langgraph.channel_values import SnapshotValues, read_values
from mnemosyne.integrations.langgraph.checkpoint_writer import CheckpointWriter, checkpoint_node, namespace_at
from mnemosyne.integrations.langgraph.known import (
    Latest,
    LatestCheckpoints,
    known_writes,
)
from mnemosyne.integrations.langgraph.opening import OwnsItsRepo
from mnemosyne.integrations.langgraph.repo_protocol import ThreadRepo
from mnemosyne.integrations.langgraph.stored_values import Serialized, load, serialized
from mnemosyne.integrations.langgraph.thread_nodes import (
    WRITES,
    checkpoint_tuple,
    is_checkpoint,
    owner,
    stored_parts,
)
from mnemosyne.integrations.langgraph.thread_removal import (
    Removal,
    copy_thread,
    delete_for_runs,
    delete_thread,
    prune,
    thread_branches,
    thread_snapshot,
)
from mnemosyne.integrations.langgraph.threads import (
    configurable as thread_config,
)
from mnemosyne.integrations.langgraph.threads import (
    segment,
)

_BATCH = 64
"""How many checkpoints ``alist`` takes from its worker thread at a time."""


def _next_batch(found: Iterator[CheckpointTuple]) -> list[CheckpointTuple]:
    return list(itertools.islice(found, _BATCH))


class MnemosyneSaver(OwnsItsRepo, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose threads are branches of a Mnemosyne store.

    Args:
        repo: an open :class:`~mnemosyne.Repo`, or a served store's handle
            (``mnemosyne.connect(url, token=...)``): the tenant the threads live in.
        serde: LangGraph's serializer (default: its JSON-plus serializer).
        author: the author of the commits the saver makes.
        erase: whether deleting also erases the deleted versions' bytes (see the module).
        close_repo: whether :meth:`close` (and leaving a ``with`` block) closes ``repo``.

    The async methods run the same work in a worker thread (``asyncio.to_thread``),
    so a graph's event loop keeps serving while a checkpoint waits for the disk
    or the server.
    """

    repo: ThreadRepo

    def __init__(
        self,
        repo: ThreadRepo,
        *,
        serde: SerializerProtocol | None = None,
        author: str = "langgraph",
        erase: bool = False,
        close_repo: bool = False,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(repo, ThreadRepo):
            raise InvalidInput(
                "MnemosyneSaver needs an open mnemosyne.Repo or a served store (mnemosyne.connect)"
            )
        self.repo = repo
        self.author = author
        self.erase = erase
        self.close_repo = close_repo
        self._known = LatestCheckpoints()

    # -- reading ---------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the latest of its thread and namespace."""
        configurable = thread_config(config)
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        branch = self.repo.thread_branch(thread_id)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is not None:
            tip = self.repo.tip(branch)
            if tip is None:
                return None
            node, own = checkpoint_node(self.repo, branch, ns, checkpoint_id, tip)
            if node is None:
                return None
            return self._tuple(self._read(tip, node, 0, own=own))
        with self._known.lock:
            known = self._latest(thread_id, ns)
        if known is None or known.writes is None:
            return None
        return self._tuple(known)

    def _latest(self, thread_id: str, ns: str) -> Latest | None:
        """The namespace's latest checkpoint with its writes, as the branch holds it now.

        Read fresh, in one read: the tip says whether what the saver knows still
        holds, and the tenant's erasure count whether any of it may have been erased
        since (read before anything it vouches for).
        """
        branch = self.repo.thread_branch(thread_id)
        fresh = self.repo.freshness(branch)
        erasures, tip = fresh.erasures, fresh.tip
        if tip is None:
            self._known.forget([thread_id])
            return None
        known = self._known.get(thread_id, ns)
        if known is not None and (known.tip != tip or known.erasures != erasures):
            known = None
        if known is not None and known.writes is None:
            at = known.at if known.at is not None and known.at.id == tip else tip
            known = known_writes(known, self._writes_nodes(at, known.node_id))
            self._known.set(thread_id, ns, known)
        if known is None:
            base, pointer, _ = namespace_at(self.repo, branch, ns, tip)
            if pointer is None:
                return None
            node = self.repo.get(f"{base}/{segment(str(pointer.content['latest']))}", at=tip)
            if node is None:
                return None
            known = self._read(tip, node, erasures, pointer.id)
            self._known.set(thread_id, ns, known)
        return known

    def _read(self, tip: str, node: Node, erasures: int, pointer: str = "", own: str | None = None) -> Latest:
        """All a tuple takes of checkpoint ``node`` at ``tip``: the node, its values, its writes.

        ``own``: the commit of the checkpoint's put, when read with the node.
        """
        checkpoint, metadata = stored_parts(node.content)
        channels, exact = read_values(self.repo, self.serde.loads_typed, tip, node, own)
        known = Latest(
            tip, node.id, node.content, checkpoint, metadata, channels, None, erasures, pointer, exact=exact
        )
        return known_writes(known, self._writes_nodes(tip, node.id))

    def _writes_nodes(self, at: Commit | str, checkpoint_node_id: str) -> list[Node]:
        return list(self.repo.nodes(at=at, prefix=checkpoint_node_id + WRITES))

    def _tuple(self, known: Latest) -> CheckpointTuple:
        values = {
            channel: where.value for channel, where in known.channels.items() if where.value is not None
        }
        writes = list((known.writes or {}).values())
        return checkpoint_tuple(
            self.serde.loads_typed, known.content, writes, known.checkpoint, known.metadata, values
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id), optionally of one thread and namespace.

        ``filter`` keeps those whose metadata has each key equal to its value;
        ``before`` those older than the checkpoint it names.
        """
        if limit is not None and limit <= 0:
            return
        if config is not None:
            configurable = thread_config(config)
            branches = [self.repo.thread_branch(str(configurable["thread_id"]))]
            ns: str | None = configurable.get("checkpoint_ns")
            wanted_id = get_checkpoint_id(config)
        else:
            branches, ns, wanted_id = thread_branches(self.repo), None, None
        before_id = get_checkpoint_id(before) if before is not None else None
        found: list[tuple[str, Node, SnapshotValues]] = []
        writes: dict[str, list[dict[str, Any]]] = {}  # checkpoint node id -> its writes' contents
        for branch in branches:
            saved = thread_snapshot(self.repo, branch)
            if saved is None:
                continue
            values_of = SnapshotValues(self.repo, saved[0], saved[1])
            for node in saved[1]:
                if not is_checkpoint(node):
                    if owner(node.id) != node.id:
                        writes.setdefault(owner(node.id), []).append(node.content)
                    continue
                content = node.content
                if ns is not None and content["checkpoint_ns"] != ns:
                    continue
                if wanted_id and content["checkpoint_id"] != wanted_id:
                    continue
                if before_id and content["checkpoint_id"] >= before_id:
                    continue
                found.append((content["checkpoint_id"], node, values_of))
        found.sort(key=lambda item: item[0], reverse=True)
        loads = self.serde.loads_typed
        for _, node, values_of in found:
            content = node.content
            checkpoint, metadata = stored_parts(content)
            if filter:
                meta = load(loads, metadata)
                if not all(meta.get(key) == value for key, value in filter.items()):
                    continue
            values: dict[str, Serialized] = {
                channel: serialized(stored_value)
                for channel, stored_value in values_of.contents(node).items()
            }
            yield checkpoint_tuple(loads, content, writes.get(node.id, []), checkpoint, metadata, values)
            if limit is not None:
                limit -= 1
                if limit <= 0:
                    return

    # -- writing (the work is in checkpoint_writer) ------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: its node, the channels that changed, the namespace's pointer, one commit.

        The checkpoint node names, for each channel it has a value for, the node
        holding that value: a new one for each channel in ``new_versions``, the
        parent checkpoint's for the others (ADR 33).
        """
        return self._writer().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for a checkpoint, one commit; a repeated write is kept once."""
        self._writer().put_writes(config, writes, task_id, task_path)

    def _writer(self) -> CheckpointWriter:
        """How this saver writes: its repo, serializer and author as they are now, and what it knows.

        Made for each write, as ``_removal`` is, so that a saver whose ``serde`` or
        ``author`` is replaced (LangGraph's ``with_allowlist`` clones it with a new
        ``serde``) writes with the new one.
        """
        return CheckpointWriter(self.repo, self.serde, self.author, self._known)

    # -- deleting and copying (the work is in thread_removal) --------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread: its branch goes, and with ``erase`` its versions' bytes too."""
        self._known.forget([str(thread_id)])  # LangGraph passes what configs held: an int or a UUID too
        delete_thread(self._removal(), str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint made by one of ``run_ids``, and its writes, in every thread."""
        self._known.forget(None)
        delete_for_runs(self._removal(), set(run_ids))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInput(f"unknown prune strategy {strategy!r} (keep_latest or delete)")
        threads = [str(thread_id) for thread_id in thread_ids]
        self._known.forget(threads)
        prune(self._removal(), threads, keep_latest=strategy == "keep_latest")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread: the target branch starts at the source's tip, then takes its own ids.

        The target's history shows where it came from; its nodes are its own, so
        deleting or erasing either thread leaves the other whole.
        """
        self._known.forget([str(target_thread_id)])
        copy_thread(self._removal(), str(source_thread_id), str(target_thread_id))

    def _removal(self) -> Removal:
        """How this saver removes: its repo, author and ``erase`` as they are now."""
        return Removal(self.repo, self.author, self.erase)

    # -- async: the same work, in a worker thread -----------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`, in a worker thread: the event loop keeps serving meanwhile."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`: each batch of checkpoints is read and decoded in a worker thread."""
        found = self.list(config, filter=filter, before=before, limit=limit)
        while True:
            batch = await asyncio.to_thread(_next_batch, found)
            for item in batch:
                yield item
            if len(batch) < _BATCH:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`, in a worker thread (a durable commit waits for the disk or the server)."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`, in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`, in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`, in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`, in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`, in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Channel versions as sortable text, as LangGraph's own savers make them."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"
