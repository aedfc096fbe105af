"""Where a checkpoint's channel values are read from, in either layout (ADRs 33 and 65).

A checkpoint node names, per channel, the checkpoint whose put wrote the value
(:func:`.thread_nodes.writers`). At one id per channel (ADR 65) that value is the
channel's value node wherever it says ``written_by`` that checkpoint: at the tip
for the latest checkpoint, else in the commit of the checkpoint's own put (which
holds every value the checkpoint has), else, in a copied thread, at the
per-checkpoint id the copy pinned it to, else in the value node's history. A
checkpoint of ADR 33 names per-checkpoint value nodes, read at the tip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mnemosyne import Node
from mnemosyne.integrations.langgraph.known import Located
from mnemosyne.integrations.langgraph.repo_protocol import Rev, ThreadRepo, nodes_at
from mnemosyne.integrations.langgraph.stored_values import Loads, serialized
from mnemosyne.integrations.langgraph.thread_nodes import (
    STABLE,
    at_stable_ids,
    by_channel,
    channel_node_id,
    holds,
    is_checkpoint,
    located,
    pinned_id,
    stable_id,
    writers,
)


def at_tip(repo: ThreadRepo, base: str, tip: Rev) -> dict[str, Node]:
    """The namespace's value nodes at ``tip`` by id, in one read (an erased one is left out)."""
    return {node.id: node for node in repo.nodes(at=tip, prefix=base + STABLE)}


def read_values(
    repo: ThreadRepo, loads: Loads, tip: str, node: Node, own: str | None = None
) -> tuple[dict[str, Located], bool]:
    """The values of checkpoint ``node`` at ``tip``, and whether the tip's value nodes are exactly its values.

    ``own``: the commit of the checkpoint's put, when the node was read with it.
    For a checkpoint whose put is not the tip's, that commit's value nodes are
    read (one read), not the tip's: they hold its values. A value read nowhere
    (its node gone by hand) leaves the channel empty, as a lost blob does; one
    erased raises ``Redacted``.
    """
    base = node.id.rsplit("/", 1)[0]
    where = located(loads, node.content)
    if not at_stable_ids(node.content):
        return _per_checkpoint(repo, base, tip, where), False
    first = own if own is not None and own != tip else tip
    current = at_tip(repo, base, first)
    channels: dict[str, Located] = {}
    missing: list[str] = []
    for channel, found in where.items():
        value = current.get(stable_id(base, channel))
        if holds(value, found.writer):
            assert value is not None
            channels[channel] = Located(found.writer, found.version, serialized(value.content))
        else:
            missing.append(channel)
    exact = first == tip and not missing and len(current) == len(where)
    if missing:
        for channel in missing:
            if stable_id(base, channel) not in current:
                repo.get(stable_id(base, channel), at=first)  # left out as erased? then it says so (Redacted)
        if first == tip:
            if own is None:
                put = repo.history(node.id, at=tip, limit=1)
                own = put[0].commit.id if put else None
            earlier = at_tip(repo, base, own) if own is not None and own != tip else {}
        else:
            earlier = {}  # read there already: a copy's pinned values, or a value's history, are left
        for channel in missing:
            found = where[channel]
            value = earlier.get(stable_id(base, channel))
            if not holds(value, found.writer):
                value = repo.get(pinned_id(base, found.writer, channel), at=tip)
            if value is None:
                value = _in_history(repo, tip, stable_id(base, channel), found.writer)
            if value is not None:
                channels[channel] = Located(found.writer, found.version, serialized(value.content))
    return channels, exact


def _per_checkpoint(
    repo: ThreadRepo, base: str, tip: str, where: Mapping[str, Located]
) -> dict[str, Located]:
    """A checkpoint's values at ADR 33's ids, every channel in one read."""
    ids = {channel: channel_node_id(base, found.writer, channel) for channel, found in where.items()}
    read = nodes_at(repo, ids.values(), tip) if ids else {}
    channels: dict[str, Located] = {}
    for channel, found in where.items():
        value = read.get(ids[channel])
        if value is None:  # asked alone: an erased value raises Redacted, as a read of it does
            value = repo.get(ids[channel], at=tip)
        if value is not None:
            channels[channel] = Located(found.writer, found.version, serialized(value.content))
    return channels


def _in_history(repo: ThreadRepo, tip: str, node_id: str, writer: str) -> Node | None:
    """The newest version of a value node that ``writer``'s put wrote, from its history."""
    for version in repo.history(node_id, at=tip):
        if holds(version.node, writer):
            return version.node
    return None


class SnapshotValues:
    """The values of every checkpoint of a thread, from one read of its nodes at a tip.

    A value the tip does not hold is looked up in the value nodes' histories, read
    once, all together, when first needed.

    Args:
        repo: the thread's repo.
        tip: the commit the nodes were read at.
        nodes: every node of the thread at ``tip``.
    """

    def __init__(self, repo: ThreadRepo, tip: str, nodes: Sequence[Node]) -> None:
        self._repo = repo
        self._tip = tip
        self._by_id = {node.id: node for node in nodes}
        self._checkpoints = [node for node in nodes if is_checkpoint(node)]
        self._history: dict[tuple[str, str], Node] | None = None

    def contents(self, node: Node) -> dict[str, dict[str, Any]]:
        """The stored content of each channel value checkpoint ``node`` has, by channel."""
        if not by_channel(node.content):
            return {}
        base = node.id.rsplit("/", 1)[0]
        out: dict[str, dict[str, Any]] = {}
        for channel, writer in writers(node.content).items():
            found = self.value(base, channel, writer, stable=at_stable_ids(node.content))
            if found is not None:
                out[channel] = found.content
        return out

    def value(self, base: str, channel: str, writer: str, *, stable: bool = True) -> Node | None:
        """The node holding ``channel``'s value as ``writer``'s put wrote it, or None."""
        if not stable:
            return self._by_id.get(channel_node_id(base, writer, channel))
        node_id = stable_id(base, channel)
        current = self._by_id.get(node_id)
        if holds(current, writer):
            return current
        pinned = self._by_id.get(pinned_id(base, writer, channel))
        if pinned is not None:
            return pinned
        return self._histories().get((node_id, writer))

    def value_ids(self) -> list[str]:
        """Every value node id a checkpoint of the snapshot names (some may be gone from the tip)."""
        return sorted(_stable_ids(self._checkpoints))

    def _histories(self) -> Mapping[tuple[str, str], Node]:
        if self._history is None:
            self._history = {}
            for node_id, history in self._repo.histories(self.value_ids(), at=self._tip).items():
                for version in history.versions:  # newest first: the newest a writer wrote wins
                    if version.node is not None and isinstance(version.node.content, dict):
                        key = (node_id, str(version.node.content.get("written_by")))
                        self._history.setdefault(key, version.node)
        return self._history


def _stable_ids(checkpoints: Iterable[Node]) -> set[str]:
    ids: set[str] = set()
    for node in checkpoints:
        if at_stable_ids(node.content):
            base = node.id.rsplit("/", 1)[0]
            ids.update(stable_id(base, channel) for channel in writers(node.content))
    return ids
