"""``MnemosyneSaver``: LangGraph's checkpointer on a Mnemosyne store.

The mapping (ADR 0017):

- a thread is a branch, ``threads/<thread>`` (ADR 28: the id, escaped when it is
  not plain; ``Repo.thread_branch`` names it); every checkpoint namespace of the
  thread lives on it, so ``mnemo log --thread <thread id>`` is the thread's history,
  one commit per checkpoint (``checkpoint step 3 (loop)``; a time-travel fork
  ``fork of <checkpoint id>: checkpoint step 3 (update)``);
- a checkpoint is one node, ``threads/<thread>/<ns>/<checkpoint_id>``, holding the
  serialized checkpoint and metadata, written by one commit (one node and one ref
  move); the commit's parent is the branch tip, and the checkpoint's own parent
  (LangGraph's ``parent_config``) is kept in the node, so a fork inside a thread
  (time travel) never leaves a checkpoint unreachable;
- the latest checkpoint of a namespace is named by a small pointer node,
  ``threads/<thread>/<ns>``, updated by the same commit;
- pending writes are nodes under ``threads/<thread>/<ns>/<checkpoint_id>/w/``, one
  commit per ``put_writes``.

Below the thread, each id segment is the name itself when it is plain (letters,
digits, ``.``, ``_``, ``-``) and otherwise ``_`` plus a digest, so any namespace,
checkpoint id or task id maps to a valid id; the real names are kept in the nodes.

Deleting (``delete_thread``, ``delete_for_runs``, ``prune``) removes what LangGraph
reads at once. The bytes stay in the store's history until they leave it: a
deleted thread's branch is collected by ``gc`` once its reflog entries expire;
checkpoints deleted from a live thread stay in that thread's earlier commits. With
``erase=True`` every delete also erases the deleted versions' bytes (a redaction
record stays), and ``gc(compact=True)`` then leaves none of them in the file.
"""

from __future__ import annotations

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
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from mnemosyne import Commit, CommitResult, InvalidInput, Node, NotFound, Provenance, RefConflict, Repo
from mnemosyne.integrations.langgraph.known import Latest, LatestCheckpoints, known_writes, more_writes
from mnemosyne.integrations.langgraph.opening import OwnsItsRepo
from mnemosyne.integrations.langgraph.thread_nodes import (
    WRITES,
    checkpoint_message,
    checkpoint_tuple,
    copies,
    is_checkpoint,
    latest_of_each_namespace,
    owner,
    removal,
    write_nodes,
)
from mnemosyne.integrations.langgraph.threads import (
    BRANCH_PREFIX,
    made_on,
    pack,
    segment,
    unpack,
)
from mnemosyne.integrations.langgraph.threads import (
    configurable as thread_config,
)

_TRIES = 5
"""How many times a write commits on the tip it read before it commits on whatever tip there is."""


class MnemosyneSaver(OwnsItsRepo, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose threads are branches of a Mnemosyne store.

    Args:
        repo: an open :class:`~mnemosyne.Repo` (the tenant the threads live in).
        serde: LangGraph's serializer (default: its JSON-plus serializer).
        author: the author of the commits the saver makes.
        erase: whether deleting also erases the deleted versions' bytes (see the module).
        close_repo: whether :meth:`close` (and leaving a ``with`` block) closes ``repo``.

    The async methods do the same work inline: a read takes microseconds and a
    durable commit about a millisecond, less than handing it to a thread would.
    """

    def __init__(
        self,
        repo: Repo,
        *,
        serde: SerializerProtocol | None = None,
        author: str = "langgraph",
        erase: bool = False,
        close_repo: bool = False,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(repo, Repo):
            raise InvalidInput("MnemosyneSaver needs an open mnemosyne.Repo")
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
            node = self.repo.get(f"{branch}/{segment(ns)}/{segment(checkpoint_id)}", at=tip)
            if node is None:
                return None
            return self._tuple(node.content, list(self._writes(tip, node.id).values()))
        with self._known.lock:
            known = self._latest(thread_id, ns)
        if known is None or known.writes is None:
            return None
        return self._tuple(known.content, list(known.writes.values()), known.checkpoint, known.metadata)

    def _latest(self, thread_id: str, ns: str) -> Latest | None:
        """The namespace's latest checkpoint with its writes, as the branch holds it now.

        Read fresh: the tip says whether what the saver knows still holds, and the
        redaction records whether any of it was erased since.
        """
        branch = self.repo.thread_branch(thread_id)
        tip = self.repo.tip(branch)
        if tip is None:
            self._known.forget([thread_id])
            return None
        known = self._known.get(thread_id, ns)
        if known is not None and known.tip == tip and known.writes is None:
            known = known_writes(known, self._writes_nodes(tip, known.node_id))
            self._known.set(thread_id, ns, known)
        if known is not None and (known.tip != tip or self.repo.redactions(known.hashes)):
            known = None
        if known is None:
            base = f"{branch}/{segment(ns)}"
            pointer = self.repo.get(base, at=tip)
            if pointer is None:
                return None
            node = self.repo.get(f"{base}/{segment(str(pointer.content['latest']))}", at=tip)
            if node is None:
                return None
            known = Latest(
                tip,
                node.id,
                node.content,
                unpack(node.content["checkpoint"]),
                unpack(node.content["metadata"]),
                None,
                (node.hash,),
            )
            known = known_writes(known, self._writes_nodes(tip, node.id))
            self._known.set(thread_id, ns, known)
        return known

    def _writes_nodes(self, at: Commit | str, checkpoint_node_id: str) -> list[Node]:
        return list(self.repo.nodes(at=at, prefix=checkpoint_node_id + WRITES))

    def _writes(self, at: Commit | str, checkpoint_node_id: str) -> dict[str, dict[str, Any]]:
        return {node.id: node.content for node in self._writes_nodes(at, checkpoint_node_id)}

    def _tuple(
        self,
        saved: dict[str, Any],
        writes: list[dict[str, Any]],
        checkpoint_bytes: tuple[str, bytes] | None = None,
        metadata_bytes: tuple[str, bytes] | None = None,
    ) -> CheckpointTuple:
        return checkpoint_tuple(self.serde.loads_typed, saved, writes, checkpoint_bytes, metadata_bytes)

    def _threads(self) -> list[str]:
        return [name for name in self.repo.branches() if name.startswith(BRANCH_PREFIX)]

    def _saved(self, branch: str) -> tuple[str, list[Node]] | None:
        """A thread's tip and every node on it (checkpoints, pointers and writes), in id order."""
        tip = self.repo.tip(branch)
        if tip is None:
            return None
        return tip, list(self.repo.nodes(at=tip, prefix=branch + "/"))

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
            branches, ns, wanted_id = self._threads(), None, None
        before_id = get_checkpoint_id(before) if before is not None else None
        found: list[tuple[str, dict[str, Any], str]] = []
        writes: dict[str, list[dict[str, Any]]] = {}  # checkpoint node id -> its writes' contents
        for branch in branches:
            saved = self._saved(branch)
            if saved is None:
                continue
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
                found.append((content["checkpoint_id"], content, node.id))
        found.sort(key=lambda item: item[0], reverse=True)
        for _, content, node_id in found:
            if filter:
                metadata = self.serde.loads_typed(unpack(content["metadata"]))
                if not all(metadata.get(key) == value for key, value in filter.items()):
                    continue
            yield self._tuple(content, writes.get(node_id, []))
            if limit is not None:
                limit -= 1
                if limit <= 0:
                    return

    # -- writing ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: one node, the namespace's pointer, one commit on the thread's branch."""
        configurable = thread_config(config)
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        checkpoint_id = str(checkpoint["id"])
        # As LangGraph's savers do, a channel absent from channel_versions is not part of the checkpoint.
        saved = dict(checkpoint)
        versions = checkpoint.get("channel_versions", {})
        saved["channel_values"] = {
            key: value for key, value in checkpoint.get("channel_values", {}).items() if key in versions
        }
        full = get_checkpoint_metadata(config, metadata)
        checkpoint_bytes = self.serde.dumps_typed(saved)
        metadata_bytes = self.serde.dumps_typed(full)
        branch = self.repo.thread_branch(thread_id)
        base = f"{branch}/{segment(ns)}"
        step = full.get("step")
        node = Node(
            id=f"{base}/{segment(checkpoint_id)}",
            content={
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
                "parent": parent,
                "run_id": full.get("run_id"),
                "checkpoint": pack(checkpoint_bytes),
                "metadata": pack(metadata_bytes),
            },
            provenance=Provenance(
                agent_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
                observation=str(full["run_id"]) if full.get("run_id") else None,
                source="langgraph",
            ),
        )
        message = checkpoint_message(full, ns, checkpoint_id, parent, forked=False)
        pointer = Node(id=base, content={"latest": checkpoint_id})
        with self._known.lock:
            for _ in range(_TRIES):
                # Commit on the tip the pointer was read at, so that what is known after is exact.
                # What the saver knows from its last commit usually still holds: then nothing is read.
                known = self._known.get(thread_id, ns)
                if known is not None:
                    tip: str | None = known.tip
                    latest: str | None = known.checkpoint_id
                else:
                    tip = self.repo.tip(branch)
                    current = self.repo.get(base, at=tip) if tip is not None else None
                    latest = str(current.content["latest"]) if current is not None else None
                # Time travel: a checkpoint whose parent is not its namespace's latest starts a fork.
                forked = parent is not None and latest is not None and str(parent) != latest
                message = checkpoint_message(full, ns, checkpoint_id, parent, forked=forked)
                if tip is None:  # the thread's first checkpoint
                    result = self._commit(branch, [node, pointer], message)
                    if result.parents:
                        # Another writer started the thread meanwhile: keep the newer pointer of the two.
                        self._known.forget([thread_id])
                        theirs = self.repo.get(base, at=result.parents[0])
                        if theirs is not None and str(theirs.content["latest"]) > checkpoint_id:
                            restored = Node(id=base, content=theirs.content)
                            self._commit(branch, [restored], f"latest checkpoint {theirs.content['latest']}")
                        break
                    latest, known = None, None
                    newest = True
                else:
                    newest = latest is None or latest < checkpoint_id
                    try:
                        result = self.repo.commit(
                            put=[node, pointer] if newest else [node],
                            branch=branch,
                            parent=tip,
                            message=message,
                            author=self.author,
                        )
                    except (RefConflict, NotFound):
                        self._known.forget([thread_id])  # another writer moved the thread: read again
                        continue
                self._known.advance(thread_id, made_on(result), result.id)
                if newest or (known is not None and latest == checkpoint_id):
                    # A new latest: its writes, if any came first, are read when it is read.
                    # The latest saved again keeps the writes it had.
                    again = known is not None and latest == checkpoint_id and known.writes is not None
                    writes = known.writes if again and known is not None else None
                    kept = known.hashes[1:] if again and known is not None else ()
                    self._known.set(
                        thread_id,
                        ns,
                        Latest(
                            result.id,
                            node.id,
                            node.content,
                            checkpoint_bytes,
                            metadata_bytes,
                            writes,
                            (node.hash, *kept),
                        ),
                    )
                break
            else:  # many writers at once on one thread: commit on whatever tip there is
                self._known.forget([thread_id])
                self._commit(branch, [node], message)
                current = self.repo.get(base, at=branch)
                if current is None or str(current.content["latest"]) < checkpoint_id:
                    self._commit(branch, [pointer], f"latest checkpoint {checkpoint_id}")
        given = configurable["thread_id"]  # as LangGraph's savers: the thread id as the config held it
        return {"configurable": {"thread_id": given, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for a checkpoint, one commit; a repeated write is kept once."""
        configurable = thread_config(config)
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            raise InvalidInput("put_writes needs the checkpoint the writes belong to (checkpoint_id)")
        branch = self.repo.thread_branch(thread_id)
        task_base = f"{branch}/{segment(ns)}/{segment(checkpoint_id)}{WRITES}{segment(task_id)}"
        message = f"writes of task {task_id} for checkpoint {checkpoint_id}"
        with self._known.lock:
            for _ in range(_TRIES):
                known = self._known.get(thread_id, ns)
                if known is not None and (known.checkpoint_id != checkpoint_id or known.writes is None):
                    known = None  # what is known does not say which of these writes are stored
                if known is not None and known.writes is not None:
                    tip: str | None = known.tip
                    stored = {node_id for node_id in known.writes if node_id.startswith(task_base + "/")}
                else:
                    tip = self.repo.tip(branch)
                    stored = (
                        {node.id for node in self.repo.nodes(at=tip, prefix=task_base + "/")}
                        if tip
                        else set()
                    )
                puts = write_nodes(self.serde.dumps_typed, task_base, writes, task_id, task_path, stored)
                if not puts:
                    return
                if tip is None:  # no checkpoint on this thread yet
                    self._commit(branch, puts, message)
                    self._known.forget([thread_id])
                    return
                try:
                    result = self.repo.commit(
                        put=puts, branch=branch, parent=tip, message=message, author=self.author
                    )
                except (RefConflict, NotFound):
                    self._known.forget([thread_id])  # another writer moved the thread: read again
                    continue
                self._known.advance(thread_id, made_on(result), result.id, changed=(ns, checkpoint_id))
                if known is not None and known.writes is not None:
                    self._known.set(thread_id, ns, more_writes(known, result.id, puts))
                return
            self._known.forget([thread_id])  # many writers at once on one thread
            self._commit(branch, puts, message)

    def _commit(self, branch: str, puts: Sequence[Node], message: str) -> CommitResult:
        try:
            return self.repo.commit(put=puts, branch=branch, message=message, author=self.author)
        except NotFound:
            if self.repo.tip(branch) is not None:
                raise
            # A thread's first commit starts its branch (a commit never creates one by itself).
            try:
                self.repo.branch(branch, orphan=True, author=self.author)
            except InvalidInput:
                pass  # LangGraph saves from worker threads: another started it; else the commit says why
            return self.repo.commit(put=puts, branch=branch, message=message, author=self.author)

    # -- deleting and copying --------------------------------------------------------

    def _erase(self, ids: Sequence[str], why: str) -> None:
        if self.erase:
            for node_id in ids:
                self.repo.forget(node_id, why, author=self.author)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread: its branch goes, and with ``erase`` its versions' bytes too."""
        thread_id = str(thread_id)  # LangGraph passes what configs held: an int or a UUID too
        self._known.forget([thread_id])
        while True:  # its branch, then its name from before ADR 28 if a writer from then used it too
            branch = self.repo.thread_branch(thread_id)
            saved = self._saved(branch)
            if saved is None:
                return
            self.repo.delete_branch(branch, author=self.author)
            self._erase([node.id for node in saved[1]], f"LangGraph deleted thread {thread_id}")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete every checkpoint made by one of ``run_ids``, and its writes, in every thread."""
        runs = set(run_ids)
        if not runs:
            return
        self._known.forget(None)
        for branch in self._threads():
            saved = self._saved(branch)
            if saved is None:
                continue
            doomed = {node.id for node in saved[1] if is_checkpoint(node) and node.content["run_id"] in runs}
            self._delete(branch, saved[1], doomed, f"delete the checkpoints of runs {sorted(runs)}")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInput(f"unknown prune strategy {strategy!r} (keep_latest or delete)")
        threads = [str(thread_id) for thread_id in thread_ids]
        self._known.forget(threads)
        for thread_id in threads:
            branch = self.repo.thread_branch(thread_id)
            saved = self._saved(branch)
            if saved is None:
                continue
            checkpoints = [node for node in saved[1] if is_checkpoint(node)]
            keep = latest_of_each_namespace(checkpoints) if strategy == "keep_latest" else set()
            doomed = {node.id for node in checkpoints if node.id not in keep}
            self._delete(branch, saved[1], doomed, f"prune thread {thread_id} ({strategy})")

    def _delete(self, branch: str, nodes: Sequence[Node], checkpoints: set[str], message: str) -> None:
        """Delete checkpoints with their writes; fix or drop the pointers that named them."""
        if not checkpoints:
            return
        puts, gone = removal(nodes, checkpoints)
        self.repo.commit(put=puts, delete=gone, branch=branch, message=message, author=self.author)
        self._erase([node_id for node_id in gone if owner(node_id) in checkpoints], message)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread: the target branch starts at the source's tip, then takes its own ids.

        The target's history shows where it came from; its nodes are its own, so
        deleting or erasing either thread leaves the other whole.
        """
        source_thread_id, target_thread_id = str(source_thread_id), str(target_thread_id)
        self._known.forget([target_thread_id])
        source = self.repo.thread_branch(source_thread_id)
        saved = self._saved(source)
        if saved is None:
            return
        target = self.repo.thread_branch(target_thread_id)
        if self.repo.tip(target) is not None:
            raise InvalidInput(f"thread {target_thread_id!r} already has checkpoints: delete it first")
        tip, nodes = saved
        self.repo.branch(target, at=tip, author=self.author)
        puts = copies(nodes, source, target, target_thread_id)
        self.repo.commit(
            put=puts,
            delete=[node.id for node in nodes],
            branch=target,
            message=f"copy of thread {source_thread_id}",
            author=self.author,
        )

    # -- async: the same work, inline ------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        self.prune(thread_ids, strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Channel versions as sortable text, as LangGraph's own savers make them."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"
