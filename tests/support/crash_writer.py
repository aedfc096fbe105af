"""A writer for test_crash.py and test_limits.py, run as a process of its own.

``python -m support.crash_writer STORE TRIAL SEED [MAP_SIZE]`` prints ``ready``
once imported and waits for a line on stdin (so a harness can start the next
writer while it checks the last one), then opens the store (durable: the
default ``sync``) and commits until it is killed:
a few notes per commit, now and then a claim, an update of an earlier note or a
removal, and every few commits a new branch. After each write returns it prints
one line and flushes, so every line the harness reads is an acknowledged write:

    commit <id> <i>            commit number i of this trial
    branch <name> <commit id>  a branch created at that commit

Node ids and contents are a function of (TRIAL, i), so the harness can check
what every acknowledged commit must contain.
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta

from mnemosyne import Claim, Node, Provenance, Repo

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def nodes_for(trial: int, i: int, rng: random.Random) -> tuple[list[Node], list[str]]:
    """The puts and removals of commit ``i`` of ``trial``."""
    puts = [
        Node(
            id=f"t{trial}/c{i}/n{k}",
            content={"trial": trial, "i": i, "k": k, "pad": "x" * rng.randrange(0, 3000)},
            provenance=Provenance(agent_step=i, source="crash"),
        )
        for k in range(rng.randrange(1, 5))
    ]
    # one note rewritten on every commit: a long version history for one id
    puts.append(Node(id=f"t{trial}/counter", content=i))
    if i % 3 == 0:
        puts.append(
            Node(
                id=f"t{trial}/claims/{i}",
                kind="claim",
                content=Claim(f"s{trial}", f"p{i % 4}", i, BASE + timedelta(minutes=i)),
            )
        )
    removals = [f"t{trial}/c{i - 2}/n0"] if i >= 2 and i % 5 == 0 else []
    return puts, removals


def main() -> None:
    path, trial_text, seed_text, *map_size = sys.argv[1:]
    trial = int(trial_text)
    rng = random.Random(int(seed_text))
    out = sys.stdout
    options = {"map_size": int(map_size[0])} if map_size else {}
    out.write("ready\n")
    out.flush()
    if not sys.stdin.readline():
        return  # the harness went away without starting us
    with Repo.open(path, **options) as repo:
        i = 0
        while True:
            puts, removals = nodes_for(trial, i, rng)
            made = repo.commit(puts, removals, message=f"trial {trial} commit {i}", author=f"crash-{trial}")
            if not made.created:  # every commit rewrites the counter: one that changed nothing is a bug
                raise SystemExit(f"commit {i} of trial {trial} changed nothing")
            out.write(f"commit {made.id} {i}\n")
            out.flush()
            if i % 4 == 3:
                name = f"t{trial}/b{i}"
                tip = repo.branch(name, author=f"crash-{trial}")
                if tip is None or tip.id != made.id:
                    raise SystemExit(f"branch {name} does not start at commit {i}")
                out.write(f"branch {name} {tip.id}\n")
                out.flush()
            i += 1


if __name__ == "__main__":
    main()
