"""A transfer sends what a commit adds to its parents' trees: checked on trees of several levels.

The transfer (in a process or over HTTP) compares each new commit's tree with its
parents' trees level by level instead of asking the receiver about every chunk.
These histories make trees grow and shrink a level, merge, revert to an older
state and diverge, and every push must leave the receiver whole (fsck), with
exactly the sender's snapshots, having sent only what it lacked.
"""

from __future__ import annotations

import random

import pytest
from support.clocks import Clock

from mnemosyne import Node, Repo, Store


def nodes(ids: range, tag: str) -> list[Node]:
    return [Node(id=f"mem/{i:05d}", content=f"{tag} {i}") for i in ids]


def snapshot(repo: Repo, rev: str) -> dict[str, object]:
    return {node.id: node.content for node in repo.nodes(at=rev)}


def pushed_whole(source: Repo, hub: Store, branch: str) -> int:
    """Push ``branch`` to ``hub``; check the hub has it whole; the objects sent."""
    report = source.push("hub", branch, store=hub, force=True)
    with Repo.open(hub) as there:
        assert there.fsck().ok
        assert there.tip(branch) == source.tip(branch)
        assert snapshot(there, branch) == snapshot(source, branch)
    assert source.push("hub", branch, store=hub).tenants[0].objects == 0  # nothing twice
    return report.tenants[0].objects


@pytest.mark.slow  # half a second: trees of three levels
def test_pushes_of_trees_that_grow_shrink_merge_and_revert_send_what_the_hub_lacks() -> None:
    rng = random.Random(7)
    hub = Store.in_memory()
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit(nodes(range(40), "v0"), message="one leaf")
        assert pushed_whole(repo, hub, "main") > 0
        repo.commit(nodes(range(1500), "v1"), message="three levels")  # the tree grows two levels
        pushed_whole(repo, hub, "main")
        start = repo.tip("main")
        repo.branch("side")
        for round_ in range(6):  # both branches edit a few memories spread over the tree
            for branch in ("main", "side"):
                picked = rng.sample(range(1500), 12)
                repo.commit(
                    [Node(id=f"mem/{i:05d}", content=f"{branch} {round_} {i}") for i in picked],
                    delete=[f"mem/{rng.randrange(1500):05d}"],
                    branch=branch,
                    message=f"{branch} {round_}",
                )
            sent = pushed_whole(repo, hub, "side")
            assert 0 < sent < 200  # a few paths of a 1,500-memory tree, not the tree
        merged = repo.merge("side", strategy="theirs", message="merge side")
        assert merged.commit is not None
        pushed_whole(repo, hub, "main")
        # Back to an older snapshot: the hub has every chunk of it already.
        old = snapshot(repo, start)
        now = snapshot(repo, "main")
        repo.commit(
            [Node(id=key, content=value) for key, value in old.items() if now.get(key) != value],  # type: ignore[arg-type]
            delete=[key for key in now if key not in old],
            message="revert",
        )
        assert snapshot(repo, "main") == old
        assert pushed_whole(repo, hub, "main") == 1  # the commit alone
        # The tree shrinks back to one leaf, then an unrelated root arrives on a branch of its own.
        repo.commit(delete=[f"mem/{i:05d}" for i in range(10, 1500)], message="shrink")
        pushed_whole(repo, hub, "main")
        repo.branch("fresh", orphan=True)
        repo.commit(nodes(range(500, 900), "fresh"), branch="fresh", message="unrelated")
        pushed_whole(repo, hub, "fresh")
    # A fetch the other way brings the hub's whole history into a new store.
    with Repo.in_memory(clock=Clock()) as other:
        fetched = other.fetch("hub", store=hub).tenants[0]
        assert fetched.commits > 0 and other.fsck().ok
        assert snapshot(other, "hub/main") == snapshot(Repo.open(hub), "main")
    hub.close()
