"""Benchmarks at a million memories, each row beside the same operation at 100k.

Both stores are built in one run by bulk import (one commit, ``sync=False``), then
reopened with durable commits. Each group below measures its operation on every
size in the same run, the sizes taking turns sample by sample, so drift on the
machine falls on all of them. Every size is judged against the targets set for
1M, and where the target is "unchanged from 100k" the row is a ratio of medians.

A group is ``bench_<name>(root, sizes) -> list[Row]``: it reads the stores built by
``bench_import`` (``store_path(root, n)``), adds its rows to the table and returns
them. To add rows (recall, say), write a group that builds what else it needs
under ``root`` and put it in ``GROUPS`` before ``bench_integrity``, whose gc
changes the stores. ``--only reads,fresh_process`` runs some groups (with the
import and the commits the others read). Usage:

    python bench/large.py [--out bench/results-large.md] [--sizes 100000,1000000] [--quick]
"""

from __future__ import annotations

import argparse
import gc as pygc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from claims_large import bench_claims
from core_runs import twin_of
from harness import ROWS, Row, make_node, median_us, node_id, row, write_table
from recall_large import THRESHOLD, bench_recall

from mnemosyne import Repo
from mnemosyne.store import settings

# As in run.py: the bench picks its embedders itself; these stores search lexically.
settings.KEYS["embedder"] = "none"

ROUNDS = 31
"""Durable 10-node commits per size (each followed by its raw LMDB twin)."""
TRACKED = 1
"""A node every commit round writes a new version of (for history and blame)."""
UNTOUCHED = 0
"""A node written by the import only: blame walks back to it."""
NOISE = 1.5
"""Largest 1M / 100k ratio of medians read as "unchanged within noise" on a shared 2-core machine."""
GARBAGE_COMMITS = 16
"""Commits of the branch gc collects (bench_integrity): between them they write 1 % of the nodes."""


def store_path(root: Path, n: int) -> Path:
    return root / f"large-{n}"


def _group_rows(start: int) -> list[Row]:
    return ROWS[start:]


def _turns(sizes: list[int], r: int) -> list[int]:
    """The sizes in the order of round ``r``: alternating, so no size always goes first."""
    return sizes if r % 2 == 0 else sizes[::-1]


def bench_import(root: Path, sizes: list[int]) -> list[Row]:
    """Build a store of each size by bulk import: one commit of n nodes, sync off."""
    start = len(ROWS)
    for n in sizes:
        nodes = [make_node(i) for i in range(n)]
        with Repo.init(store_path(root, n), sync=False) as repo:
            t0 = time.perf_counter()
            repo.commit(nodes, message="import", author="bench")
            elapsed = time.perf_counter() - t0
        del nodes
        pygc.collect()
        rate = n / elapsed
        row(
            "bulk import, one commit, sync off (nodes/s)",
            n,
            f"{rate:,.0f} in {elapsed:.1f} s",
            ">= 100,000",
            rate >= 100_000,
        )
    return _group_rows(start)


def bench_commits(root: Path, sizes: list[int]) -> list[Row]:
    """Durable 10-node commits, each followed by a raw LMDB transaction of the same keys and sizes.

    The raw twin is an LMDB database holding as many random keys of the same sizes
    in the same keyspaces as the store (``core_runs.twin_of``): the pages a write
    touches, and so a durable transaction's cost, grow with the database. Every
    round writes node ``TRACKED`` too, so ``history`` and ``blame`` have versions.
    """
    start = len(ROWS)
    twins = {n: twin_of(store_path(root, n), root / f"twin-{n}") for n in sizes}
    repos = {n: Repo.open(store_path(root, n)) for n in sizes}
    rng = random.Random(1)
    commit_t: dict[int, list[float]] = {n: [] for n in sizes}
    twin_t: dict[int, list[float]] = {n: [] for n in sizes}
    keys: dict[int, int] = {}
    try:
        for r in range(ROUNDS):
            for n in _turns(sizes, r):
                repo = repos[n]
                version = r + 1
                picked = {TRACKED} | {rng.randrange(2, n) for _ in range(9)}
                while len(picked) < 10:
                    picked.add(rng.randrange(2, n))
                batch = [make_node(i, version) for i in sorted(picked)]
                puts: list[tuple[int, int, Any]] = []
                with _Recorder(puts):
                    t0 = time.perf_counter()
                    repo.commit(batch, message=f"round {r}", author="bench")
                    commit_t[n].append(time.perf_counter() - t0)
                keys[n] = len(puts)
                env, dbs = twins[n]
                items = [(os.urandom(k), os.urandom(v), space) for k, v, space in puts]
                t0 = time.perf_counter()
                with env.begin(write=True) as txn:
                    for key, value, space in items:
                        txn.put(key, value, db=dbs[space])
                twin_t[n].append(time.perf_counter() - t0)
    finally:
        for repo in repos.values():
            repo.close()
        for env, _ in twins.values():
            env.close()
        for n in sizes:
            shutil.rmtree(root / f"twin-{n}", ignore_errors=True)
    for n in sizes:
        ratio = statistics.median(commit_t[n]) / statistics.median(twin_t[n])
        row("durable commit of 10 nodes, median (µs)", n, f"{median_us(commit_t[n]):,.0f}")
        row(
            f"raw LMDB durable txn, same {keys[n]} keys and sizes, same-size database, median (µs)",
            n,
            f"{median_us(twin_t[n]):,.0f}",
        )
        row(
            "commit / raw LMDB (same keys and sizes, same-size database) ratio",
            n,
            f"{ratio:.2f}",
            "<= 1.5",
            ratio <= 1.5,
        )
    return _group_rows(start)


class _Recorder:
    """Records (key size, value size, keyspace) of every put of a write transaction.

    Both ways in: ``put`` and ``put_many`` (nodes, change-index entries and the
    recall queue go in through the latter).
    """

    def __init__(self, puts: list[tuple[int, int, Any]]) -> None:
        from mnemosyne.store.kv import lmdb_kv

        self.puts = puts
        self._txn = lmdb_kv._Txn
        self._orig = lmdb_kv._Txn.put
        self._orig_many = lmdb_kv._Txn.put_many

    def __enter__(self) -> _Recorder:
        puts, orig, orig_many = self.puts, self._orig, self._orig_many

        def put(txn: Any, space: Any, key: bytes, value: bytes, overwrite: bool = True) -> bool:
            done = orig(txn, space, key, value, overwrite)
            if done:
                puts.append((len(key), len(value), space))
            return bool(done)

        def put_many(txn: Any, space: Any, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
            added = orig_many(txn, space, items, overwrite)
            if added:  # a no-op put_many (every key present) writes nothing
                puts.extend((len(key), len(value), space) for key, value in items)
            return int(added)

        self._txn.put = put
        self._txn.put_many = put_many
        return self

    def __exit__(self, *exc: object) -> None:
        self._txn.put = self._orig
        self._txn.put_many = self._orig_many


def _interleaved(
    sizes: list[int], repos: dict[int, Repo], samples: int, op: Callable[[int, Repo, int], object]
) -> dict[int, list[float]]:
    """Time ``op(n, repo, i)`` ``samples`` times per size, the sizes taking turns."""
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for i in range(samples):
        for n in _turns(sizes, i):
            t0 = time.perf_counter()
            op(n, repos[n], i)
            times[n].append(time.perf_counter() - t0)
    return times


def bench_reads(root: Path, sizes: list[int]) -> list[Row]:
    """get at HEAD (warm), diff of two snapshots 10 nodes apart, history and blame."""
    start = len(ROWS)
    repos = {n: Repo.open(store_path(root, n), readonly=True) for n in sizes}
    try:
        rng = random.Random(2)
        warm = {n: [node_id(rng.randrange(n)) for _ in range(2000)] for n in sizes}
        timed = {n: [node_id(rng.randrange(n)) for _ in range(2000)] for n in sizes}
        for n in sizes:  # a warm page cache and a warm handle, on other ids than the timed ones
            for key in warm[n]:
                repos[n].get(key)
        gets = _interleaved(sizes, repos, 2000, lambda n, repo, i: repo.get(timed[n][i]))
        for n in sizes:
            us = median_us(gets[n])
            row("get at HEAD, warm, median (µs)", n, f"{us:.1f}", "<= 50", us <= 50)
        # The same ids again: their tree chunks are now in the handle's chunk cache, so
        # the difference is loading, re-hashing and decoding a chunk not read before.
        again = _interleaved(sizes, repos, 2000, lambda n, repo, i: repo.get(timed[n][i]))
        for n in sizes:
            row(
                "get at HEAD, the same ids again (chunks cached), median (µs)",
                n,
                f"{median_us(again[n]):.1f}",
            )

        for n in sizes:
            d = repos[n].diff("HEAD~1", "HEAD")
            assert len(d.modified) == 10, d
        diffs = _interleaved(sizes, repos, 41, lambda n, repo, i: repo.diff("HEAD~1", "HEAD"))
        for n in sizes:
            us = median_us(diffs[n])
            row(
                "diff of snapshots differing in 10 nodes, median (µs)", n, f"{us:,.0f}", "<= 5000", us <= 5000
            )

        versions = len(repos[sizes[0]].history(node_id(TRACKED)))
        cases: list[tuple[str, Callable[[int, Repo, int], object]]] = [
            (
                f"history of a node with {versions} versions",
                lambda n, repo, i: repo.history(node_id(TRACKED)),
            ),
            (f"blame of a node with {versions} versions", lambda n, repo, i: repo.blame(node_id(TRACKED))),
            (
                f"blame of a node last written {ROUNDS} commits ago",
                lambda n, repo, i: repo.blame(node_id(UNTOUCHED)),
            ),
        ]
        lo, hi = min(sizes), max(sizes)
        for label, op in cases:
            for n in sizes:
                op(n, repos[n], 0)
            times = _interleaved(sizes, repos, 101, op)
            for n in sizes:
                row(f"{label}, median (µs)", n, f"{median_us(times[n]):,.0f}")
            if hi != lo:
                ratio = statistics.median(times[hi]) / statistics.median(times[lo])
                row(
                    f"{label}: n={hi} / n={lo} (medians)",
                    f"{hi}/{lo}",
                    f"{ratio:.2f}",
                    f"<= {NOISE} (noise)",
                    ratio <= NOISE,
                )
    finally:
        for repo in repos.values():
            repo.close()
    return _group_rows(start)


OPEN_AND_GET = """
import json, sys, time
def peak():
    return int([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0])
t0 = time.perf_counter()
import mnemosyne
t1 = time.perf_counter()
with mnemosyne.Repo.open(sys.argv[1]) as repo:
    node = repo.get(sys.argv[2])
    assert node is not None
    t2 = time.perf_counter()
    read_peak = peak()
    batch = [mnemosyne.Node(id=i, content=f"{i} seen again at {t2}") for i in json.loads(sys.argv[3])]
    t3 = time.perf_counter()
    repo.commit(batch, message="fresh process", author="bench")
    t4 = time.perf_counter()
print(json.dumps({"open_get": t2 - t1, "commit": t4 - t3, "read_peak": read_peak, "peak": peak()}))
"""

READ_MANY = """
import json, random, sys, time
def status(field):
    return int([l.split()[1] for l in open("/proc/self/status") if l.startswith(field)][0])
sys.path.insert(0, sys.argv[4])
import mnemosyne
from harness import node_id
rng = random.Random(int(sys.argv[3]))
ids = [node_id(rng.randrange(int(sys.argv[2]))) for _ in range(50_000)]
with mnemosyne.Repo.open(sys.argv[1], readonly=True) as repo:
    t0 = time.perf_counter()
    for key in ids:
        repo.get(key)
    per_get = (time.perf_counter() - t0) / len(ids)
    print(json.dumps({"anon": status("RssAnon"), "file": status("RssFile"), "per_get": per_get}))
"""

IMPORT_ONLY = """
import mnemosyne
print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0])
"""


def bench_fresh_process(root: Path, sizes: list[int]) -> list[Row]:
    """A fresh process opens the store, reads one memory, then commits 10 (durable).

    Peak RSS (VmHWM) after the read is the issue's figure; after the commit, and the
    wall times of open + get and of that first commit, show whether anything a
    handle builds (or scans) on first use grows with the store.
    """
    start = len(ROWS)
    runs = 7
    seen: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    bases = []
    rng = random.Random(4)
    for r in range(runs):
        bases.append(int(subprocess.check_output([sys.executable, "-c", IMPORT_ONLY]).decode()))
        for n in _turns(sizes, r):
            ids = json.dumps([node_id(rng.randrange(2, n)) for _ in range(10)])
            out = subprocess.check_output(
                [sys.executable, "-c", OPEN_AND_GET, str(store_path(root, n)), node_id(n // 2), ids]
            ).decode()
            seen[n].append(json.loads(out))
    # A long-lived reader: 50,000 random gets in a fresh process. Its private memory
    # (RssAnon) is what the handle keeps (the cache of decoded chunks); RssFile is
    # the store's pages the process has touched, shared and dropped by the kernel at will.
    many: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    for r in range(3):
        for n in _turns(sizes, r):
            bench_dir = str(Path(__file__).parent)
            args = [str(store_path(root, n)), str(n), str(r), bench_dir]
            out = subprocess.check_output([sys.executable, "-c", READ_MANY, *args]).decode()
            many[n].append(json.loads(out))
    row("peak RSS: import mnemosyne only, median (MiB)", "-", f"{statistics.median(bases) / 1024:.1f}")
    for n in sizes:
        size = sum(f.stat().st_size for f in store_path(root, n).iterdir())
        read_peak = max(s["read_peak"] for s in seen[n]) / 1024
        row(
            f"peak RSS: fresh process, open store ({size / 2**20:,.0f} MiB) + one get, max of {runs} (MiB)",
            n,
            f"{read_peak:.1f}",
            "<= 64",
            read_peak <= 64,
        )
        row(
            f"peak RSS: the same process after a durable 10-node commit, max of {runs} (MiB)",
            n,
            f"{max(s['peak'] for s in seen[n]) / 1024:.1f}",
        )
        row(
            f"fresh process: open store + one get, median of {runs} (ms)",
            n,
            f"{statistics.median(s['open_get'] for s in seen[n]) * 1000:.1f}",
        )
        row(
            f"fresh process: its first durable 10-node commit, median of {runs} (ms)",
            n,
            f"{statistics.median(s['commit'] for s in seen[n]) * 1000:.1f}",
        )
        row(
            "50,000 random gets in a fresh process: private memory (RssAnon) after, max of 3 (MiB)",
            n,
            f"{max(m['anon'] for m in many[n]) / 1024:.1f}",
        )
        row(
            "50,000 random gets in a fresh process: store pages mapped (RssFile) after, max of 3 (MiB)",
            n,
            f"{max(m['file'] for m in many[n]) / 1024:.1f}",
        )
        row(
            "50,000 random gets in a fresh process, mean per get, median of 3 (µs)",
            n,
            f"{statistics.median(m['per_get'] for m in many[n]) * 1e6:.1f}",
        )
    return _group_rows(start)


def bench_integrity(root: Path, sizes: list[int]) -> list[Row]:
    """fsck throughput, then gc of 1 % garbage, then fsck again (changes the stores)."""
    start = len(ROWS)
    rates: dict[int, list[float]] = {n: [] for n in sizes}
    objects: dict[int, int] = {}
    runs = 3  # fsck only reads: the median of three runs, the sizes taking turns
    for r in range(runs):
        for n in _turns(sizes, r):
            with Repo.open(store_path(root, n), readonly=True) as repo:
                t0 = time.perf_counter()
                report = repo.fsck()
                elapsed = time.perf_counter() - t0
            assert report.ok, report.problems
            objects[n] = report.objects
            rates[n].append(report.objects / elapsed)
    for n in sizes:
        rate = statistics.median(rates[n])
        row(
            f"fsck: objects re-hashed and checked per second, median of {runs} runs",
            f"{n} ({objects[n]:,} objects)",
            f"{rate:,.0f}",
            ">= 50,000",
            rate >= 50_000,
        )
    # 1 % garbage: a branch of GARBAGE_COMMITS commits that between them write new
    # versions of 1 % of the nodes, deleted (its reflog expired by the gc itself).
    rng = random.Random(5)
    for n in sizes:
        with Repo.open(store_path(root, n)) as repo:
            repo.branch("scratch")
            per = n // 100 // GARBAGE_COMMITS
            for c in range(GARBAGE_COMMITS):
                batch = [make_node(i, 1000 + c) for i in sorted(rng.sample(range(2, n), per))]
                repo.commit(batch, message=f"scratch {c}", author="bench", branch="scratch")
            repo.delete_branch("scratch")
            t0 = time.perf_counter()
            report_gc = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
            elapsed = time.perf_counter() - t0
            assert report_gc.commits_removed == GARBAGE_COMMITS, report_gc
            clean = repo.fsck()
            assert clean.ok, clean.problems  # the derived indexes still equal a rebuild
        row(
            f"gc of {n:,} nodes, 1 % garbage ({GARBAGE_COMMITS} commits writing {per * GARBAGE_COMMITS:,} "
            "versions) (s)",
            f"{n} ({report_gc.objects_removed:,} removed)",
            f"{elapsed:.1f}",
            "<= 30",
            elapsed <= 30,
        )
    return _group_rows(start)


GROUPS: list[Callable[[Path, list[int]], list[Row]]] = [
    bench_import,
    bench_commits,
    bench_reads,
    bench_fresh_process,
    bench_recall,  # stores of its own: see recall_large.py
    bench_claims,  # stores of its own
    bench_integrity,  # last: gc changes the stores
]


def main() -> None:
    global ROUNDS
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results-large.md"))
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--quick", action="store_true", help="10k and 50k, for checking the script")
    parser.add_argument("--only", default="", help="comma-separated group names (e.g. import,reads)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.quick:
        sizes, ROUNDS = [10_000, 50_000], 11
        THRESHOLD[0] = 20_000  # so the larger quick store ranks through the approximate index
    groups = GROUPS
    if args.only:
        wanted = {"bench_" + name for name in args.only.split(",")} | {"bench_import", "bench_commits"}
        groups = [g for g in GROUPS if g.__name__ in wanted]
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-large-"))
    try:
        for group in groups:
            t0 = time.perf_counter()
            group(root, sizes)
            print(f"-- {group.__name__}: {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_table(args.out, started)
    # The machine's load says how noisy the run was (other work shares the cores).
    note = (
        f"Sizes {', '.join(f'{n:,}' for n in sizes)}, built by bulk import (sync off), measured side by "
        f"side; load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end. "
        f'"Noise": a ratio of medians, largest size / smallest, up to {NOISE}.'
    )
    text = args.out.read_text().replace("# Benchmark results", "# Benchmark results at a million memories", 1)
    text = text.replace(
        "(the sync-off commits: of runs in fresh processes, the sizes taking turns)",
        "(the sizes taking turns; rows that say fresh process: of runs in fresh processes)",
        1,
    )
    head, rest = text.split("\n\n| metric", 1)
    args.out.write_text(f"{head}\n\n{note}\n\n| metric{rest}")
    print(json.dumps({"seconds": round(time.perf_counter() - started)}))


if __name__ == "__main__":
    main()
