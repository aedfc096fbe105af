"""Benchmarks for the core store; writes a markdown table of medians and ratios.

Every figure is a median over repeated runs in this one process (or a ratio of
two medians measured interleaved in the same run). Usage:

    python bench/run.py [--out bench/results.md] [--sizes 1000,10000,100000] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lmdb

from mnemosyne import Claim, Node, Provenance, Repo
from mnemosyne.kv import lmdb_kv
from mnemosyne.kv.base import Space, WriteTxn
from mnemosyne.recall.embedders import HashEmbedder
from mnemosyne.refs import RefStore


@dataclass
class Row:
    metric: str
    n: str
    value: str
    target: str
    ok: bool | None


ROWS: list[Row] = []


def row(metric: str, n: object, value: str, target: str = "", ok: bool | None = None) -> None:
    ROWS.append(Row(metric, str(n), value, target, ok))
    mark = "" if ok is None else ("ok" if ok else "MISSED")
    print(f"{metric:<58} {n!s:>8} {value:>16} {target:>14} {mark}", flush=True)


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def node_id(i: int) -> str:
    # ~36 characters, namespaced like real agent memory ids.
    return f"agents/a{i % 97:02d}/mem/{i:08d}-{(i * 2654435761) % 16**8:08x}"


def content(i: int, version: int = 0) -> str:
    text = f"memory {i} v{version}: the user said something worth keeping about topic {i % 113}. "
    return (text * 4)[:200]


def make_node(i: int, version: int = 0) -> Node:
    return Node(
        id=node_id(i),
        content=content(i, version),
        provenance=Provenance(agent_step=version, observation=f"obs-{i}-{version}", source="bench"),
    )


class ByteCounter:
    """Counts bytes of new objects written (wraps the LMDB transaction's put)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.objects = 0
        self.puts: list[tuple[int, int]] = []
        self._orig = lmdb_kv._Txn.put

    def __enter__(self) -> ByteCounter:
        counter = self
        orig = self._orig

        def put(txn: lmdb_kv._Txn, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
            done = orig(txn, space, key, value, overwrite)
            if done:
                counter.puts.append((len(key), len(value)))
            if space is Space.OBJECTS and done:
                counter.bytes += len(value)
                counter.objects += 1
            return done

        lmdb_kv._Txn.put = put  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        lmdb_kv._Txn.put = self._orig  # type: ignore[method-assign]


def used_bytes(repo: Repo) -> int:
    env = repo.kv.env  # type: ignore[attr-defined]
    return int((env.info()["last_pgno"] + 1) * env.stat()["psize"])


def bench_size(n: int, root: Path, rounds: int) -> None:
    path = root / f"store-{n}"
    nodes = [make_node(i) for i in range(n)]

    # Bulk import: all n nodes in one durable commit.
    with Repo.init(path) as repo:
        start = time.perf_counter()
        repo.commit(nodes, message="import", author="bench")
        elapsed = time.perf_counter() - start
    rate = n / elapsed
    row(
        "bulk import, one commit (nodes/s)",
        n,
        f"{rate:,.0f}",
        ">= 100,000" if n >= 100_000 else "",
        rate >= 100_000 if n >= 100_000 else None,
    )

    raw_env = lmdb.open(str(root / f"raw-{n}"), map_size=1 << 30, sync=True, metasync=True)
    rng = random.Random(n)
    version = 1
    with Repo.open(path) as repo:
        commit_t: list[float] = []
        raw_t: list[float] = []
        same_t: list[float] = []
        cpu_t: list[float] = []
        new_bytes: list[int] = []
        page_growth: list[int] = []
        value_size = len(content(0)) + 60
        for r in range(rounds):
            batch = [make_node(rng.randrange(n), version + k) for k in range(10)]
            batch = list({node.id: node for node in batch}.values())
            version += 10
            before = used_bytes(repo)
            with ByteCounter() as counter:
                c0 = time.process_time()
                t0 = time.perf_counter()
                repo.commit(batch, message=f"round {r}", author="bench")
                commit_t.append(time.perf_counter() - t0)
                cpu_t.append(time.process_time() - c0)
            new_bytes.append(counter.bytes)
            page_growth.append(used_bytes(repo) - before)
            # Raw, durable, interleaved: the same keys and value sizes the commit wrote
            # (random keys, as hashes are), and just the 10 nodes' worth.
            items = [(os.urandom(k), os.urandom(v)) for k, v in counter.puts]
            t0 = time.perf_counter()
            with raw_env.begin(write=True) as txn:
                for key, value in items:
                    txn.put(key, value)
            same_t.append(time.perf_counter() - t0)
            items = [(os.urandom(36), os.urandom(value_size)) for _ in range(10)]
            t0 = time.perf_counter()
            with raw_env.begin(write=True) as txn:
                for key, value in items:
                    txn.put(key, value)
            raw_t.append(time.perf_counter() - t0)
        ratio = statistics.median(commit_t) / statistics.median(same_t)
        row("durable commit of 10 nodes, median (µs)", n, f"{median_us(commit_t):,.0f}")
        row(
            f"raw LMDB durable txn, same {len(counter.puts)} keys and sizes, median (µs)",
            n,
            f"{median_us(same_t):,.0f}",
        )
        row("commit / raw LMDB (same keys and sizes) ratio", n, f"{ratio:.2f}", "<= 2.5", ratio <= 2.5)
        row("raw LMDB durable txn, just 10 node-sized keys, median (µs)", n, f"{median_us(raw_t):,.0f}")
        row(
            "commit / raw LMDB (10 keys) ratio",
            n,
            f"{statistics.median(commit_t) / statistics.median(raw_t):.2f}",
        )
        row(
            "commit CPU time (process), median (µs)",
            n,
            f"{median_us(cpu_t):,.0f}",
            "<= 1000 at 100k" if n >= 100_000 else "",
            median_us(cpu_t) <= 1000 if n >= 100_000 else None,
        )
        row(
            "new object bytes per 10-node commit, median",
            n,
            f"{statistics.median(new_bytes):,.0f}",
            "<= 100,000",
            statistics.median(new_bytes) <= 100_000,
        )
        row("LMDB used-page growth per commit, median (bytes)", n, f"{statistics.median(page_growth):,.0f}")
        CPU[n] = statistics.median(cpu_t)

        # get at HEAD.
        ids = [node_id(rng.randrange(n)) for _ in range(2000)]
        samples = []
        for key in ids:
            t0 = time.perf_counter()
            repo.get(key)
            samples.append(time.perf_counter() - t0)
        row("get at HEAD, median (µs)", n, f"{median_us(samples):.1f}", "<= 50", median_us(samples) <= 50)

        # diff of two snapshots that differ in 10 nodes.
        samples = []
        for _ in range(20):
            t0 = time.perf_counter()
            d = repo.diff("HEAD~1", "HEAD")
            samples.append(time.perf_counter() - t0)
        assert len(d.modified) >= 1
        row(
            "diff of snapshots differing in 10 nodes, median (µs)",
            n,
            f"{median_us(samples):,.0f}",
            "<= 5000",
            median_us(samples) <= 5000,
        )
    raw_env.close()

    # The same commit with durability off: the CPU part of a commit.
    with Repo.open(path, sync=False) as repo:
        samples = []
        for r in range(rounds):
            batch = list(
                {
                    node.id: node for node in (make_node(rng.randrange(n), version + k) for k in range(10))
                }.values()
            )
            version += 10
            t0 = time.perf_counter()
            repo.commit(batch, message=f"nosync {r}", author="bench")
            samples.append(time.perf_counter() - t0)
        row(
            "commit of 10 nodes, sync off, median (µs)",
            n,
            f"{median_us(samples):,.0f}",
            "<= 1000 at 100k" if n >= 100_000 else "",
            median_us(samples) <= 1000 if n >= 100_000 else None,
        )
        NOSYNC[n] = statistics.median(samples)

    if n >= 100_000:
        rss(path, node_id(7))
    git_reference(n, root, rounds)
    shutil.rmtree(path)


CPU: dict[int, float] = {}
NOSYNC: dict[int, float] = {}


def rss(path: Path, key: str) -> None:
    # VmHWM, not ru_maxrss: the latter counts the forked copy of this (large) bench
    # process before exec.
    peak = "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    code_base = f"import mnemosyne; {peak}"
    code_open = f"import mnemosyne; r = mnemosyne.Repo.open({str(path)!r}); r.get({key!r}); {peak}"
    base = int(subprocess.check_output([sys.executable, "-c", code_base]).decode().strip())
    opened = int(subprocess.check_output([sys.executable, "-c", code_open]).decode().strip())
    size = sum(f.stat().st_size for f in path.iterdir())
    row("peak RSS: import only (MiB)", "-", f"{base / 1024:.1f}")
    row(
        "peak RSS: open 100k store + one get (MiB)",
        "100000",
        f"{opened / 1024:.1f}",
        f"<< store {size / 2**20:.0f} MiB",
        (opened - base) * 1024 < size / 4,
    )


def git_reference(n: int, root: Path, rounds: int) -> None:
    git = shutil.which("git")
    if git is None:
        row("git fast-import reference", n, "skipped: git absent")
        return
    repo = root / f"git-{n}"
    subprocess.run([git, "init", "-q", "--bare", str(repo)], check=True)

    def stream(commit_no: int, items: list[tuple[str, str]], parent: bool) -> bytes:
        out = []
        for i, (_, text) in enumerate(items, 1):
            data = text.encode()
            out.append(b"blob\nmark :%d\ndata %d\n%s\n" % (i, len(data), data))
        msg = b"bench"
        when = 1_700_000_000 + commit_no
        out.append(
            b"commit refs/heads/main\ncommitter b <b@b> %d +0000\ndata %d\n%s\n" % (when, len(msg), msg)
        )
        if parent:
            out.append(b"from refs/heads/main^0\n")
        for i, (path, _) in enumerate(items, 1):
            out.append(b"M 100644 :%d %s\n" % (i, path.encode()))
        out.append(b"\n")
        return b"".join(out)

    items = [(node_id(i), content(i)) for i in range(n)]
    data = stream(0, items, parent=False)
    t0 = time.perf_counter()
    subprocess.run([git, "fast-import", "--quiet"], input=data, cwd=repo, check=True)
    elapsed = time.perf_counter() - t0
    row("git fast-import: bulk import (files/s)", n, f"{n / elapsed:,.0f}")
    rng = random.Random(7)
    samples = []
    for r in range(min(rounds, 10)):
        batch = [(node_id(rng.randrange(n)), content(r, r + 1)) for _ in range(10)]
        data = stream(r + 1, batch, parent=True)
        t0 = time.perf_counter()
        subprocess.run([git, "fast-import", "--quiet"], input=data, cwd=repo, check=True)
        samples.append(time.perf_counter() - t0)
    row("git fast-import: commit of 10 files, median (µs)", n, f"{median_us(samples):,.0f}")
    shutil.rmtree(repo)


def bench_history(root: Path, commits: int) -> None:
    """log and blame over a long history."""
    path = root / "history"
    clock_time = [datetime(2026, 1, 1, tzinfo=UTC)]

    def clock() -> datetime:
        clock_time[0] += timedelta(seconds=1)
        return clock_time[0]

    with Repo.init(path, sync=False, clock=clock) as repo:
        base = [make_node(i) for i in range(1000)]
        repo.commit(base, message="base", author="bench")
        rng = random.Random(3)
        for c in range(commits):
            # Node 0 is never touched again; node 1 changes every 100 commits.
            i = 1 if c % 100 == 0 else rng.randrange(2, 1000)
            repo.commit([make_node(i, c + 1)], message=f"c{c}", author="bench")

        samples = []
        for _ in range(7):
            t0 = time.perf_counter()
            count = sum(1 for _ in repo.log())
            samples.append((time.perf_counter() - t0) / count)
        per = statistics.median(samples) * 1e6
        row("log, per commit (µs)", f"{count} commits", f"{per:.2f}", "<= 5", per <= 5)
        samples_first = []
        for _ in range(7):
            t0 = time.perf_counter()
            next(iter(repo.log()))
            samples_first.append(time.perf_counter() - t0)
        first = median_us(samples_first)
        full = statistics.median(samples) * count * 1e6
        row(
            "log, first entry out (µs) vs whole walk (µs)",
            f"{count} commits",
            f"{first:,.0f} / {full:,.0f}",
            "first << whole",
            first < full / 10,
        )

        for label, key in (
            ("blame, node last written 10k commits ago", node_id(0)),
            ("blame, node with 100 versions", node_id(1)),
        ):
            samples = []
            for _ in range(21):
                t0 = time.perf_counter()
                repo.blame(key)
                samples.append(time.perf_counter() - t0)
            row(
                f"{label}, median (µs)",
                f"{commits} commits",
                f"{median_us(samples):,.0f}",
                "<= 1000",
                median_us(samples) <= 1000,
            )
        samples = []
        for _ in range(21):
            t0 = time.perf_counter()
            found = list(repo.log(node=node_id(1)))
            samples.append(time.perf_counter() - t0)
        row(
            f"log --node over {len(found)} versions, median (µs)",
            f"{commits} commits",
            f"{median_us(samples):,.0f}",
        )
    shutil.rmtree(path)


def bench_merge(root: Path, n: int, depth: int) -> None:
    """Merging two branches, merge bases of deep tips, bisect over a long history."""
    path = root / "merge"
    with Repo.init(path, sync=False) as repo:
        repo.commit([make_node(i) for i in range(n)], message="base", author="bench")
        rng = random.Random(5)
        samples = []
        for r in range(9):
            repo.switch("main")
            start = repo.resolve("HEAD").id
            repo.branch(f"side{r}", start)
            ids = rng.sample(range(n), 200)
            repo.commit([make_node(i, 1000 + r) for i in ids[:100]], message="ours", author="bench")
            repo.commit(
                [make_node(i, 2000 + r) for i in ids[100:]],
                message="theirs",
                author="bench",
                branch=f"side{r}",
            )
            t0 = time.perf_counter()
            result = repo.merge(f"side{r}")
            samples.append(time.perf_counter() - t0)
            assert result.commit is not None and not result.conflicts
        row(
            "merge of branches with 100 changed ids each, median (ms)",
            n,
            f"{median_us(samples) / 1000:.1f}",
            "<= 50",
            median_us(samples) <= 50_000,
        )
    shutil.rmtree(path)

    path = root / "deep"
    with Repo.init(path, sync=False) as repo:
        repo.commit([make_node(i) for i in range(100)], message="base", author="bench")
        for c in range(depth):
            repo.commit([make_node(c % 100, c + 1)], message=f"c{c}", author="bench")
        from mnemosyne.merge import merge_bases

        def time_bases(expected: str, label: str, target: str, limit: float | None) -> None:
            left = bytes.fromhex(repo.resolve("left").id)
            right = bytes.fromhex(repo.resolve("right").id)
            samples = []
            for _ in range(9):
                with repo._view() as view:
                    t0 = time.perf_counter()
                    bases = merge_bases(view, left, right)
                    samples.append(time.perf_counter() - t0)
            assert [b.hex() for b in bases] == [expected]
            ms = median_us(samples) / 1000
            row(label, depth, f"{ms:.2f}", target, None if limit is None else ms <= limit)

        # Two tips over a long history that forked 10 commits ago (the usual case).
        fork = repo.resolve("HEAD").id
        repo.branch("left", fork)
        repo.branch("right", fork)
        for c in range(10):
            repo.commit([make_node(c % 50, depth + c)], message=f"l{c}", author="bench", branch="left")
            repo.commit(
                [make_node(50 + c % 50, 2 * depth + c)], message=f"r{c}", author="bench", branch="right"
            )
        time_bases(
            fork,
            f"merge base of two tips {depth} commits deep, forked 10 commits ago, median (ms)",
            "<= 10",
            10,
        )
        # The worst case: they forked long ago, so both sides must be walked.
        for c in range(10, depth):
            repo.commit([make_node(c % 50, depth + c)], message=f"l{c}", author="bench", branch="left")
            repo.commit(
                [make_node(50 + c % 50, 2 * depth + c)], message=f"r{c}", author="bench", branch="right"
            )
        time_bases(
            fork,
            f"merge base of two tips that forked {depth} commits ago, median (ms)",
            "(walks both sides)",
            None,
        )

        target = node_id(7)
        threshold = depth // 2
        main_line = list(repo.log("main~" + str(depth)))
        history = [c for c in repo.log("main") if c.id not in {m.id for m in main_line}]
        flip = [c for c in history if repo.get(target, at=c.id).provenance.agent_step >= threshold][-1].id
        samples = []
        evaluations = []
        for _ in range(5):
            calls = [0]

            def predicate(commit, calls=calls):
                calls[0] += 1
                return repo.get(target, at=commit.id).provenance.agent_step >= threshold

            t0 = time.perf_counter()
            found = repo.bisect(predicate, good="main~" + str(depth), bad="main")
            samples.append(time.perf_counter() - t0)
            evaluations.append(calls[0])
            assert found.id == flip
        row(
            f"bisect over {depth} commits: predicate evaluations",
            depth,
            f"{max(evaluations)}",
            "<= 20",
            max(evaluations) <= 20,
        )
        row(
            f"bisect over {depth} commits, median (ms)",
            depth,
            f"{median_us(samples) / 1000:.1f}",
            "<= 100",
            median_us(samples) <= 100_000,
        )
    shutil.rmtree(path)


RETRY_WORKER = """
import sys, time
from mnemosyne import Node, Repo, with_retry
path, count, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Repo.open(path) as repo:
    def bump():
        tip = repo.resolve("HEAD")
        current = repo.get("counter", at=tip.id)
        value = (current.content if current else 0) + 1
        return repo.commit([Node(id="counter", content=value)], parent=tip.id, author=name)
    for _ in range(count):
        with_retry(bump, attempts=1000)
"""


def bench_integrity(root: Path, n: int, commits: int) -> None:
    """fsck throughput, gc of a large store, forget of a long-lived id, retry under contention."""
    path = root / "integrity"
    with Repo.init(path, sync=False) as repo:
        repo.commit([make_node(i) for i in range(n)], message="base", author="bench")
        rng = random.Random(9)
        for c in range(commits):
            i = 3 if c % (commits // 100) == 0 else rng.randrange(4, n)
            repo.commit([make_node(i, c + 1)], message=f"c{c}", author="bench")
        repo.branch("old")
        repo.reset("main", f"main~{commits // 10}")  # orphan a tenth of history (still in the reflog)
        t0 = time.perf_counter()
        report = repo.fsck()
        elapsed = time.perf_counter() - t0
        assert report.ok, report.problems
        rate = report.objects / elapsed
        row(
            "fsck: objects re-hashed and checked per second",
            f"{report.objects} objects",
            f"{rate:,.0f}",
            ">= 50,000",
            rate >= 50_000,
        )
        repo.delete_branch("old")
        t0 = time.perf_counter()
        gc = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
        elapsed = time.perf_counter() - t0
        row(
            f"gc of a {n}-node store with {commits} commits (s)",
            f"{gc.objects_removed} removed",
            f"{elapsed:.1f}",
            "<= 30",
            elapsed <= 30,
        )
        versions = len(repo.history(node_id(3)))
        samples = []
        t0 = time.perf_counter()
        repo.forget(node_id(3), reason="bench", author="bench")
        samples.append(time.perf_counter() - t0)
        row(
            f"forget of one id with {versions} versions (ms)",
            n,
            f"{samples[0] * 1000:.1f}",
            "<= 100",
            samples[0] <= 0.1,
        )
    shutil.rmtree(path)

    # Read-modify-write commits with retries: 4 contending processes vs 1.
    path = root / "contention"
    with Repo.init(path) as repo:
        repo.commit([Node(id="counter", content=0)], message="start", author="bench")
    per = 40
    script = root / "retry_worker.py"
    script.write_text(RETRY_WORKER)

    def run(workers: int) -> float:
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen([sys.executable, str(script), str(path), str(per * 4 // workers), f"w{k}"])
            for k in range(workers)
        ]
        for proc in procs:
            assert proc.wait() == 0
        return (per * 4) / (time.perf_counter() - t0)

    single = run(1)
    several = run(4)
    with Repo.open(path) as repo:
        assert repo.get("counter").content == per * 8
    ratio = several / single
    row(
        "with_retry: 4 contending writers / 1 writer, commits/s",
        f"{per * 4} commits",
        f"{several:,.0f} / {single:,.0f} = {ratio:.2f}",
        ">= 0.5",
        ratio >= 0.5,
    )
    shutil.rmtree(path)


def bench_claims(root: Path, total: int, versions: int) -> None:
    """facts over a long valid-time timeline, as-of resolution, tenant-scoped reads."""
    path = root / "claims"
    start = datetime(2020, 1, 1, tzinfo=UTC)
    with Repo.init(path, sync=False) as repo:
        nodes = [
            Node(
                id=f"people/p{i:06d}/attr{i % 10}",
                kind="claim",
                content=Claim(f"p{i // 10:06d}", f"attr{i % 10}", i, start + timedelta(hours=i)),
            )
            for i in range(total - versions)
        ]
        nodes += [
            Node(
                id=f"people/mira/deadline/v{v:06d}",
                kind="claim",
                content=Claim("mira", "deadline", v, start + timedelta(minutes=v)),
            )
            for v in range(versions)
        ]
        t0 = time.perf_counter()
        repo.commit(nodes, message="claims", author="bench")
        row("bulk import of claims (claims/s)", total, f"{total / (time.perf_counter() - t0):,.0f}")
        rng = random.Random(11)
        samples = []
        for _ in range(500):
            at = start + timedelta(minutes=rng.randrange(versions))
            t0 = time.perf_counter()
            found = repo.facts("mira", "deadline", valid_at=at)
            samples.append(time.perf_counter() - t0)
            assert len(found) == 1
        row(
            f"facts(subject, predicate, valid_at), {versions} versions, median (µs)",
            total,
            f"{median_us(samples):.0f}",
            "<= 200",
            median_us(samples) <= 200,
        )

        # 100k reflog entries on one branch, written directly through the ref store.
        a = repo.resolve("HEAD")
        b = repo.commit([make_node(1)], message="second", author="bench")
        moves = 100_000
        base_time = b.record_time

        def move_many(txn: WriteTxn) -> None:
            refs = RefStore(b"\x00\x00\x00\x00")
            current = bytes.fromhex(b.id)
            for k in range(moves):
                target = bytes.fromhex(a.id if k % 2 == 0 else b.id)
                when = base_time + timedelta(seconds=k + 1)
                refs.update(
                    txn, "refs/heads/main", current, target, when=when, author="bench", reason="bench"
                )
                current = target

        repo.kv.transact(move_many)
        samples = []
        for _ in range(500):
            k = rng.randrange(moves)
            t0 = time.perf_counter()
            got = repo.resolve("main", as_of=base_time + timedelta(seconds=k + 1, milliseconds=500))
            samples.append(time.perf_counter() - t0)
            assert got.id == (a.id if k % 2 == 0 else b.id)
        row(
            "resolve as_of with 100k reflog entries, median (µs)",
            moves,
            f"{median_us(samples):.1f}",
            "<= 100",
            median_us(samples) <= 100,
        )
    shutil.rmtree(path)

    # The same reads in a single-tenant store and in a tenant of a shared one.
    n = 20_000
    single = root / "single"
    shared = root / "shared"
    data = [make_node(i) for i in range(n)]
    with Repo.init(single, sync=False) as repo:
        repo.commit(data, message="data", author="bench")
    with Repo.init(shared, sync=False) as repo:
        repo.commit([make_node(i + n, 1) for i in range(n)], message="other", author="bench")
    with Repo.open(shared, tenant="acme", create=True, sync=False) as repo:
        repo.commit(data, message="data", author="bench")
    with Repo.open(single) as one, Repo.open(shared, tenant="acme") as tenant:
        ids = [node_id(rng.randrange(n)) for _ in range(2000)]
        t_one: list[float] = []
        t_ten: list[float] = []
        for key in ids:
            t0 = time.perf_counter()
            one.get(key)
            t_one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tenant.get(key)
            t_ten.append(time.perf_counter() - t0)
        ratio = statistics.median(t_ten) / statistics.median(t_one)
        row("tenant-scoped get / single-tenant get (medians)", n, f"{ratio:.2f}", "<= 1.2", ratio <= 1.2)
    shutil.rmtree(single)
    shutil.rmtree(shared)


def recall_vocabulary(size: int, rng: random.Random) -> list[str]:
    """``size`` distinct made-up words, in a random rank order."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "el", "an", "or", "ix", "um", "pe", "da"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    ranked = sorted(words)
    rng.shuffle(ranked)
    return ranked


def bench_recall(root: Path, n: int, rounds: int) -> None:
    """Hybrid and lexical search with namespace filters, rebuilding, and the cost of commits.

    ~200-byte texts of words drawn from a Zipf-like distribution over a few thousand
    words; queries take two words of moderate rarity. Vectors come from the test
    embedder, ``HashEmbedder(384)`` (words hashed into 384 buckets).
    """
    rng = random.Random(17)
    vocab = recall_vocabulary(3000, rng)
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))

    def text() -> str:
        words: list[str] = []
        size = 0
        while size < 200:
            words.append(rng.choices(vocab, cum_weights=weights)[0])
            size += len(words[-1]) + 1
        return " ".join(words)

    def memory_id(i: int) -> str:
        # 10 users, 10 agents each: a user's namespace holds 1/10, an agent's 1/100.
        return f"users/u{i % 10}/agents/a{i // 10 % 10}/mem/{i:08d}"

    nodes = [Node(id=memory_id(i), content=text()) for i in range(n)]
    with_path, without_path = root / "recall", root / "recall-none"
    with Repo.init(with_path, sync=False) as repo:
        repo.commit(nodes, message="memories", author="bench")
        repo.config("embedder", "hash-384")
        t0 = time.perf_counter()
        repo.search("warm up")  # the first search indexes and embeds everything
        row("recall: first catch-up, index and embed (nodes/s)", n, f"{n / (time.perf_counter() - t0):,.0f}")
        t0 = time.perf_counter()
        indexed = repo.reindex_recall(vectors=True)
        elapsed = time.perf_counter() - t0
        assert indexed == n
        rate = n / elapsed
        row(
            "recall: reindex_recall(vectors=True), incl. HashEmbedder(384) (nodes/s)",
            n,
            f"{rate:,.0f}",
            ">= 20,000",
            rate >= 20_000,
        )
        t0 = time.perf_counter()
        HashEmbedder(384)([node.content for node in nodes])
        row("recall: of which HashEmbedder(384) alone (nodes/s)", n, f"{n / (time.perf_counter() - t0):,.0f}")

        queries = [" ".join(rng.sample(vocab[300:3000], 2)) for _ in range(101)]
        cases = [
            ("hybrid", "users/u3/", "1/10", 15),
            ("hybrid", "users/u3/agents/a4/", "1/100", 15),
            ("hybrid", None, "none", None),
            ("lexical", "users/u3/", "1/10", 10),
            ("lexical", "users/u3/agents/a4/", "1/100", 10),
        ]
        for mode, prefix, share, target in cases:
            repo.search(queries[0], k=10, prefix=prefix, mode=mode)
            samples = []
            for query in queries:
                t0 = time.perf_counter()
                hits = repo.search(query, k=10, prefix=prefix, mode=mode)  # type: ignore[arg-type]
                samples.append(time.perf_counter() - t0)
                assert all(prefix is None or h.id.startswith(prefix) for h in hits)
            ms = statistics.median(samples) * 1000
            row(
                f"recall: search top-10, {mode}, namespace filter {share}, median (ms)",
                n,
                f"{ms:.1f}",
                f"<= {target}" if target else "",
                ms <= target if target else None,
            )

    # Commits of 10 nodes with an embedder configured and without one, each followed
    # by the same search (so the indexes are caught up), in alternating order; the
    # commit alone is timed. The store without an embedder went through the same
    # bulk load, catch-up and rebuild, so both files are laid out alike.
    with Repo.init(without_path, sync=False) as plain:
        plain.commit(nodes, message="memories", author="bench")
        plain.search("warm up")
        plain.reindex_recall(vectors=True)
    with Repo.open(with_path, sync=False) as repo, Repo.open(without_path, sync=False) as plain:
        repo.search("warm up")
        plain.search("warm up")
        with_t: list[float] = []
        without_t: list[float] = []
        catch_t: list[float] = []
        for r in range(rounds):
            batch = [Node(id=memory_id(rng.randrange(n)), content=text()) for _ in range(10)]
            batch = list({node.id: node for node in batch}.values())
            query = queries[r % len(queries)]
            for store in (repo, plain) if r % 2 == 0 else (plain, repo):
                t0 = time.perf_counter()
                store.commit(batch, message=f"r{r}", author="bench")
                elapsed = time.perf_counter() - t0
                if store is plain:
                    without_t.append(elapsed)
                    store.search(query, k=10)  # lexical only: no embedder
                    continue
                with_t.append(elapsed)
                t0 = time.perf_counter()
                store.search(query, k=10)  # catches up first
                first = time.perf_counter() - t0
                t0 = time.perf_counter()
                store.search(query, k=10)  # nothing to catch up
                catch_t.append((first - (time.perf_counter() - t0)) / len(batch))
        ratio = statistics.median(with_t) / statistics.median(without_t)
        row(
            "recall: commit 10 nodes (sync off), embedder set / none, medians",
            n,
            f"{median_us(with_t):.0f} / {median_us(without_t):.0f} µs = {ratio:.2f}",
            "<= 1.3",
            ratio <= 1.3,
        )
        row("recall: catch-up per node at the next search, median (µs)", n, f"{median_us(catch_t):.0f}")
    shutil.rmtree(with_path)
    shutil.rmtree(without_path)


def write_table(out: Path, started: float) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Run on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, {platform.machine()}; {time.perf_counter() - started:.0f} s in all. "
        "Medians of repeated runs in one process; ratios are of medians measured interleaved.",
        "",
        "| metric | n | value | target | |",
        "|---|---:|---:|---|---|",
    ]
    for r in ROWS:
        mark = "" if r.ok is None else ("ok" if r.ok else "**missed**")
        lines.append(f"| {r.metric} | {r.n} | {r.value} | {r.target} | {mark} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"\nwrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results.md"))
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--history", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="small sizes, for checking the script")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes, args.rounds, args.history, args.claims = [1000, 5000], 5, 300, 5000
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    try:
        for n in sizes:
            bench_size(n, root, args.rounds)
        if len(sizes) >= 2:
            lo, hi = min(sizes), max(sizes)
            ratio = NOSYNC[hi] / NOSYNC[lo]
            row(
                f"commit CPU (sync off) ratio n={hi} / n={lo}",
                f"{hi}/{lo}",
                f"{ratio:.2f}",
                "<= 3",
                ratio <= 3,
            )
        bench_history(root, args.history)
        bench_merge(root, max(sizes), args.history)
        bench_integrity(root, max(sizes), args.history)
        bench_claims(root, args.claims, min(10_000, args.claims // 2))
        bench_recall(root, max(sizes), args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_table(args.out, started)


if __name__ == "__main__":
    main()
