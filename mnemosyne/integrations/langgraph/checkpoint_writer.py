"""How :class:`~mnemosyne.integrations.langgraph.saver.MnemosyneSaver` stores checkpoints and pending writes.

A put is one commit: the checkpoint node, a node per channel that changed, and
the namespace's pointer to its latest checkpoint (ADR 33); a ``put_writes`` is
one commit of a task's pending writes. Each commits on the tip it read, so that
what the saver knows after is exact, and when many writers move a thread at once
it commits on whatever tip there is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from mnemosyne import (
    CommitResult,
    InvalidInput,
    Node,
    NotFound,
    Provenance,
    Redacted,
    RefConflict,
    Repo,
)
from mnemosyne.integrations.langgraph.known import (
    Latest,
    LatestCheckpoints,
    Located,
    complete,
    known_writes,
    more_writes,
)
from mnemosyne.integrations.langgraph.stored_values import MAX_JSON_DEPTH, Serialized, load, proven, stored
from mnemosyne.integrations.langgraph.thread_nodes import (
    WRITES,
    channel_nodes,
    checkpoint_message,
    is_checkpoint,
    is_pointer,
    located,
    pointer_id,
    stored_parts,
    write_nodes,
    writes_message,
)
from mnemosyne.integrations.langgraph.threads import (
    configurable as thread_config,
)
from mnemosyne.integrations.langgraph.threads import (
    made_on,
    segment,
)
from mnemosyne.model.objects import note_with_proven

_TRIES = 5
"""How many times a write commits on the tip it read before it commits on whatever tip there is."""


def latest_pointer(repo: Repo, base: str, at: str) -> Node | None:
    """The node naming the namespace's latest checkpoint: where ADR 33 keeps it, else where it was."""
    found = repo.get(pointer_id(base), at=at)
    if found is None:
        found = repo.get(base, at=at)
    return found if found is not None and is_pointer(found) else None


class CheckpointWriter:
    """What a saver's puts need: its repo, serializer and author, and what it knows of each thread.

    Args:
        repo: the saver's repo.
        serde: the saver's serializer.
        author: the author of the commits.
        known: the saver's :class:`LatestCheckpoints`, which every write keeps exact.
    """

    def __init__(self, repo: Repo, serde: SerializerProtocol, author: str, known: LatestCheckpoints) -> None:
        self.repo = repo
        self.serde = serde
        self.author = author
        self._known = known
        # Messages as readable records only under LangGraph's own serializer: an application's
        # (one that encrypts, say) keeps its bytes for them.
        self._messages = type(serde) is JsonPlusSerializer

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The work of :meth:`MnemosyneSaver.put` (see there, and ADR 33)."""
        configurable = thread_config(config)
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        checkpoint_id = str(checkpoint["id"])
        full = get_checkpoint_metadata(config, metadata)
        dumps = self.serde.dumps_typed
        # The values are the channel nodes'; the rest (versions, versions seen, ids) is the checkpoint's.
        checkpoint_fields, checkpoint_kept = stored(
            dumps,
            {key: value for key, value in checkpoint.items() if key != "channel_values"},
            messages=self._messages,
        )
        metadata_fields, metadata_kept = stored(dumps, full, messages=self._messages)
        branch = self.repo.thread_branch(thread_id)
        base = f"{branch}/{segment(ns)}"
        step = full.get("step")
        provenance = Provenance(
            agent_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
            observation=str(full["run_id"]) if full.get("run_id") else None,
            source="langgraph",
        )
        header = {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "parent": parent,
            "run_id": full.get("run_id"),
            "checkpoint": checkpoint_fields,
            "metadata": metadata_fields,
        }
        # The checkpoint's and the metadata's values were walked once, to find their JSON forms.
        header_values = (*proven(checkpoint_fields), *proven(metadata_fields))
        pointer = Node(id=pointer_id(base), content={"latest": checkpoint_id})
        encoded: dict[str, tuple[dict[str, Any], Serialized]] = {}
        with self._known.lock:
            for _ in range(_TRIES):
                # Commit on the tip the pointer was read at, so that what is known after is exact.
                # What the saver knows from its last commit usually still holds: then nothing is read.
                known = self._known.get(thread_id, ns)
                if known is not None:
                    erasures = known.erasures  # an erasure since is caught by the next read's check
                    tip: str | None = known.tip
                    latest: str | None = known.checkpoint_id
                    was = known.pointer
                else:
                    fresh = self.repo.freshness(branch)
                    erasures, tip = fresh.erasures, fresh.tip
                    current = latest_pointer(self.repo, base, tip) if tip is not None else None
                    latest = str(current.content["latest"]) if current is not None else None
                    was = current.id if current is not None else ""
                # A pointer where an earlier version kept it moves when the latest does.
                moved = [was] if was and was != pointer.id else []
                # Time travel: a checkpoint whose parent is not its namespace's latest starts a fork.
                forked = parent is not None and latest is not None and str(parent) != latest
                message = checkpoint_message(full, ns, checkpoint_id, parent, forked=forked)
                inherited = self._channels_of(known, base, parent, tip)
                values, channels = channel_nodes(
                    dumps,
                    base,
                    checkpoint,
                    new_versions,
                    inherited,
                    provenance,
                    encoded,
                    messages=self._messages,
                )
                node = note_with_proven(
                    f"{base}/{segment(checkpoint_id)}",
                    {**header, "channels": {channel: where.writer for channel, where in channels.items()}},
                    provenance,
                    header_values,
                    MAX_JSON_DEPTH,
                )
                if tip is None:  # the thread's first checkpoint
                    result = self._commit(branch, [node, *values, pointer], message)
                    if result.parents:
                        # Another writer started the thread meanwhile: keep the newer pointer of the two.
                        self._known.forget([thread_id])
                        theirs = latest_pointer(self.repo, base, result.parents[0])
                        if theirs is not None and str(theirs.content["latest"]) > checkpoint_id:
                            restored = Node(id=pointer.id, content=theirs.content)
                            self._commit(branch, [restored], f"latest checkpoint {theirs.content['latest']}")
                        break
                    latest, known = None, None
                    newest = True
                else:
                    newest = latest is None or latest < checkpoint_id
                    try:
                        result = self.repo.commit(
                            put=[node, *values, pointer] if newest else [node, *values],
                            delete=moved if newest else [],
                            branch=branch,
                            parent=tip,
                            message=message,
                            author=self.author,
                        )
                    except (RefConflict, NotFound):
                        self._known.forget([thread_id])  # another writer moved the thread: read again
                        continue
                self._known.advance(thread_id, made_on(result), result)
                if newest or (known is not None and latest == checkpoint_id):
                    # A new latest: its writes, if any came first, are read when it is read.
                    # The latest saved again keeps the writes it had.
                    again = known is not None and latest == checkpoint_id and known.writes is not None
                    if not complete(channels):  # a value kept from a parent read only by its node's map
                        self._known.set(thread_id, ns, None)
                        break
                    self._known.set(
                        thread_id,
                        ns,
                        Latest(
                            result.id,
                            node.id,
                            node.content,
                            checkpoint_kept,
                            metadata_kept,
                            channels,
                            known.writes if again and known is not None else None,
                            erasures,
                            pointer.id,
                            result,
                        ),
                    )
                break
            else:  # many writers at once on one thread: commit on whatever tip there is
                self._known.forget([thread_id])
                self._commit(branch, [node, *values], message)
                current = latest_pointer(self.repo, base, branch)
                if current is None or str(current.content["latest"]) < checkpoint_id:
                    gone = [current.id] if current is not None and current.id != pointer.id else []
                    self._commit(branch, [pointer], f"latest checkpoint {checkpoint_id}", gone)
        given = configurable["thread_id"]  # as LangGraph's savers: the thread id as the config held it
        return {"configurable": {"thread_id": given, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _channels_of(
        self, known: Latest | None, base: str, parent: Any, tip: str | None
    ) -> Mapping[str, Located]:
        """Where the parent checkpoint's channels have their values: known when it is the latest, else read.

        Empty when there is no parent, or its node is gone, erased or a blob: this
        checkpoint then stores every value it has itself.
        """
        if parent is None or tip is None:
            return {}
        if known is not None and known.checkpoint_id == str(parent):
            return known.channels
        try:
            node = self.repo.get(f"{base}/{segment(str(parent))}", at=tip)
        except Redacted:
            return {}  # erased: this checkpoint stores every value it has itself
        return (
            located(self.serde.loads_typed, node.content) if node is not None and is_checkpoint(node) else {}
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The work of :meth:`MnemosyneSaver.put_writes`."""
        configurable = thread_config(config)
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            raise InvalidInput("put_writes needs the checkpoint the writes belong to (checkpoint_id)")
        branch = self.repo.thread_branch(thread_id)
        checkpoint_node = f"{branch}/{segment(ns)}/{segment(checkpoint_id)}"
        task_base = f"{checkpoint_node}{WRITES}{segment(task_id)}"
        with self._known.lock:
            for _ in range(_TRIES):
                known = self._known.get(thread_id, ns)
                if known is not None and known.checkpoint_id != checkpoint_id:
                    known = None  # what is known does not say which of these writes are stored
                if known is not None and known.writes is None:
                    # The checkpoint's writes, read once at the tip they are known at: from then
                    # on neither its next writes nor the next put (its child) read anything.
                    at = known.at if known.at is not None and known.at.id == known.tip else known.tip
                    known = known_writes(known, list(self.repo.nodes(at=at, prefix=known.node_id + WRITES)))
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
                puts = write_nodes(
                    self.serde.dumps_typed,
                    task_base,
                    writes,
                    task_id,
                    task_path,
                    stored,
                    messages=self._messages,
                )
                if not puts:
                    return
                stored_at, step = self._step(known, checkpoint_node, tip)
                message = writes_message(writes, task_id, task_path, checkpoint_id, step, stored=stored_at)
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
                self._known.advance(thread_id, made_on(result), result, changed=(ns, checkpoint_id))
                if known is not None and known.writes is not None:
                    self._known.set(thread_id, ns, more_writes(known, result, puts))
                return
            self._known.forget([thread_id])  # many writers at once on one thread
            self._commit(branch, puts, message)

    def _step(self, known: Latest | None, checkpoint_node: str, tip: str | None) -> tuple[bool, Any]:
        """Whether the checkpoint these writes go with is stored, and its step: known, else read.

        For the writes' message only: LangGraph may save a task's writes before the
        checkpoint they follow (its default durability saves that one while the
        step runs).
        """
        loads = self.serde.loads_typed
        if known is not None:
            metadata = load(loads, known.metadata)
        else:
            try:
                node = self.repo.get(checkpoint_node, at=tip) if tip is not None else None
            except Redacted:
                return True, None  # its bytes were erased: it was stored
            if node is None or not is_checkpoint(node):
                return False, None
            metadata = load(loads, stored_parts(node.content)[1])
        return True, metadata.get("step") if isinstance(metadata, dict) else None

    def _commit(
        self, branch: str, puts: Sequence[Node], message: str, delete: Sequence[str] = ()
    ) -> CommitResult:
        try:
            return self.repo.commit(
                put=puts, delete=delete, branch=branch, message=message, author=self.author
            )
        except NotFound:
            if self.repo.tip(branch) is not None:
                raise
            # A thread's first commit starts its branch (a commit never creates one by itself).
            try:
                self.repo.branch(branch, orphan=True, author=self.author)
            except InvalidInput:
                pass  # LangGraph saves from worker threads: another started it; else the commit says why
            return self.repo.commit(
                put=puts, delete=delete, branch=branch, message=message, author=self.author
            )
