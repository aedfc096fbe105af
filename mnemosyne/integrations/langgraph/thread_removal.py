"""How :class:`~mnemosyne.integrations.langgraph.saver.MnemosyneSaver` deletes, prunes and copies threads.

Deleting removes what LangGraph reads at once: a thread's branch, or checkpoints
with their writes (pointers that named them are fixed or dropped) in a commit.
With ``erase`` the deleted versions' bytes are erased too (a redaction record
stays). A copy starts the target's branch at the source's tip, then gives it ids
of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mnemosyne import InvalidInput, Node
from mnemosyne.integrations.langgraph.repo_protocol import ThreadRepo
from mnemosyne.integrations.langgraph.thread_nodes import (
    copies,
    is_channel,
    is_checkpoint,
    latest_of_each_namespace,
    owner,
    removal,
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
        how.repo.delete_branch(branch, author=how.author)
        _erase(how, [node.id for node in found[1]], f"LangGraph deleted thread {thread_id}")


def delete_for_runs(how: Removal, runs: set[str]) -> None:
    """Delete every checkpoint made by one of ``runs``, and its writes, in every thread."""
    if not runs:
        return
    for branch in thread_branches(how.repo):
        found = thread_snapshot(how.repo, branch)
        if found is None:
            continue
        doomed = {node.id for node in found[1] if is_checkpoint(node) and node.content["run_id"] in runs}
        _delete(how, branch, found[1], doomed, f"delete the checkpoints of runs {sorted(runs)}")


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
        _delete(how, branch, found[1], doomed, f"prune thread {thread_id} ({strategy})")


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
    puts = copies(nodes, source, target, target_thread_id)
    how.repo.commit(
        put=puts,
        delete=[node.id for node in nodes],
        branch=target,
        message=f"copy of thread {source_thread_id}",
        author=how.author,
    )


def _delete(how: Removal, branch: str, nodes: Sequence[Node], checkpoints: set[str], message: str) -> None:
    """Delete checkpoints with their writes; fix or drop the pointers that named them."""
    if not checkpoints:
        return
    puts, gone = removal(nodes, checkpoints)
    how.repo.commit(put=puts, delete=gone, branch=branch, message=message, author=how.author)
    _erase(how, [i for i in gone if owner(i) in checkpoints or is_channel(i)], message)


def _erase(how: Removal, ids: Sequence[str], why: str) -> None:
    if how.erase:
        for node_id in ids:
            how.repo.forget(node_id, why, author=how.author)
