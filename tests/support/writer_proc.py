"""A writer process for test_concurrency.py: ``python -m support.writer_proc MODE PATH WORKER COUNT GO_FILE``.

Opens the store, prints ``ready``, waits for ``GO_FILE`` to exist (so every process
starts writing at once), then writes and prints one JSON line of statistics.
"""

from __future__ import annotations

import json
import os
import sys
import time

from mnemosyne import Node, RefConflict, Repo, with_retry


def wait_for(go_file: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit("never got the go signal")
        time.sleep(0.001)


def plain(repo: Repo, worker: int, count: int) -> dict:
    created = 0
    for j in range(count):
        node_id = f"w{worker}/n{j:03d}"
        made = repo.commit(
            [Node(id=node_id, content={"worker": worker, "j": j, "pad": "x" * 2000})],
            message=f"{worker}:{j}",
            author=f"w{worker}",
        )
        if made.created and made.put_ids == (node_id,):
            created += 1
    return {"commits": created}


def counter(repo: Repo, worker: int, count: int) -> dict:
    attempts = 0

    def bump():
        nonlocal attempts
        attempts += 1
        tip = repo.resolve("HEAD")
        value = repo.get("counter", at=tip.id).content
        return repo.commit(
            [Node(id="counter", content=value + 1)],
            parent=tip.id,
            message=f"{worker}: {value} -> {value + 1}",
            author=f"w{worker}",
        )

    for _ in range(count):
        made = with_retry(bump, attempts=1000, base_delay=0.0005, max_delay=0.01)
        if not made.created:  # pragma: no cover - reported to the test
            return {"error": f"commit {made.id} changed nothing", "attempts": attempts}
    return {"attempts": attempts}


def main() -> None:
    mode, path, worker, count, go_file = sys.argv[1:]
    with Repo.open(path, map_size=64 * 1024) as repo:
        print("ready", flush=True)
        wait_for(go_file)
        run = plain if mode == "plain" else counter
        try:
            stats = run(repo, int(worker), int(count))
        except RefConflict as exc:  # pragma: no cover - reported to the test
            stats = {"error": str(exc)}
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
