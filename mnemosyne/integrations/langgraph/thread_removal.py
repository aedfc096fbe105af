"""How :class:`~mnemosyne.integrations.langgraph.saver.MnemosyneSaver` deletes, prunes and copies threads.

Deleting removes what LangGraph reads at once: a thread's branch, or checkpoints
with their writes (pointers that named them are fixed or dropped) in a commit.
With ``erase`` the deleted versions' bytes are erased too (a redaction record
stays): of a channel's value node, the versions no checkpoint left has. A copy
starts the target's branch at the source's tip, then gives it ids of its own, and
keeps each value the tip does not hold at an id of the checkpoint that wrote it
(ADR 65): a copy is one commit, and one id holds one value in a commit.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mnemosyne import InvalidInput, Node
from mnemosyne.integrations.langgraph.channel_values import SnapshotValues
from mnemosyne.integrations.langgraph.repo_protocol import ThreadRepo
from mnemosyne.integrations.langgraph.thread_nodes import (
    WRITTEN_BY,
    at_stable_ids,
    copies,
    holds,
    is_channel,
    is_checkpoint,
    latest_of_each_namespace,
    owner,
    pinned_id,
    removal,
    stable_id,
    writers,
)
from mnemosyne.integrations.langgraph.threads import BRANCH_PREFIX


class Removal(msgspec.Struct, frozen=True):
    """What a removal needs of its saver: the repo, the commits' author, and whether to erase."""

    repo: ThreadRepo
    author: str
    erase: bool


def thread_branches(repo: ThreadRepo) -> list[str]:
    """The branches that hold threads."""
    return [name for name in repo.branches() if name.startswith(BRANCH_PREFIX)]


def thread_snapshot(repo: ThreadRepo, branch: str) -> tuple[str, list[Node]] | None:
    """A thread's tip and every node on it (checkpoints, pointers and writes), in id order."""
    tip = repo.tip(branch)
    if tip is None:
        return None
    return tip, list(repo.nodes(at=tip, prefix=branch + "/"))


def delete_thread(how: Removal, thread_id: str) -> None:
    """Delete a thread's branch (and its name from before ADR 28, if a writer from then used it too)."""
    while True:
        branch = how.repo.thread_branch(thread_id)
        found = thread_snapshot(how.repo, branch)
        if found is None:
            return
        named = SnapshotValues(how.repo, found[0], found[1]).value_ids() if how.erase else []
        how.repo.delete_branch(branch, author=how.author)
        # Every version of each value node: one a checkpoint names that the tip no longer holds too.
        ids = sorted({node.id for node in found[1]} | set(named))
        _erase(how, ids, f"LangGraph deleted thread {thread_id}")


def delete_for_runs(how: Removal, runs: set[str]) -> None:
    """Delete every checkpoint made by one of ``runs``, and its writes, in every thread."""
    if not runs:
        return
    for branch in thread_branches(how.repo):
        found = thread_snapshot(how.repo, branch)
        if found is None:
            continue
        doomed = {node.id for node in found[1] if is_checkpoint(node) and node.content["run_id"] in runs}
        _delete(how, branch, found, doomed, f"delete the checkpoints of runs {sorted(runs)}")


def prune(how: Removal, threads: Sequence[str], *, keep_latest: bool) -> None:
    """Keep only each namespace's latest checkpoint of each thread, or none."""
    strategy = "keep_latest" if keep_latest else "delete"
    for thread_id in threads:
        branch = how.repo.thread_branch(thread_id)
        found = thread_snapshot(how.repo, branch)
        if found is None:
            continue
        checkpoints = [node for node in found[1] if is_checkpoint(node)]
        keep = latest_of_each_namespace(checkpoints) if keep_latest else set()
        doomed = {node.id for node in checkpoints if node.id not in keep}
        _delete(how, branch, found, doomed, f"prune thread {thread_id} ({strategy})")


def copy_thread(how: Removal, source_thread_id: str, target_thread_id: str) -> None:
    """Start the target's branch at the source's tip, then give it its own ids (one commit)."""
    source = how.repo.thread_branch(source_thread_id)
    found = thread_snapshot(how.repo, source)
    if found is None:
        return
    target = how.repo.thread_branch(target_thread_id)
    if how.repo.tip(target) is not None:
        raise InvalidInput(f"thread {target_thread_id!r} already has checkpoints: delete it first")
    tip, nodes = found
    how.repo.branch(target, at=tip, author=how.author)
    puts = copies([*nodes, *_pinned(how.repo, tip, nodes)], source, target, target_thread_id)
    how.repo.commit(
        put=puts,
        delete=[node.id for node in nodes],
        branch=target,
        message=f"copy of thread {source_thread_id}",
        author=how.author,
    )


def _pinned(repo: ThreadRepo, tip: str, nodes: Sequence[Node]) -> list[Node]:
    """Each value a checkpoint has that the tip does not hold, at an id of the checkpoint that wrote it."""
    values = SnapshotValues(repo, tip, nodes)
    by_id = {node.id: node for node in nodes}
    pinned: dict[str, Node] = {}
    for node in nodes:
        if not is_checkpoint(node) or not at_stable_ids(node.content):
            continue
        base = node.id.rsplit("/", 1)[0]
        for channel, writer in writers(node.content).items():
            node_id = pinned_id(base, writer, channel)
            if holds(by_id.get(stable_id(base, channel)), writer) or node_id in by_id or node_id in pinned:
                continue
            found = values.value(base, channel, writer)
            if found is not None:
                pinned[node_id] = Node(id=node_id, content=found.content, provenance=found.provenance)
    return list(pinned.values())


def _delete(
    how: Removal, branch: str, found: tuple[str, list[Node]], checkpoints: set[str], message: str
) -> None:
    """Delete checkpoints with their writes; fix or drop the pointers that named them.

    ``found``: the thread's tip and its nodes there (:func:`thread_snapshot`).
    """
    if not checkpoints:
        return
    tip, nodes = found
    puts, gone, kept = removal(nodes, checkpoints)
    how.repo.commit(put=puts, delete=gone, branch=branch, message=message, author=how.author)
    _erase(how, [i for i in gone if owner(i) in checkpoints or is_channel(i)], message)
    if how.erase:
        # The versions of the value nodes that no checkpoint left has: the removed ones' values.
        named = SnapshotValues(how.repo, tip, nodes).value_ids()
        for node_id, history in how.repo.histories(named, at=tip).items():
            hashes = {
                version.hash
                for version in history.versions
                if version.node is not None
                and (node_id, str(version.node.content.get(WRITTEN_BY))) not in kept
            }
            for version_hash in sorted(hashes):
                how.repo.forget(node_id, message, author=how.author, version=version_hash)


def _erase(how: Removal, ids: Sequence[str], why: str) -> None:
    if how.erase:
        for node_id in ids:
            how.repo.forget(node_id, why, author=how.author)
