"""How :class:`~mnemosyne.integrations.langgraph.saver.MnemosyneSaver` stores checkpoints and pending writes.

A put is one commit: the checkpoint node, the value node of each channel whose
value changed (one id per channel, ADR 65), and the namespace's pointer to its
latest checkpoint (ADR 33); a ``put_writes`` is
one commit of a task's pending writes. Each commits on the tip it read, so that
what the saver knows after is exact, and when many writers move a thread at once
it commits on whatever tip there is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
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
    History,
    InvalidInput,
    Node,
    NotFound,
    Provenance,
    Redacted,
    RefConflict,
)
from mnemosyne.integrations.langgraph.channel_values import at_tip
from mnemosyne.integrations.langgraph.known import (
    Latest,
    LatestCheckpoints,
    Located,
    complete,
    known_writes,
    more_replaced_writes,
    more_writes,
    replaced_by,
    replaced_checkpoint,
)
from mnemosyne.integrations.langgraph.repo_protocol import Rev, ThreadRepo, nodes_at
from mnemosyne.integrations.langgraph.stored_values import MAX_JSON_DEPTH, Serialized, load, proven, stored
from mnemosyne.integrations.langgraph.thread_nodes import (
    VALUES_FROM,
    WRITES,
    WRITTEN_BY,
    at_stable_ids,
    channel_nodes,
    checkpoint_message,
    is_checkpoint,
    is_pointer,
    located,
    pointer_id,
    stable_id,
    stored_parts,
    write_nodes,
    writes_message,
)
from mnemosyne.integrations.langgraph.threads import (
    configurable as thread_config,
)
from mnemosyne.integrations.langgraph.threads import (
    made_on,
    namespace_segment,
    segment,
)
from mnemosyne.model.objects import note_with_proven

_TRIES = 5
"""How many times a write commits on the tip it read before it commits on whatever tip there is."""


def latest_pointer(repo: ThreadRepo, base: str, at: Rev) -> Node | None:
    """The node naming the namespace's latest checkpoint: where ADR 33 keeps it, else where it was.

    Both places are read at once (one round trip to a served store). When neither
    holds one, the pointer is asked for alone: an erased one raises ``Redacted``,
    as a read of it does, rather than passing for a namespace with no checkpoint.
    """
    found = pointer_among(nodes_at(repo, [pointer_id(base), base], at), base)
    if found is None:
        alone = repo.get(pointer_id(base), at=at)
        found = alone if alone is not None and is_pointer(alone) else None
    return found


def pointer_among(found: Mapping[str, Node | None], base: str) -> Node | None:
    """The namespace's pointer among nodes read at once: where ADR 33 keeps it, else where it was."""
    node = found.get(pointer_id(base))
    if node is None:
        node = found.get(base)
    return node if node is not None and is_pointer(node) else None


def namespace_at(
    repo: ThreadRepo, branch: str, ns: str, at: Rev, parent: Any = None
) -> tuple[str, Node | None, dict[str, Node | None]]:
    """The namespace's id on a thread's branch, its pointer (None: no checkpoint yet), and the nodes read.

    Its readable id (ADR 65), unless only the digest an earlier version named it
    by has a pointer: a namespace stays where it began. The pointer in each place
    it may be (ADR 33's and the one before, under either id) and, given
    ``parent``, the parent checkpoint's node under either id are one read (one
    round trip to a served store, ADR 68). A pointer whose version there was
    erased is asked for alone, so it raises ``Redacted`` as a read of it does
    rather than passing for a namespace with no checkpoint.
    """
    readable = f"{branch}/{namespace_segment(ns)}"
    bases = list(dict.fromkeys([readable, f"{branch}/{segment(ns)}"]))
    wanted = [node_id for base in bases for node_id in (pointer_id(base), base)]
    if parent is not None:
        wanted += [f"{base}/{segment(str(parent))}" for base in bases]
    found = repo.histories(wanted, at=at, limit=1)
    read = {node_id: history.node for node_id, history in found.items()}
    for base in bases:
        pointer = pointer_among(read, base)
        if pointer is not None:
            return base, pointer, read
        for node_id in (pointer_id(base), base):
            unless_erased(repo, found[node_id], at)
    return readable, None, read


def unless_erased(repo: ThreadRepo, found: History, at: Rev) -> Node | None:
    """The node of an id read with its newest version; one whose version there was erased raises ``Redacted``.

    Asked for alone then, so the error is the one a read of it gives.
    """
    if found.node is None and found.versions and found.versions[0].node is None:
        return repo.get(found.id, at=at)
    return found.node


def checkpoint_node(
    repo: ThreadRepo, branch: str, ns: str, checkpoint_id: str, at: Rev
) -> tuple[Node | None, str | None]:
    """A checkpoint's node at ``at``, and the commit that wrote it (its put's), in one read.

    Under its namespace's readable id, else under an earlier version's (ADR 65).
    One whose version there was erased raises ``Redacted``.
    """
    under = dict.fromkeys([f"{branch}/{namespace_segment(ns)}", f"{branch}/{segment(ns)}"])
    ids = [f"{base}/{segment(checkpoint_id)}" for base in under]
    found = repo.histories(ids, at=at, limit=1)
    for node_id in ids:
        node = unless_erased(repo, found[node_id], at)
        if node is not None:
            versions = found[node_id].versions
            return node, versions[0].commit.id if versions and versions[0].node is not None else None
    return None, None


class CheckpointWriter:
    """What a saver's puts need: its repo, serializer and author, and what it knows of each thread.

    Args:
        repo: the saver's repo.
        serde: the saver's serializer.
        author: the author of the commits.
        known: the saver's :class:`LatestCheckpoints`, which every write keeps exact.
    """

    def __init__(
        self, repo: ThreadRepo, serde: SerializerProtocol, author: str, known: LatestCheckpoints
    ) -> None:
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
        encoded: dict[str, tuple[dict[str, Any], Serialized]] = {}
        read: Mapping[str, Node | None] = {}  # what a put that knew nothing read with the pointer

        def nodes_for(
            base: str, inherited: Mapping[str, Located], held: Mapping[str, Located | None]
        ) -> tuple[Node, list[Node], dict[str, Located], list[str]]:
            values, channels, dropped = channel_nodes(
                dumps,
                base,
                checkpoint,
                new_versions,
                inherited,
                held,
                provenance,
                encoded,
                messages=self._messages,
            )
            node = note_with_proven(
                f"{base}/{segment(checkpoint_id)}",
                {**header, VALUES_FROM: {channel: where.writer for channel, where in channels.items()}},
                provenance,
                header_values,
                MAX_JSON_DEPTH,
            )
            return node, values, channels, dropped

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
                    base = known.node_id.rsplit("/", 1)[0]
                else:
                    fresh = self.repo.freshness(branch)
                    erasures, tip = fresh.erasures, fresh.tip
                    # The pointer (in each place a namespace's may be) and the parent checkpoint, in one read.
                    base, current, read = (
                        namespace_at(self.repo, branch, ns, tip, parent)
                        if tip is not None
                        else (f"{branch}/{namespace_segment(ns)}", None, {})
                    )
                    latest = str(current.content["latest"]) if current is not None else None
                    was = current.id if current is not None else ""
                pointer = Node(id=pointer_id(base), content={"latest": checkpoint_id})
                # A pointer where an earlier version kept it moves when the latest does.
                moved = [was] if was and was != pointer.id else []
                # Time travel: a checkpoint whose parent is not its namespace's latest starts a fork.
                forked = parent is not None and latest is not None and str(parent) != latest
                message = checkpoint_message(full, ns, checkpoint_id, parent, forked=forked)
                inherited = self._channels_of(known, base, parent, tip, read)
                node, values, channels, dropped = nodes_for(base, inherited, self._held(known, base, tip))
                if tip is None:  # the thread's first checkpoint
                    result = self._start(branch, [node, *values, pointer], message)
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
                            delete=[*dropped, *moved] if newest else dropped,
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
                    replaced = (
                        (known.replaced if latest == checkpoint_id else replaced_by(known))
                        if known is not None and (latest == checkpoint_id or str(parent) == latest)
                        else ()
                    )
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
                            exact=True,
                            replaced=replaced,
                        ),
                    )
                else:
                    # The namespace's value nodes now hold this checkpoint's values, not the latest's.
                    entry = self._known.get(thread_id, ns)
                    if entry is not None:
                        self._known.set(thread_id, ns, msgspec.structs.replace(entry, exact=False))
                break
            else:  # many writers at once on one thread: commit on whatever tip there is, every value written
                self._known.forget([thread_id])
                base, _, _ = namespace_at(self.repo, branch, ns, branch)
                node, values, _, _ = nodes_for(base, {}, {})
                self._commit(branch, [node, *values], message)
                current = latest_pointer(self.repo, base, branch)
                if current is None or str(current.content["latest"]) < checkpoint_id:
                    pointer = Node(id=pointer_id(base), content={"latest": checkpoint_id})
                    gone = [current.id] if current is not None and current.id != pointer.id else []
                    self._commit(branch, [pointer], f"latest checkpoint {checkpoint_id}", gone)
        given = configurable["thread_id"]  # as LangGraph's savers: the thread id as the config held it
        return {"configurable": {"thread_id": given, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _held(self, known: Latest | None, base: str, tip: str | None) -> dict[str, Located | None]:
        """What the namespace's value nodes at ``tip`` hold, by id: known after a put, else read at once."""
        if tip is None:
            return {}
        if known is not None and known.exact:
            return {stable_id(base, channel): where for channel, where in known.channels.items()}
        held: dict[str, Located | None] = {}
        for node_id, node in at_tip(self.repo, base, tip).items():
            content = node.content if isinstance(node.content, dict) else {}
            writer = content.get(WRITTEN_BY)
            held[node_id] = Located(str(writer), content.get("version")) if writer is not None else None
        return held

    def _channels_of(
        self,
        known: Latest | None,
        base: str,
        parent: Any,
        tip: str | None,
        read: Mapping[str, Node | None],
    ) -> Mapping[str, Located]:
        """Where the parent checkpoint's channels have their values: known when it is the latest, else read.

        ``read``: nodes read with the pointer at ``tip``, the parent's among them
        when the saver knew nothing. Empty when there is no parent, or its node is
        gone, erased or a blob: this checkpoint then stores every value it has itself.
        """
        if parent is None or tip is None:
            return {}
        if known is not None and known.checkpoint_id == str(parent):
            return known.channels if at_stable_ids(known.content) else {}
        node_id = f"{base}/{segment(str(parent))}"
        try:
            node = read[node_id] if node_id in read else self.repo.get(node_id, at=tip)
        except Redacted:
            return {}  # erased: this checkpoint stores every value it has itself
        if node is None or not is_checkpoint(node) or not at_stable_ids(node.content):
            return {}  # gone, or its values are not at the channels' ids: this checkpoint stores them
        return located(self.serde.loads_typed, node.content)

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
        with self._known.lock:
            for _ in range(_TRIES):
                known = self._known.get(thread_id, ns)
                replaced = replaced_checkpoint(known, checkpoint_id)
                if known is not None and known.checkpoint_id != checkpoint_id and replaced is None:
                    known = None  # what is known does not say which of these writes are stored
                # The checkpoint's writes, read once at the tip they are known at: from then on
                # neither its next writes nor the next put (its child) read anything. Writes that
                # reached the saver after the next checkpoint's put go with one it replaced.
                written = replaced if replaced is not None else known
                if known is not None and written is not None and written.writes is None:
                    at = known.at if known.at is not None and known.at.id == known.tip else known.tip
                    read = list(self.repo.nodes(at=at, prefix=written.node_id + WRITES))
                    if replaced is not None:
                        replaced = written = known_writes(replaced, read)
                    else:
                        known = written = known_writes(known, read)
                found: Node | bool = False
                if known is not None and written is not None and written.writes is not None:
                    tip: str | None = known.tip
                    node_id = written.node_id
                    task_base = f"{node_id}{WRITES}{segment(task_id)}"
                    stored = {i for i in written.writes if i.startswith(task_base + "/")}
                else:
                    tip = self.repo.tip(branch)
                    node_id, found = self._checkpoint_at(branch, ns, checkpoint_id, tip)
                    task_base = f"{node_id}{WRITES}{segment(task_id)}"
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
                stored_at, step = self._step(written.metadata if written is not None else None, found)
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
                if known is not None and replaced is not None:
                    self._known.set(thread_id, ns, more_replaced_writes(known, replaced, result, puts))
                elif known is not None and known.writes is not None:
                    self._known.set(thread_id, ns, more_writes(known, result, puts))
                return
            self._known.forget([thread_id])  # many writers at once on one thread
            self._commit(branch, puts, message)

    def _checkpoint_at(
        self, branch: str, ns: str, checkpoint_id: str, tip: str | None
    ) -> tuple[str, Node | bool]:
        """Where a checkpoint's node is (or goes) at ``tip``, and the node (True: erased; False: none).

        Under its namespace's readable id, or an earlier version's (ADR 65): where
        the node is, else where the namespace's pointer is.
        """
        bases = list(dict.fromkeys([f"{branch}/{namespace_segment(ns)}", f"{branch}/{segment(ns)}"]))
        checkpoints = [f"{base}/{segment(checkpoint_id)}" for base in bases]
        if tip is None:
            return checkpoints[0], False
        # The node under either id and the namespace's pointer in each place, in one read.
        pointers = [node_id for base in bases for node_id in (pointer_id(base), base)]
        found = self.repo.histories([*checkpoints, *pointers], at=tip, limit=1)
        for node_id in checkpoints:
            node = found[node_id].node
            if node is not None:
                return node_id, node
            if found[node_id].versions and found[node_id].versions[0].node is None:
                return node_id, True  # its bytes were erased: it was stored
        read = {node_id: history.node for node_id, history in found.items()}
        for base, node_id in zip(bases, checkpoints, strict=True):
            if pointer_among(read, base) is not None:
                return node_id, False
        return checkpoints[0], False

    def _step(self, known_metadata: Serialized | None, found: Node | bool) -> tuple[bool, Any]:
        """Whether the checkpoint these writes go with is stored, and its step: known, else as read.

        For the writes' message only: LangGraph may save a task's writes before the
        checkpoint they follow (its default durability saves that one while the
        step runs).

        Args:
            known_metadata: the checkpoint's metadata, when the saver knows the checkpoint.
            found: its node as read (True: erased; False: none), when it does not.
        """
        loads = self.serde.loads_typed
        if known_metadata is not None:
            metadata = load(loads, known_metadata)
        elif isinstance(found, bool):
            return found, None
        else:
            if not is_checkpoint(found):
                return False, None
            metadata = load(loads, stored_parts(found.content)[1])
        return True, metadata.get("step") if isinstance(metadata, dict) else None

    def _start(self, branch: str, puts: Sequence[Node], message: str) -> CommitResult:
        """A thread's first commit, on a branch read to have none: the branch started, then the commit.

        Started first rather than after the commit is refused, which saves a served
        store two round trips; a branch another writer started meanwhile is committed on.
        """
        try:
            self.repo.branch(branch, orphan=True, author=self.author)
        except InvalidInput:
            pass  # LangGraph saves from worker threads: another started it; else the commit says why
        return self._commit(branch, puts, message)

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
