"""The nodes a saver writes, reads back as LangGraph's tuples, removes and copies.

Pure functions over nodes (ADR 0017): the saver reads a thread's nodes, asks here
what to put and delete, and makes one commit of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, CheckpointTuple, PendingWrite

from mnemosyne import Node, Provenance
from mnemosyne.integrations.langgraph.namespaces import shown
from mnemosyne.integrations.langgraph.threads import pack, unpack

WRITES = "/w/"
"""What follows a checkpoint node's id in the ids of its pending writes."""


def checkpoint_tuple(
    loads: Callable[[tuple[str, bytes]], Any],
    saved: dict[str, Any],
    writes: list[dict[str, Any]],
    checkpoint_bytes: tuple[str, bytes] | None = None,
    metadata_bytes: tuple[str, bytes] | None = None,
) -> CheckpointTuple:
    """LangGraph's tuple for a checkpoint node's content and its writes' contents.

    ``checkpoint_bytes`` and ``metadata_bytes``, when given, are the content's
    serialized parts already decoded (what a saver knows keeps them so).
    """
    thread_id, ns, checkpoint_id = saved["thread_id"], saved["checkpoint_ns"], saved["checkpoint_id"]
    checkpoint: Checkpoint = loads(checkpoint_bytes or unpack(saved["checkpoint"]))
    writes.sort(key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
    pending: list[PendingWrite] = [(w["task_id"], w["channel"], loads(unpack(w["value"]))) for w in writes]
    parent = saved["parent"]
    return CheckpointTuple(
        config={
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        },
        checkpoint=checkpoint,
        metadata=loads(metadata_bytes or unpack(saved["metadata"])),
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


def owner(node_id: str) -> str:
    """The checkpoint node id ``node_id`` belongs to: its own, or a pending write's checkpoint's.

    A write's id is ``threads/T/NS/CP/w/TASK/IDX``: seven segments, none holding a
    ``/``. Counted, not searched for ``/w/``: a thread or namespace named ``w`` puts
    ``/w/`` inside a checkpoint's own id.
    """
    return node_id.rsplit("/", 3)[0] if node_id.count("/") == 6 else node_id


def is_checkpoint(node: Node) -> bool:
    """Whether ``node`` is a checkpoint (not a pointer or a pending write)."""
    return isinstance(node.content, dict) and "checkpoint" in node.content


def is_pointer(node: Node) -> bool:
    """Whether ``node`` names a namespace's latest checkpoint."""
    return isinstance(node.content, dict) and set(node.content) == {"latest"}


def write_nodes(
    dumps: Callable[[Any], tuple[str, bytes]],
    task_base: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    stored: set[str],
) -> tuple[Node, ...]:
    """The nodes of a task's writes, but for regular ones already stored (as LangGraph's savers)."""
    puts: dict[str, Node] = {}  # by id: a special channel written twice keeps its last value
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        node_id = f"{task_base}/{idx}"
        if idx >= 0 and node_id in stored:
            continue  # a regular write is stored once; a special one (error, interrupt) replaced
        puts[node_id] = Node(
            id=node_id,
            content={
                "task_id": task_id,
                "task_path": task_path,
                "channel": channel,
                "idx": idx,
                "value": pack(dumps(value)),
            },
            provenance=Provenance(tool_call=task_path or task_id, source="langgraph"),
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


def removal(nodes: Sequence[Node], checkpoints: set[str]) -> tuple[list[Node], list[str]]:
    """What removing ``checkpoints`` (node ids) and their writes takes: pointers to put, ids to delete.

    A pointer that named a removed checkpoint moves to the latest one left in its
    namespace, or goes with the last one.
    """
    gone = [node.id for node in nodes if owner(node.id) in checkpoints]
    remaining: dict[str, str] = {}  # namespace base id -> latest remaining checkpoint id
    for node in nodes:
        if is_checkpoint(node) and node.id not in checkpoints:
            base = node.id.rsplit("/", 1)[0]
            checkpoint_id = node.content["checkpoint_id"]
            if base not in remaining or remaining[base] < checkpoint_id:
                remaining[base] = checkpoint_id
    puts: list[Node] = []
    for node in nodes:
        if is_pointer(node):
            if node.id not in remaining:
                gone.append(node.id)
            elif remaining[node.id] != node.content["latest"]:
                puts.append(Node(id=node.id, content={"latest": remaining[node.id]}))
    return puts, gone


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
