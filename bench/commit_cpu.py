"""The CPU part of a commit: sync-off commits of 10 nodes at each store size.

Each measurement runs in a fresh process on a fresh copy of a store holding n
nodes, so the sizes differ only in the store: not in what the process did before
(a 100k-node bulk import leaves a large heap behind), nor in when they ran. The
sizes take turns, run after run, so drift on the machine falls on all of them;
the figure per size is the median of the runs' medians.

Run as a script, it is the measuring child: ``commit_cpu.py STORE N SEED``
prints one JSON object with the medians of the first commits after opening and
of the commits after the warm-up.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import make_node, row

from mnemosyne import Repo

WARM_UP = 50
"""Untimed commits before the ones that count: an agent's handle commits many times."""
ROUNDS = 200
"""Commits that count, per run."""
FIRST = 20
"""The first commits after opening, shown beside the warmed-up ones."""


def child(store: Path, n: int, seed: int) -> dict[str, float]:
    """Time sync-off commits of 10 random nodes into ``store`` (n nodes)."""
    rng = random.Random(seed)
    version = 1
    samples = []
    with Repo.open(store, sync=False) as repo:
        for r in range(WARM_UP + ROUNDS):
            batch = [make_node(rng.randrange(n), version + k) for k in range(10)]
            batch = list({node.id: node for node in batch}.values())  # one version per id
            version += 10
            t0 = time.perf_counter()
            repo.commit(batch, message=f"nosync {r}", author="bench")
            samples.append(time.perf_counter() - t0)
    return {
        "first": statistics.median(samples[:FIRST]),
        "warm": statistics.median(samples[WARM_UP:]),
    }


def bench_commit_cpu(root: Path, sizes: list[int], runs: int) -> None:
    """Rows for the sync-off commit at each size, and the ratio of the largest to the smallest."""
    stores = {}
    for n in sizes:
        stores[n] = root / f"cpu-{n}"
        with Repo.init(stores[n]) as repo:
            repo.commit([make_node(i) for i in range(n)], message="import", author="bench")
    results: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    warm_us: dict[int, float] = {}
    for run in range(runs):
        # Alternate the order too, so no size always runs first.
        for n in sizes if run % 2 == 0 else sizes[::-1]:
            work = root / f"cpu-{n}-work"
            shutil.copytree(stores[n], work)
            out = subprocess.run(
                [sys.executable, __file__, str(work), str(n), str(run)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[n].append(json.loads(out))
            shutil.rmtree(work)
    for n in sizes:
        first = statistics.median(r["first"] for r in results[n]) * 1e6
        warm = statistics.median(r["warm"] for r in results[n]) * 1e6
        row(
            f"commit of 10 nodes, sync off, first {FIRST} after opening, median of {runs} runs (µs)",
            n,
            f"{first:,.0f}",
        )
        row(
            f"commit of 10 nodes, sync off, after {WARM_UP} commits, median of {runs} runs (µs)",
            n,
            f"{warm:,.0f}",
            "<= 1000 at 100k" if n >= 100_000 else "",
            warm <= 1000 if n >= 100_000 else None,
        )
        warm_us[n] = warm
    if len(sizes) >= 2:
        lo, hi = min(sizes), max(sizes)
        ratio = warm_us[hi] / warm_us[lo]
        per_run = sorted(a["warm"] / b["warm"] for a, b in zip(results[hi], results[lo], strict=True))
        row(
            f"commit CPU (sync off) ratio n={hi} / n={lo} (runs: {per_run[0]:.2f} to {per_run[-1]:.2f})",
            f"{hi}/{lo}",
            f"{ratio:.2f}",
            "<= 3",
            ratio <= 3,
        )
    for n in sizes:
        shutil.rmtree(stores[n])


if __name__ == "__main__":
    print(json.dumps(child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
