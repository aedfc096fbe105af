"""Benchmarks for remotes: a push of many new commits to a path remote, a fetch of them, and a no-op fetch.

The same history then travels over HTTP, to and from a real ``mnemo serve``
process: a push into the empty store it serves, a fetch of all of it into an
empty local store, each beside the in-process push (one run each, in turn), with
the requests each took (counted in the client), and a no-op fetch.

Call :func:`bench_sync` from ``bench/run.py`` (rows go to the same table):

    from sync import bench_sync
    bench_sync(root, commits=10_000, noop_sizes=(1_000, 100_000))

or run it alone: ``python bench/sync.py [--commits N] [--noop 1000,100000]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness import make_node, row

from mnemosyne import Repo, Store
from mnemosyne.admin.http_remote import HttpRemote


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
    """Push ``commits`` new commits (about ``commits * (per_commit + 3)`` objects) to an empty path remote.

    Then the same over HTTP: a push to a served empty store, and a fetch of it
    all from there into an empty local store; rates side by side.
    """
    with _history(root / "push-local", commits, per_commit) as local:
        rates = []
        for run in range(3):  # each to an empty remote of its own: the median of three
            Repo.init(root / f"push-remote-{run}").close()
            local.store.add_remote(f"bench-{run}", root / f"push-remote-{run}")
            t0 = time.perf_counter()
            report = local.push(f"bench-{run}")
            elapsed = time.perf_counter() - t0
            (part,) = report.tenants
            rates.append(part.objects / elapsed)
        rate = statistics.median(rates)
        row(
            "push to a path remote, objects/s, median of 3",
            f"{part.commits} commits, {part.objects} objects",
            f"{rate:,.0f}",
            ">= 20,000",
            rate >= 20_000,
        )
        _fetch_from_path(root, root / "push-local")
        _over_http(root, local, rate)
        _to_bucket(root, local, rate)


def _fetch_from_path(root: Path, source: Path) -> None:
    """Fetch the whole history of ``source`` into an empty store, three times: the median rate."""
    rates = []
    for run in range(3):  # each into an empty store of its own
        with Repo.init(root / f"fetch-path-{run}", sync=False) as fetcher:
            fetcher.store.add_remote("source", source)
            t0 = time.perf_counter()
            (part,) = fetcher.fetch("source").tenants
            rates.append(part.objects / (time.perf_counter() - t0))
    rate = statistics.median(rates)
    row(
        "fetch from a path remote, objects/s, median of 3",
        f"{part.commits} commits, {part.objects} objects",
        f"{rate:,.0f}",
        ">= 20,000",
        rate >= 20_000,
    )


class _Server:
    """``mnemo serve`` over a store, its stderr in a file."""

    def __init__(self, path: Path, log: Path) -> None:
        self.log = log
        env = {**os.environ, "MNEMO_EMBEDDER": "none"}
        command = [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "serve", "--port", "0"]
        with log.open("w") as sink:
            self.process = subprocess.Popen(command, stderr=sink, stdout=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"on (http://\S+)/v1 ", log.read_text())
            if found:
                self.url = found.group(1)
                return
            time.sleep(0.05)
        self.process.kill()
        raise RuntimeError(f"mnemo serve did not start: {log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


class _Requests:
    """Counts the requests the remotes' HTTP client sends."""

    def __init__(self) -> None:
        self.count = 0
        self._send = HttpRemote._send
        counter = self

        def counted(remote: HttpRemote, *args: Any) -> bytes:
            counter.count += 1
            return counter._send(remote, *args)

        HttpRemote._send = counted  # type: ignore[method-assign]

    def close(self) -> None:
        HttpRemote._send = self._send  # type: ignore[method-assign]


def _over_http(root: Path, local: Repo, in_process: float, rounds: int = 7) -> None:
    """The same history pushed to, and fetched from, a served store; a no-op fetch; requests counted."""
    served = root / "push-served"
    with Store.init(served) as store:
        token = store.create_token("default", "write", name="bench").token
    server = _Server(served, root / "push-served.log")
    requests = _Requests()
    try:
        local.store.add_remote("served", server.url)
        t0 = time.perf_counter()
        pushed = local.push("served", token=token).tenants[0]
        push_rate = pushed.objects / (time.perf_counter() - t0)
        push_requests, requests.count = requests.count, 0
        fetcher = Repo.init(root / "fetch-local", sync=False)
        fetcher.store.add_remote("served", server.url)
        t0 = time.perf_counter()
        fetched = fetcher.fetch("served", token=token).tenants[0]
        fetch_rate = fetched.objects / (time.perf_counter() - t0)
        fetch_requests, requests.count = requests.count, 0
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fetcher.fetch("served", token=token)
            samples.append(time.perf_counter() - t0)
        noop_requests = requests.count // rounds
        fetcher.close()
    finally:
        requests.close()
        server.stop()
    n = f"{pushed.commits} commits, {pushed.objects} objects"
    row("push over HTTP (mnemo serve), objects/s", n, f"{push_rate:,.0f}")
    row("fetch over HTTP (mnemo serve), objects/s", n, f"{fetch_rate:,.0f}")
    row(
        "push over HTTP (one run) / push to a path remote (median of 3), objects/s",
        n,
        f"{push_rate:,.0f} / {in_process:,.0f} = {push_rate / in_process:.2f}",
        ">= 0.5",
        push_rate / in_process >= 0.5,
    )
    row(
        "fetch over HTTP (one run) / push to a path remote (median of 3), objects/s",
        n,
        f"{fetch_rate:,.0f} / {in_process:,.0f} = {fetch_rate / in_process:.2f}",
        ">= 0.5",
        fetch_rate / in_process >= 0.5,
    )
    row("requests: push over HTTP / fetch over HTTP", n, f"{push_requests} / {fetch_requests}")
    ms = statistics.median(samples) * 1e3
    row(
        "no-op fetch over HTTP (median ms, requests)",
        f"{pushed.commits} commits",
        f"{ms:.2f}, {noop_requests}",
    )


def _to_bucket(root: Path, local: Repo, in_process: float) -> None:
    """The same history pushed to a bucket of moto's S3-compatible server on loopback, then fetched.

    moto is a Python server answering in this process's threads: its requests cost far
    more CPU than a real bucket's, and on 2 cores it competes with the client. What the
    rows show is the client's side: how many requests a transfer takes (packs of a few
    megabytes, not one per object), and a floor for the rate.
    """
    from moto.server import ThreadedMotoServer

    env = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    import logging

    import boto3

    from mnemosyne import BucketOptions
    from mnemosyne.admin.bucket_remote import Bucket

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    counted = {"requests": 0}
    count = Bucket._count

    def counting(bucket: Bucket) -> None:
        counted["requests"] += 1
        count(bucket)

    Bucket._count = counting  # type: ignore[method-assign]
    try:
        host, port = server.get_host_and_port()
        options = BucketOptions(endpoint_url=f"http://{host}:{port}")
        boto3.client("s3", endpoint_url=options.endpoint_url).create_bucket(Bucket="bench")
        local.store.add_remote("bucket", "s3://bench/memory", bucket=options)
        t0 = time.perf_counter()
        pushed = local.push("bucket").tenants[0]
        push_rate = pushed.objects / (time.perf_counter() - t0)
        push_requests, counted["requests"] = counted["requests"], 0
        with Repo.init(root / "fetch-bucket", sync=False) as fetcher:
            fetcher.store.add_remote("bucket", "s3://bench/memory", bucket=options)
            t0 = time.perf_counter()
            fetched = fetcher.fetch("bucket").tenants[0]
            fetch_rate = fetched.objects / (time.perf_counter() - t0)
            fetch_requests, counted["requests"] = counted["requests"], 0
            t0 = time.perf_counter()
            fetcher.fetch("bucket")
            noop_ms = (time.perf_counter() - t0) * 1e3
            noop_requests = counted["requests"]
    finally:
        Bucket._count = count  # type: ignore[method-assign]
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    n = f"{pushed.commits} commits, {pushed.objects} objects"
    row(
        "push to a bucket (moto on loopback) / push to a path remote (median of 3), objects/s",
        n,
        f"{push_rate:,.0f} / {in_process:,.0f} = {push_rate / in_process:.2f}",
    )
    row(
        "fetch from a bucket (moto on loopback) / push to a path remote (median of 3), objects/s",
        n,
        f"{fetch_rate:,.0f} / {in_process:,.0f} = {fetch_rate / in_process:.2f}",
    )
    row("requests: push to a bucket / fetch from it", n, f"{push_requests} / {fetch_requests}")
    row("no-op fetch from a bucket (ms, requests)", f"{pushed.commits} commits", f"{noop_ms:.1f}, {noop_requests}")


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
