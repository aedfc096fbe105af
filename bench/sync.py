"""Benchmarks for remotes: a push of many new commits to a path remote, and a no-op fetch.

Call :func:`bench_sync` from ``bench/run.py`` (rows go to the same table):

    from sync import bench_sync
    bench_sync(root, commits=10_000, noop_sizes=(1_000, 100_000))

or run it alone: ``python bench/sync.py [--commits N] [--noop 1000,100000]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import make_node, row

from mnemosyne import Repo


def _history(path: Path, commits: int, per_commit: int) -> Repo:
    """A store whose main has ``commits`` commits of ``per_commit`` new nodes each."""
    moment = [datetime(2026, 1, 1, tzinfo=UTC)]

    def clock() -> datetime:
        moment[0] += timedelta(seconds=1)
        return moment[0]

    repo = Repo.init(path, sync=False, clock=clock)
    for c in range(commits):
        repo.commit(
            [make_node(c * per_commit + j) for j in range(per_commit)], message=f"c{c}", author="bench"
        )
    return repo


def bench_push(root: Path, commits: int, per_commit: int = 8) -> None:
    """Push ``commits`` new commits (about ``commits * (per_commit + 3)`` objects) to an empty path remote."""
    with _history(root / "push-local", commits, per_commit) as local:
        Repo.init(root / "push-remote").close()
        local.store.add_remote("bench", root / "push-remote")
        t0 = time.perf_counter()
        report = local.push("bench")
        elapsed = time.perf_counter() - t0
    (part,) = report.tenants
    rate = part.objects / elapsed
    row(
        "push to a path remote, objects/s",
        f"{part.commits} commits, {part.objects} objects",
        f"{rate:,.0f}",
        ">= 20,000",
        rate >= 20_000,
    )


def bench_noop_fetch(root: Path, sizes: Sequence[int], rounds: int = 7) -> None:
    """A fetch that finds nothing new, at each history size (it should not grow with history)."""
    for n in sizes:
        with _history(root / f"noop-{n}", n, 1):
            pass
        with Repo.clone(root / f"noop-{n}", root / f"noop-{n}-clone") as clone:
            samples = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                clone.fetch()
                samples.append(time.perf_counter() - t0)
        ms = statistics.median(samples) * 1e3
        row("no-op fetch from a path remote (ms)", f"{n} commits", f"{ms:.2f}", "flat in n")


def bench_sync(root: Path, commits: int = 10_000, noop_sizes: Sequence[int] = (1_000, 100_000)) -> None:
    """Every remotes row: the push rate, then no-op fetches at each size."""
    bench_push(root, commits)
    bench_noop_fetch(root, noop_sizes)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--noop", default="1000,100000")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-sync-"))
    try:
        bench_sync(root, args.commits, [int(n) for n in args.noop.split(",")])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
