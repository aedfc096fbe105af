"""One agent of a team for test_team.py: ``python -m support.team_member HUB CLONE WORKER COUNT GO_FILE``.

Clones the hub into a store of its own at CLONE, prints ``ready``, waits for
``GO_FILE`` (so every member starts at once), then commits COUNT times and syncs
with the hub every :data:`SYNC_EVERY` commits and at the end, the way a team
would: pull, settle conflicts by :func:`settle`, push, and start over when the
push is refused because another member pushed first. Prints one JSON line: what
it wrote and how the syncs went.

What a member writes:

- ``team/wW/mNN``: one memory of its own per commit (only it writes these ids).
- ``shared/kK``: every third commit, one of four ids all members write, so pulls
  meet conflicts. The value is ``"SSSSSS wW iNN"``: a Lamport stamp (above every
  stamp this member has seen in ``shared/`` so far), then who wrote it.
- ``claims/wW/city``: in its first commit, a claim on ``team-lead city`` with a
  value no other member gives, so merges record contradictions.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from mnemosyne import Claim, Conflict, Node, RefConflict, Repo
from mnemosyne.history.branches import Resolution
from support.writer_proc import wait_for  # the go signal, as the concurrency test's writers wait for it

SHARED = 4
"""How many ids every member writes."""

SYNC_EVERY = 10
"""Commits between two syncs."""

STAMP_WIDTH = 6


def settle(conflicts: Sequence[Conflict]) -> dict[str, Resolution]:
    """The team's conflict rule: per id, the value that sorts last wins (the higher Lamport stamp).

    Every member applies the same rule to the same two versions, so who merges
    does not change the outcome: the write with the highest stamp ends up on the hub.
    """
    # Members never delete a shared id, so both sides of each conflict hold a version.
    return {
        c.id: "ours" if c.ours and c.theirs and c.ours.content > c.theirs.content else "theirs"
        for c in conflicts
    }


def stamp_seen(repo: Repo) -> int:
    """The highest Lamport stamp of the shared ids at HEAD."""
    seen = [repo.get(f"shared/k{k}") for k in range(SHARED)]
    return max((int(node.content[:STAMP_WIDTH]) for node in seen if node is not None), default=0)


def sync(repo: Repo, author: str, stats: dict[str, int]) -> None:
    """Pull, settle conflicts, push; again from the pull while the hub has moved on meanwhile."""
    while True:
        stats["pulls"] += 1
        pulled = repo.pull(author=author).merge
        if pulled.conflicts:
            stats["conflicts"] += len(pulled.conflicts)
            # The fetch stands after a stopped pull: merge what was fetched, settled by the rule.
            settled = repo.merge("origin/main", resolutions=settle(pulled.conflicts), author=author)
            assert settled.commit is not None, settled.conflicts
        try:
            repo.push(author=author)
        except RefConflict:
            stats["refused"] += 1
            continue
        stats["pushes"] += 1
        return


def main() -> None:
    hub, path, worker_text, count_text, go_file = sys.argv[1:]
    worker, count = int(worker_text), int(count_text)
    author = f"w{worker}"
    stats = {"pulls": 0, "pushes": 0, "refused": 0, "conflicts": 0}
    private: dict[str, str] = {}
    shared: list[tuple[str, str]] = []
    with Repo.clone(hub, path, author=author) as repo:
        print("ready", flush=True)
        wait_for(go_file)
        started = time.monotonic()
        clock = 0
        for i in range(count):
            puts = [Node(id=f"team/{author}/m{i:02d}", content=f"{author} memory {i}")]
            private[puts[0].id] = puts[0].content
            if i == 0:
                claim = Claim(
                    "team-lead", "city", f"city of {author}", valid_from=datetime(2026, 1, 1, tzinfo=UTC)
                )
                puts.append(Node(id=f"claims/{author}/city", kind="claim", content=claim))
            if i % 3 == 0:
                clock += 1
                node_id = f"shared/k{(i // 3) % SHARED}"
                value = f"{clock:0{STAMP_WIDTH}d} {author} i{i:02d}"
                puts.append(Node(id=node_id, content=value))
                shared.append((node_id, value))
            repo.commit(puts, message=f"{author}: {i}", author=author)
            if i % SYNC_EVERY == SYNC_EVERY - 1 or i == count - 1:
                sync(repo, author, stats)
                clock = max(clock, stamp_seen(repo))
        seconds = time.monotonic() - started
    print(json.dumps({"private": private, "shared": shared, "stats": stats, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
