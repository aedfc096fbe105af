"""The nodes a saver writes, reads back as LangGraph's tuples, removes and copies.

Pure functions over nodes (ADRs 17, 33 and 65): the saver reads a thread's nodes,
asks here what to put and delete, and makes one commit of it.

A checkpoint is stored by channel (ADR 33) at one id per channel (ADR 65): each
channel's value lives at ``<namespace>/~channels/<channel>``, and the commit of a
checkpoint's put holds that checkpoint's values there, so ``mnemo diff`` of two
steps shows a changed channel as one id, old → new. The checkpoint node
``<namespace>/<checkpoint>`` holds the checkpoint without its channels' values, its
metadata, and ``values_from``: for each channel, the checkpoint whose put wrote
the value it has; each value node says so too (``written_by``). An earlier value
is read from the commit of the checkpoint that has it. A put writes the channels
LangGraph says changed (``new_versions``), and any other whose node does not hold
the parent's value (after time travel), and drops the nodes of channels the
checkpoint has no value for.

Read as they were: a checkpoint node of ADR 33 (``channels``, naming per-checkpoint
value nodes ``…/<checkpoint>/c/<channel>``) and one stored as one blob before it
(``checkpoint`` and ``metadata`` as ``[type, base64]``). A copy of a thread keeps
the values that are not the tip's at per-checkpoint ids too (``pinned``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, CheckpointTuple, PendingWrite

from mnemosyne import CorruptObject, Node, Provenance
from mnemosyne.integrations.langgraph.known import Located
from mnemosyne.integrations.langgraph.namespaces import shown
from mnemosyne.integrations.langgraph.stored_values import (
    MAX_JSON_DEPTH,
    Dumps,
    Loads,
    Serialized,
    json_form,
    load,
    proven,
    serialized,
    stored,
)
from mnemosyne.integrations.langgraph.threads import channel_segment, segment, unpack
from mnemosyne.model.objects import note_with_proven

WRITES = "/w/"
"""What follows a checkpoint node's id in the ids of its pending writes."""

CHANNELS = "/c/"
"""What follows a checkpoint node's id in the ids of the channel values its put stored."""

POINTER = "/~latest"
"""What follows a namespace's id in the id of the node naming its latest checkpoint.

``~`` sorts after every checkpoint's segment, so the pointer sits beside the newest
checkpoint's nodes and a put rewrites one stretch of the tree, not two (ADR 33).
Before ADR 33 the pointer was the namespace's id itself; it is still read there.
"""


STABLE = "/~channels/"
"""What follows a namespace's id in the ids of its channels' values (ADR 65).

``~`` sorts after every checkpoint's segment: a put's value nodes sit beside its
checkpoint node and the pointer, one stretch of the tree.
"""

WRITTEN_BY = "written_by"
"""The key of a value node naming the checkpoint whose put wrote it."""

VALUES_FROM = "values_from"
"""The key of a checkpoint node naming, per channel, the checkpoint whose put wrote its value."""


def stable_id(base: str, channel: str) -> str:
    """The id ``channel``'s value has in the namespace whose id is ``base``, whichever checkpoint wrote it.

    Raises:
        InvalidInput: ``channel`` is not a string.
    """
    if type(channel) is str:
        # A put asks for every channel's id twice (the values held at the tip, the values
        # it writes), and the thread's next put for the same ones again.
        return _stable_id(base, channel)
    return f"{base}{STABLE}{channel_segment(channel)}"  # refuses a channel that is not text


@functools.lru_cache(maxsize=4096)
def _stable_id(base: str, channel: str) -> str:
    return f"{base}{STABLE}{channel_segment(channel)}"


def is_stable(node_id: str) -> bool:
    """Whether ``node_id`` is a channel's value node: ``threads/T/NS/~channels/CH``."""
    parts = node_id.split("/")
    return len(parts) == 5 and parts[3] == STABLE.strip("/")


def stable_base(node_id: str) -> str:
    """The namespace id a value node's id belongs to."""
    return node_id.rsplit("/", 2)[0]


def pinned_id(base: str, writer: str, channel: str) -> str:
    """Where a copy keeps a value the tip does not hold: an id of the checkpoint that wrote it."""
    return f"{base}/{segment(writer)}{CHANNELS}{channel_segment(channel)}"


def pointer_id(base: str) -> str:
    """The id of the pointer node of the namespace whose id is ``base``."""
    return base + POINTER


def pointer_base(node_id: str) -> str:
    """The namespace id a pointer node's id belongs to (either place)."""
    return node_id.removesuffix(POINTER)


def channel_node_id(base: str, writer: str, channel: str) -> str:
    """The id of the node holding ``channel``'s value as the put of checkpoint ``writer`` stored it.

    Args:
        base: the namespace's id, ``threads/<thread>/<ns segment>``.
        writer: the checkpoint id.
        channel: the channel's name.
    """
    return f"{base}/{segment(writer)}{CHANNELS}{segment(channel)}"


def by_channel(content: Mapping[str, Any]) -> bool:
    """Whether a checkpoint node's content is stored by channel (else: one blob, as before ADR 33)."""
    return VALUES_FROM in content or "channels" in content


def at_stable_ids(content: Mapping[str, Any]) -> bool:
    """Whether a checkpoint node's values are at one id per channel (ADR 65; else ADR 33's ids, or a blob)."""
    return VALUES_FROM in content


def writers(content: Mapping[str, Any]) -> dict[str, str]:
    """Per channel, the checkpoint whose put wrote the value a checkpoint node has (either layout)."""
    named = content.get(VALUES_FROM, content.get("channels", {}))
    if not isinstance(named, dict):
        raise CorruptObject(f"checkpoint {content.get('checkpoint_id')!r}: its channels are not a map")
    return {str(channel): str(writer) for channel, writer in named.items()}


def holds(node: Node | None, writer: str) -> bool:
    """Whether a value node holds the value the put of checkpoint ``writer`` wrote."""
    return node is not None and isinstance(node.content, dict) and node.content.get(WRITTEN_BY) == writer


def value_ids(base: str, content: Mapping[str, Any]) -> tuple[set[str], set[tuple[str, str]]]:
    """What a checkpoint node's values need kept: per-checkpoint value ids, and (value id, writer) pairs."""
    if not by_channel(content):
        return set(), set()
    named = writers(content)
    if not at_stable_ids(content):
        return {channel_node_id(base, w, c) for c, w in named.items()}, set()
    return {pinned_id(base, w, c) for c, w in named.items()}, {
        (stable_id(base, c), w) for c, w in named.items()
    }


def stored_parts(content: Mapping[str, Any]) -> tuple[Serialized, Serialized]:
    """A checkpoint node's checkpoint and metadata as they load again, whichever way it was stored."""
    if by_channel(content):
        return serialized(content["checkpoint"]), serialized(content["metadata"])
    return unpack(content["checkpoint"]), unpack(content["metadata"])


def located(loads: Loads, content: Mapping[str, Any]) -> dict[str, Located]:
    """Where each channel of a checkpoint node's content has its value (nothing for a blob)."""
    if not by_channel(content):
        return {}
    versions = load(loads, serialized(content["checkpoint"])).get("channel_versions", {})
    return {channel: Located(writer, versions.get(channel)) for channel, writer in writers(content).items()}


def channel_nodes(
    dumps: Dumps,
    base: str,
    checkpoint: Checkpoint,
    new_versions: Mapping[str, Any],
    parent: Mapping[str, Located],
    at_tip: Mapping[str, Located | None],
    provenance: Provenance,
    done: dict[str, tuple[dict[str, Any], Serialized]],
    *,
    messages: bool,
) -> tuple[list[Node], dict[str, Located], list[str]]:
    """The value nodes a put writes and drops, and where each channel of the checkpoint has its value.

    A channel keeps the parent's value without a write when it is not in
    ``new_versions``, the parent has it at the same version, and its value node
    at the tip holds that value (the parent's put, or an earlier one, wrote it).
    Any other channel with a value is written, so the commit holds every value of
    the checkpoint at its channel's id; a value node of a channel the checkpoint
    has no value for is dropped. A channel with no value is left out, as
    LangGraph's savers do.

    Args:
        dumps: LangGraph's serializer.
        base: the namespace's id.
        checkpoint: the checkpoint being put.
        new_versions: the channels that changed, with their new versions.
        parent: where the parent checkpoint's channels have their values.
        at_tip: the value nodes of the namespace at the tip the put commits on, by
            id: which put wrote each (None: not known).
        provenance: the nodes' provenance.
        done: values already put in stored form, by channel (filled in here: a put
            that commits again after another writer moved the thread encodes once).
        messages: whether messages may be stored as records (:func:`.stored_values.stored`).

    Returns:
        The nodes to put, where each channel has its value, and the ids to delete.
    """
    checkpoint_id = str(checkpoint["id"])
    values = checkpoint.get("channel_values", {})
    puts: list[Node] = []
    found: dict[str, Located] = {}
    kept_ids: set[str] = set()
    for channel, version in checkpoint.get("channel_versions", {}).items():
        node_id = stable_id(base, channel)
        kept = parent.get(channel)
        held = at_tip.get(node_id)
        if (
            channel not in new_versions
            and kept is not None
            and kept.version == version
            and held is not None
            and held.writer == kept.writer
            and held.version == version
        ):
            found[channel] = kept if kept.value is not None else held
            kept_ids.add(node_id)
            continue
        if channel not in values:
            continue
        if channel not in done:
            done[channel] = stored(dumps, values[channel], messages=messages)
        fields, value = done[channel]
        version_field = {"version": version} if json_form(version) else {}
        # The value was walked once already, to find its JSON form: not again (ADR 75).
        puts.append(
            note_with_proven(
                node_id,
                {"channel": channel, WRITTEN_BY: checkpoint_id, **version_field, **fields},
                provenance,
                proven(fields),
                MAX_JSON_DEPTH,
            )
        )
        kept_ids.add(node_id)
        found[channel] = Located(checkpoint_id, version, value)
    gone = [node_id for node_id in at_tip if node_id not in kept_ids]
    return puts, found, gone


def checkpoint_tuple(
    loads: Loads,
    saved: Mapping[str, Any],
    writes: list[dict[str, Any]],
    checkpoint: Serialized,
    metadata: Serialized,
    values: Mapping[str, Serialized],
) -> CheckpointTuple:
    """LangGraph's tuple for a checkpoint node's content and its writes' contents.

    Args:
        loads: LangGraph's deserializer.
        saved: the checkpoint node's content.
        writes: its pending writes' contents.
        checkpoint: its checkpoint as it loads again (:func:`stored_parts`).
        metadata: its metadata as it loads again.
        values: its channels' values as they load again, by channel (stored by channel).
    """
    thread_id, ns, checkpoint_id = saved["thread_id"], saved["checkpoint_ns"], saved["checkpoint_id"]
    loaded: Checkpoint = load(loads, checkpoint)
    if by_channel(saved):
        # In the checkpoint's own order of channels, as LangGraph's savers give them.
        loaded["channel_values"] = {
            channel: load(loads, values[channel])
            for channel in loaded["channel_versions"]
            if channel in values
        }
    writes.sort(key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
    pending: list[PendingWrite] = [(w["task_id"], w["channel"], load(loads, write_value(w))) for w in writes]
    parent = saved["parent"]
    return CheckpointTuple(
        config={
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        },
        checkpoint=loaded,
        metadata=load(loads, metadata),
        parent_config=(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
            if parent
            else None
        ),
        pending_writes=pending,
    )


def checkpoint_message(
    metadata: Mapping[str, Any], ns: str, checkpoint_id: str, parent: str | None, *, forked: bool
) -> str:
    """The message of a checkpoint's commit: its step and source first, then its ids.

    ``checkpoint step 3 (loop)``, with `` in <namespace>`` for a subgraph's; a
    checkpoint whose parent is not its namespace's latest (time travel) starts
    ``fork of <parent id>: ``. The body names the checkpoint, its parent and run.
    """
    step, source, run_id = metadata.get("step"), metadata.get("source"), metadata.get("run_id")
    what = "checkpoint"
    if isinstance(step, int) and not isinstance(step, bool):
        what += f" step {step}"
    if isinstance(source, str) and source:
        what += f" ({shown(source)})"
    if ns:
        what += f" in {shown(ns, 80)}"
    first = f"fork of {shown(str(parent), 80)}: {what}" if forked else what
    body = [f"checkpoint {shown(checkpoint_id, 80)}"]
    if parent is not None:
        body.append(f"parent {shown(str(parent), 80)}")
    if run_id is not None:
        body.append(f"run {shown(str(run_id), 80)}")
    return first + "\n\n" + "\n".join(body)


_PULL_PATH = "~__pregel_pull, "
"""How LangGraph's task path of a node's own run (a pull task) starts: the node's name follows."""

_NULL_TASK = "00000000-0000-0000-0000-000000000000"
"""The task LangGraph files writes made outside any node under (a resume, an update)."""

_UPDATE_PATH = "~__interrupt__, "
"""How the task path of ``update_state``'s writes starts."""

_CHANNELS_SHOWN = 4


def writes_message(
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    checkpoint_id: str,
    step: Any,
    *,
    stored: bool,
) -> str:
    """The message of a task's writes: which node wrote which channels, after which checkpoint.

    ``writes of agent after step 2: messages, route``: the node is named by its
    task path (a pull task's holds it), else the task is; the step is that of the
    checkpoint the writes follow. With LangGraph's default durability a
    checkpoint is saved while the next step runs, so a task's writes may be
    committed before their checkpoint is (``stored`` False): the message then
    says so, ``writes of agent ahead of checkpoint <id>: ...``, and the log lists
    that checkpoint above them. The body names the task, its path and the checkpoint.
    """
    if task_path.startswith(_PULL_PATH):
        who = shown(task_path.removeprefix(_PULL_PATH).split(", ", 1)[0])
    elif task_id == _NULL_TASK or task_path.startswith(_UPDATE_PATH):
        who = "an update"
    else:
        who = f"task {shown(task_id, 80)}"
    if not stored:
        when = f"ahead of checkpoint {shown(checkpoint_id, 80)}"
    elif isinstance(step, int) and not isinstance(step, bool):
        when = f"after step {step}"
    else:
        when = f"after checkpoint {shown(checkpoint_id, 80)}"
    channels = list(dict.fromkeys(channel for channel, _ in writes))
    named = ", ".join(shown(str(channel)) for channel in channels[:_CHANNELS_SHOWN])
    if len(channels) > _CHANNELS_SHOWN:
        named += f" and {len(channels) - _CHANNELS_SHOWN} more"
    body = [f"task {shown(task_id, 80)}"]
    if task_path:
        body.append(f"path {shown(task_path, 80)}")
    body.append(f"checkpoint {shown(checkpoint_id, 80)}")
    return f"writes of {who} {when}: {named}\n\n" + "\n".join(body)


def write_value(write: Mapping[str, Any]) -> Serialized:
    """A pending write node's value as it loads again, whichever way it was stored."""
    return unpack(write["value"]) if "value" in write else serialized(write)


def owner(node_id: str) -> str:
    """The checkpoint node id ``node_id`` belongs to: its own, or a pending write's checkpoint's.

    A write's id is ``threads/T/NS/CP/w/TASK/IDX``: seven segments, none holding a
    ``/``. Counted, not searched for ``/w/``: a thread or namespace named ``w`` puts
    ``/w/`` inside a checkpoint's own id. A channel node (``threads/T/NS/CP/c/CH``,
    six) is its own: it may outlive the checkpoint that wrote it.
    """
    return node_id.rsplit("/", 3)[0] if node_id.count("/") == 6 else node_id


def is_channel(node_id: str) -> bool:
    """Whether ``node_id`` is a channel node's: ``threads/T/NS/CP/c/CH``, six segments."""
    return node_id.count("/") == 5


def is_checkpoint(node: Node) -> bool:
    """Whether ``node`` is a checkpoint (not a pointer or a pending write)."""
    return isinstance(node.content, dict) and "checkpoint" in node.content


def is_pointer(node: Node) -> bool:
    """Whether ``node`` names a namespace's latest checkpoint."""
    return isinstance(node.content, dict) and set(node.content) == {"latest"}


def write_nodes(
    dumps: Dumps,
    task_base: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    present: set[str],
    *,
    messages: bool,
) -> tuple[Node, ...]:
    """The nodes of a task's writes, but for regular ones already stored (as LangGraph's savers).

    ``messages``: whether messages may be stored as records (:func:`.stored_values.stored`).
    """
    puts: dict[str, Node] = {}  # by id: a special channel written twice keeps its last value
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        node_id = f"{task_base}/{idx}"
        if idx >= 0 and node_id in present:
            continue  # a regular write is stored once; a special one (error, interrupt) replaced
        fields = stored(dumps, value, messages=messages)[0]
        puts[node_id] = note_with_proven(
            node_id,
            {"task_id": task_id, "task_path": task_path, "channel": channel, "idx": idx, **fields},
            Provenance(tool_call=task_path or task_id, source="langgraph"),
            proven(fields),
            MAX_JSON_DEPTH,
        )
    return tuple(puts.values())


def latest_of_each_namespace(checkpoints: Iterable[Node]) -> set[str]:
    """The ids of each namespace's latest checkpoint among ``checkpoints``."""
    latest: dict[str, Node] = {}
    for node in checkpoints:
        ns = node.content["checkpoint_ns"]
        if ns not in latest or node.content["checkpoint_id"] > latest[ns].content["checkpoint_id"]:
            latest[ns] = node
    return {node.id for node in latest.values()}


def removal(
    nodes: Sequence[Node], checkpoints: set[str]
) -> tuple[list[Node], list[str], set[tuple[str, str]]]:
    """What removing ``checkpoints`` (node ids) and their writes takes: pointers to put, ids to delete.

    A value goes when no checkpoint left has it (one that is left may keep a
    value a removed one wrote): a per-checkpoint value node no checkpoint left
    names, and a value node at the tip whose writer's value no checkpoint left
    has. A pointer that named a removed checkpoint moves to the latest one left
    in its namespace, or goes with the last one.

    Returns:
        The pointers to put, the ids to delete, and the (value id, writer) pairs
        the checkpoints left have: any other version of a value node is theirs no more.
    """
    remaining: dict[str, str] = {}  # namespace base id -> latest remaining checkpoint id
    used: set[str] = set()  # per-checkpoint value nodes a remaining checkpoint names
    pairs: set[tuple[str, str]] = set()  # (value node id, writer) a remaining checkpoint has
    for node in nodes:
        if is_checkpoint(node) and node.id not in checkpoints:
            base = node.id.rsplit("/", 1)[0]
            checkpoint_id = node.content["checkpoint_id"]
            if base not in remaining or remaining[base] < checkpoint_id:
                remaining[base] = checkpoint_id
            ids, kept = value_ids(base, node.content)
            used |= ids
            pairs |= kept
    gone = [node.id for node in nodes if _goes(node, checkpoints, used, pairs)]
    puts: list[Node] = []
    for node in nodes:
        if is_pointer(node):
            base = pointer_base(node.id)
            if base not in remaining:
                gone.append(node.id)
            elif remaining[base] != node.content["latest"]:
                puts.append(Node(id=node.id, content={"latest": remaining[base]}))
    return puts, gone, pairs


def _goes(node: Node, checkpoints: set[str], used: set[str], pairs: set[tuple[str, str]]) -> bool:
    if is_channel(node.id):
        return node.id not in used
    if is_stable(node.id):
        return (node.id, str(node.content.get(WRITTEN_BY))) not in pairs
    return owner(node.id) in checkpoints  # a removed checkpoint, or one of its writes


def copies(nodes: Sequence[Node], source: str, target: str, target_thread_id: str) -> list[Node]:
    """The nodes of thread branch ``source`` under the ids of branch ``target``."""
    return [
        Node(
            id=target + node.id[len(source) :],
            content={**node.content, "thread_id": target_thread_id} if is_checkpoint(node) else node.content,
            provenance=node.provenance,
        )
        for node in nodes
    ]
