"""Benchmarks of the core store: commits, reads, bulk import, history, merges."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lmdb
from harness import (
    ByteCounter,
    content,
    make_node,
    median_us,
    node_id,
    row,
    used_bytes,
)

from mnemosyne import Repo
from mnemosyne.store.kv.base import Space


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
    twin_env, twin_dbs = twin_of(path, root / f"twin-{n}")
    rng = random.Random(n)
    version = 1
    with Repo.open(path) as repo:
        commit_t: list[float] = []
        raw_t: list[float] = []
        same_t: list[float] = []
        twin_t: list[float] = []
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
            # The same again into a raw LMDB holding as many entries of the same sizes
            # in the same keyspaces as the store: the pages a write touches, and so the
            # cost of a durable transaction, grow with the size of the database.
            t0 = time.perf_counter()
            with twin_env.begin(write=True) as txn:
                for (key, value), space in zip(items, counter.spaces, strict=True):
                    txn.put(key, value, db=twin_dbs[space])
            twin_t.append(time.perf_counter() - t0)
            items = [(os.urandom(36), os.urandom(value_size)) for _ in range(10)]
            t0 = time.perf_counter()
            with raw_env.begin(write=True) as txn:
                for key, value in items:
                    txn.put(key, value)
            raw_t.append(time.perf_counter() - t0)
        ratio = statistics.median(commit_t) / statistics.median(twin_t)
        row("durable commit of 10 nodes, median (µs)", n, f"{median_us(commit_t):,.0f}")
        row(
            f"raw LMDB durable txn, same {len(counter.puts)} keys and sizes, same-size database, median (µs)",
            n,
            f"{median_us(twin_t):,.0f}",
        )
        row(
            "commit / raw LMDB (same keys and sizes, same-size database) ratio",
            n,
            f"{ratio:.2f}",
            "<= 1.5",
            ratio <= 1.5,
        )
        row(
            f"raw LMDB durable txn, same {len(counter.puts)} keys and sizes, empty database, median (µs)",
            n,
            f"{median_us(same_t):,.0f}",
        )
        row(
            "commit / raw LMDB (same keys and sizes, empty database) ratio",
            n,
            f"{statistics.median(commit_t) / statistics.median(same_t):.2f}",
        )
        row("raw LMDB durable txn, just 10 node-sized keys, median (µs)", n, f"{median_us(raw_t):,.0f}")
        row(
            "commit / raw LMDB (10 keys) ratio",
            n,
            f"{statistics.median(commit_t) / statistics.median(raw_t):.2f}",
        )
        # Process CPU of the durable commit includes the kernel's work for fdatasync;
        # the CPU part of the commit itself is measured with sync off (commit_cpu.py).
        row(
            "durable commit, process CPU time incl. the kernel's sync work, median (µs)",
            n,
            f"{median_us(cpu_t):,.0f}",
        )
        row(
            "new object bytes per 10-node commit, median",
            n,
            f"{statistics.median(new_bytes):,.0f}",
            "<= 100,000",
            statistics.median(new_bytes) <= 100_000,
        )
        row("LMDB used-page growth per commit, median (bytes)", n, f"{statistics.median(page_growth):,.0f}")

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
    twin_env.close()

    if n >= 100_000:
        rss(path, node_id(7))
    git_reference(n, root, rounds)
    shutil.rmtree(path)


def twin_of(path: Path, twin: Path) -> tuple[lmdb.Environment, dict[Space, Any]]:
    """A raw LMDB with the store's shape: per keyspace, as many random keys of the same sizes."""
    env = lmdb.open(str(twin), map_size=1 << 32, sync=True, metasync=True, max_dbs=16)
    dbs = {space: env.open_db(space.value.encode()) for space in Space}
    with Repo.open(path, readonly=True) as repo:
        store = repo.kv.env  # type: ignore[attr-defined]
        with store.begin() as source, env.begin(write=True) as txn:
            for space in Space:
                try:
                    db = store.open_db(space.value.encode(), txn=source, create=False)
                except lmdb.NotFoundError:
                    continue
                for key, value in source.cursor(db=db):
                    txn.put(os.urandom(len(key)), os.urandom(len(value)), db=dbs[space])
    return env, dbs


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
            repo.branch(f"side{r}", at=start)
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
        from mnemosyne.history.merge import merge_bases

        def time_bases(expected: str, label: str, target: str, limit: float | None) -> None:
            left = bytes.fromhex(repo.resolve("left").id)
            right = bytes.fromhex(repo.resolve("right").id)
            samples = []
            for _ in range(9):
                with repo._handle.read() as view:
                    t0 = time.perf_counter()
                    bases = merge_bases(view, left, right)
                    samples.append(time.perf_counter() - t0)
            assert [b.hex() for b in bases] == [expected]
            ms = median_us(samples) / 1000
            row(label, depth, f"{ms:.2f}", target, None if limit is None else ms <= limit)

        # Two tips over a long history that forked 10 commits ago (the usual case).
        fork = repo.resolve("HEAD").id
        repo.branch("left", at=fork)
        repo.branch("right", at=fork)

        def grow_both(start: int, stop: int) -> None:
            for c in range(start, stop):
                repo.commit([make_node(c % 50, depth + c)], message=f"l{c}", author="bench", branch="left")
                repo.commit(
                    [make_node(50 + c % 50, 2 * depth + c)], message=f"r{c}", author="bench", branch="right"
                )

        grow_both(0, 10)
        time_bases(
            fork,
            f"merge base of two tips {depth} commits deep, forked 10 commits ago, median (ms)",
            "<= 10",
            10,
        )
        # The worst case: they forked long ago, so both sides must be walked.
        grow_both(10, depth)
        time_bases(
            fork,
            f"merge base of two tips that forked {depth} commits ago, median (ms)",
            "(walks both sides)",
            None,
        )

        target = node_id(7)
        threshold = depth // 2
        main_line = list(repo.log(at="main~" + str(depth)))
        history = [c for c in repo.log(at="main") if c.id not in {m.id for m in main_line}]
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
