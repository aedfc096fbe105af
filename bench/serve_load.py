"""mnemo serve under load: 32 clients for 60 s on a 100k-memory store, and the served call's cost.

A real ``mnemo serve`` process (lexical search, ``MNEMO_EMBEDDER=none``) over a
store of ``memories`` memories; this process drives it over loopback HTTP.

- **Side by side** (one keep-alive connection, blocks taking turns, medians):
  ``GET /v1/health`` (the HTTP floor: routing and a JSON answer, no token, no
  store), a served ``get``, a served ``search``, and the same ``search`` in this
  process on the same store. Targets: served get <= 1.5 x floor; served search <=
  in-process search + floor.
- **Load** (an async httpx driver, one keep-alive connection per client): each
  client picks 70 % reads (get 30, search 15, log 15, blame 10) and 30 % commits
  of one small memory, for ``seconds``. Rows: p50 and p99 per operation,
  requests/s, errors (any answer but the expected status: target 0), every
  acknowledged commit in the log afterwards (target 0 missing), and the
  server's RSS at the end over its RSS after warm-up (target <= 1.5).

Call ``bench_serve(root)`` from bench/run.py, or run this file again by itself:

    python bench/serve_load.py [--memories 100000] [--clients 32] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from harness import make_node, node_id, row

from mnemosyne import Repo, Store

MIX = (("get", 30), ("search", 15), ("log", 15), ("blame", 10), ("commit", 30))
"""Operations and their weights: 70 % reads, 30 % commits."""

WORDS = ["topic", "memory", "user", "said", "keeping", "something", "worth"]


def _status_kib(pid: int) -> dict[str, int]:
    """The process's memory figures from ``/proc``: VmRSS, and its parts RssAnon and RssFile."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            found[name] = int(value.split()[0])
    return found


def _build(path: Path, memories: int, per_commit: int = 2_000) -> None:
    with Repo.init(path, sync=False) as repo:
        for first in range(0, memories, per_commit):
            batch = [make_node(i) for i in range(first, min(first + per_commit, memories))]
            repo.commit(batch, message=f"load {first}", author="bench")


def _start(
    path: Path, *extra: str, env_extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "MNEMO_EMBEDDER": "none", **(env_extra or {})}
    command = [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "serve", "--port", "0", *extra]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"on (http://\S+)/v1 ", line)
    if found is None:
        process.kill()
        raise RuntimeError(f"mnemo serve did not start: {line}{process.stderr.read()}")
    return process, found.group(1)


class _Conn:
    """One keep-alive connection, timed per request."""

    def __init__(self, url: str, token: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=600)
        self.auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        self.timing = ""

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[float, int, bytes]:
        started = time.perf_counter()
        self.conn.request(method, path, body=body, headers=self.auth)
        answer = self.conn.getresponse()
        data = answer.read()
        self.timing = answer.getheader("server-timing") or ""
        return time.perf_counter() - started, answer.status, data

    def server_timing(self) -> float:
        """The server's own time on the last answer, in seconds (``Server-Timing: app;dur=MS``)."""
        return float(self.timing.removeprefix("app;dur=")) / 1e3


def _side_by_side(url: str, token: str, path: Path, base: str, runs: int, block: int) -> None:
    conn = _Conn(url, token)
    target = quote(node_id(4_321), safe="")
    query = json.dumps({"query": "memory topic 42 worth keeping", "k": 10}).encode()
    with Repo.open(path, readonly=True, embedder="none") as repo:
        samples: dict[str, list[float]] = {"floor": [], "get": [], "search": [], "local": [], "outside": []}
        for _ in range(runs):  # blocks take turns, so load on the machine falls on all alike
            for _ in range(block):
                samples["floor"].append(conn.call("GET", "/v1/health")[0])
            for _ in range(block):
                samples["get"].append(conn.call("GET", f"{base}/nodes/{target}")[0])
            for _ in range(block):
                took, _, _ = conn.call("POST", f"{base}/search", query)
                samples["search"].append(took)
                samples["outside"].append(took - conn.server_timing())
            for _ in range(block):
                started = time.perf_counter()
                repo.search("memory topic 42 worth keeping", k=10)
                samples["local"].append(time.perf_counter() - started)
    p50 = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    n = f"{runs}x{block}"
    row("serve: GET /v1/health, the HTTP floor (median ms)", n, f"{p50['floor']:.2f}")
    row(
        "serve: get over HTTP / the floor (median ms)",
        n,
        f"{p50['get']:.2f} / {p50['floor']:.2f} = {p50['get'] / p50['floor']:.2f}",
        "<= 1.5",
        p50["get"] <= 1.5 * p50["floor"],
    )
    row(
        "serve: search over HTTP / in-process search in the bench's process (median ms, lexical)",
        n,
        f"{p50['search']:.2f} / {p50['local']:.2f}",
    )
    row(
        "serve: search over HTTP, the time outside the server's work (the wait less Server-Timing; median ms)",
        n,
        f"{p50['outside']:.2f} (the floor {p50['floor']:.2f})",
        "<= 1",
        p50["outside"] <= 1,
    )


def _gets_in_turns(target: str, off: _Conn, on: _Conn, runs: int, block: int) -> tuple[float, float]:
    """The same get on two servers (a setting off, then on), warmed, blocks taking turns: medians in ms."""
    for conn in (off, on):
        for _ in range(block):
            conn.call("GET", target)
    samples: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(runs):
        for name, conn in (("off", off), ("on", on)):
            for _ in range(block):
                samples[name].append(conn.call("GET", target)[0])
    return statistics.median(samples["off"]) * 1e3, statistics.median(samples["on"]) * 1e3


def _metrics_cost(url: str, token: str, path: Path, base: str, runs: int, block: int) -> None:
    """A served get with ``--metrics`` against the same get without, blocks taking turns, medians.

    Both servers are started for this, side by side: the bench's main server has run
    the first search (every memory indexed, a larger heap) and would be compared
    with a fresh one. The main server's own figure is shown as the spread between
    two servers without metrics.
    """
    servers: list[subprocess.Popen[str]] = []
    try:
        plain, plain_url = _start(path)
        servers.append(plain)
        process, watched_url = _start(path, "--metrics")
        servers.append(process)
        target = f"{base}/nodes/{quote(node_id(4_321), safe='')}"
        off, on = _gets_in_turns(target, _Conn(plain_url, token), _Conn(watched_url, token), runs, block)
        main, other = _gets_in_turns(target, _Conn(url, token), _Conn(plain_url, token), runs, block)
        host, port = watched_url.removeprefix("http://").split(":")
        scrape = http.client.HTTPConnection(host, int(port), timeout=60)
        started = time.perf_counter()
        scrape.request("GET", "/metrics")
        page = scrape.getresponse().read()
        scraped = (time.perf_counter() - started) * 1e3
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    row(
        "serve: get over HTTP, --metrics on / off, two fresh servers (median ms)",
        f"{runs}x{block}",
        f"{on:.3f} / {off:.3f} = {on / off:.2f}",
        "<= 1.05",
        on <= 1.05 * off,
    )
    row(
        "serve: get over HTTP, two servers without metrics: the bench's main one / a fresh one (median ms)",
        f"{runs}x{block}",
        f"{main:.3f} / {other:.3f} = {main / other:.2f}",
    )
    row("serve: a scrape of /metrics (ms, bytes)", "1", f"{scraped:.2f}, {len(page):,}")


def _tracing_cost(token: str, path: Path, base: str, runs: int, block: int) -> None:
    """A served get with OpenTelemetry traces on (console exporter, to nowhere) against off, medians.

    Off (no OTEL_* variable asks for traces) a request takes the path it took before
    traces existed, and the SDK is never imported (tests/test_serve_tracing.py).
    """
    servers: list[subprocess.Popen[str]] = []
    try:
        plain, plain_url = _start(path)  # fresh, as the traced one is (see _metrics_cost)
        servers.append(plain)
        process, traced_url = _start(path, env_extra={"OTEL_TRACES_EXPORTER": "console"})
        servers.append(process)
        target = f"{base}/nodes/{quote(node_id(4_321), safe='')}"
        off, on = _gets_in_turns(target, _Conn(plain_url, token), _Conn(traced_url, token), runs, block)
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    row(
        "serve: get over HTTP, traces on / off, two fresh servers (median ms; off: the path without traces)",
        f"{runs}x{block}",
        f"{on:.3f} / {off:.3f} = {on / off:.2f}",
    )


async def _load(
    url: str, token: str, base: str, clients: int, seconds: float, memories: int
) -> dict[str, object]:
    import httpx

    latencies: dict[str, list[float]] = {name: [] for name, _ in MIX}
    errors: list[str] = []
    acknowledged: list[str] = []
    names = [name for name, _ in MIX]
    weights = [weight for _, weight in MIX]
    deadline = time.perf_counter() + seconds

    async def client(number: int) -> None:
        rng = random.Random(number)
        headers = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            written = 0
            while time.perf_counter() < deadline:
                op = rng.choices(names, weights)[0]
                target = quote(node_id(rng.randrange(memories)), safe="")
                started = time.perf_counter()
                if op == "get":
                    answer = await http.get(f"{base}/nodes/{target}")
                    expected = 200
                elif op == "search":
                    words = " ".join(rng.sample(WORDS, 3)) + f" {rng.randrange(113)}"
                    answer = await http.post(f"{base}/search", json={"query": words, "k": 10})
                    expected = 200
                elif op == "log":
                    answer = await http.get(f"{base}/log", params={"limit": "20"})
                    expected = 200
                elif op == "blame":
                    answer = await http.get(f"{base}/blame/{target}")
                    expected = 200
                else:
                    written += 1
                    node = {
                        "id": f"load/c{number:02d}/{written:06d}",
                        "content": f"client {number} wrote {written}",
                    }
                    answer = await http.post(f"{base}/commits", json={"put": [node], "message": "load"})
                    expected = 201
                latencies[op].append(time.perf_counter() - started)
                if answer.status_code != expected:
                    errors.append(f"{op}: {answer.status_code} {answer.text[:200]}")
                elif op == "commit":
                    acknowledged.append(answer.json()["id"])

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return {
        "latencies": latencies,
        "errors": errors,
        "acknowledged": acknowledged,
        "elapsed": time.perf_counter() - started,
    }


def _startup(path: Path, runs: int = 5) -> None:
    """From ``mnemo serve`` started to its first answer (the MCP SDK is imported at /mcp's first request)."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        process, url = _start(path)
        try:
            host, port = url.removeprefix("http://").split(":")
            connection = http.client.HTTPConnection(host, int(port), timeout=60)
            connection.request("GET", "/v1/health")
            assert connection.getresponse().status == 200
            samples.append(time.perf_counter() - started)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    row("serve: start-up to the first answer, median (ms)", f"{runs} runs", f"{statistics.median(samples) * 1e3:.0f}")


def bench_serve(
    root: Path, memories: int = 100_000, clients: int = 32, seconds: float = 60.0, runs: int = 15
) -> None:
    """Rows: served get and search against the HTTP floor and in-process search; the load test."""
    path = root / "serve"
    t0 = time.perf_counter()
    _build(path, memories)
    row("serve: build the store (s)", f"{memories}m", f"{time.perf_counter() - t0:.1f}")
    with Store.open(path) as store:
        token = store.create_token("default", "write", name="bench").token
    _startup(path)
    process, url = _start(path)
    base = "/v1/tenants/default"
    try:
        warm = _Conn(url, token)
        t0 = time.perf_counter()
        _, status, _ = warm.call("POST", f"{base}/search", b'{"query": "memory"}')
        assert status == 200, status
        row(
            "serve: first search, indexing every memory (s)",
            f"{memories}m",
            f"{time.perf_counter() - t0:.1f}",
        )
        for _ in range(50):  # warm: every route once and again
            warm.call("GET", f"{base}/nodes/{quote(node_id(7), safe='')}")
            warm.call("GET", f"{base}/blame/{quote(node_id(7), safe='')}")
            warm.call("GET", f"{base}/log?limit=20")
        _side_by_side(url, token, path, base, runs, 40)
        _metrics_cost(url, token, path, base, runs, 40)
        _tracing_cost(token, path, base, runs, 40)
        warm_status = _status_kib(process.pid)
        warmed = warm_status["VmRSS"]
        found = asyncio.run(_load(url, token, base, clients, seconds, memories))
        end_status = _status_kib(process.pid)
        ended = end_status["VmRSS"]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    load = f"{clients}c x {seconds:.0f}s"
    latencies: dict[str, list[float]] = found["latencies"]  # type: ignore[assignment]
    total = sum(len(values) for values in latencies.values())
    for name, _ in MIX:
        values = sorted(latencies[name])
        if values:
            p50 = statistics.median(values) * 1e3
            p99 = values[min(len(values) - 1, int(len(values) * 0.99))] * 1e3
            row(f"serve load: {name} p50 / p99 (ms)", f"{load}, {len(values)}", f"{p50:.1f} / {p99:.1f}")
    row("serve load: requests/s (70 % reads, 30 % commits)", load, f"{total / found['elapsed']:.0f}")  # type: ignore[operator]
    errors: list[str] = found["errors"]  # type: ignore[assignment]
    row("serve load: errors", load, f"{len(errors)}", "0", not errors)
    for message in errors[:5]:
        print(f"  error: {message}", flush=True)
    acknowledged: list[str] = found["acknowledged"]  # type: ignore[assignment]
    with Repo.open(path, readonly=True) as repo:
        logged = {commit.id for commit in repo.log()}
    missing = [commit for commit in acknowledged if commit not in logged]
    row(
        "serve load: acknowledged commits missing from the log",
        f"{len(acknowledged)} commits",
        f"{len(missing)}",
        "0",
        not missing,
    )
    row(
        "serve load: server RSS at the end / after warm-up (MiB)",
        load,
        f"{ended / 1024:.0f} / {warmed / 1024:.0f} = {ended / warmed:.2f}",
        "<= 1.5",
        ended <= 1.5 * warmed,
    )
    # Of which: private memory (the heap: caches, indexes) and the store's mapped file
    # pages, which grow with the pages read and written and are the kernel's to reclaim.
    for part, what in (("RssAnon", "private memory"), ("RssFile", "mapped store pages")):
        before, after = warm_status.get(part, 0), end_status.get(part, 0)
        row(
            f"serve load: of which {what} ({part}), at the end / after warm-up (MiB)",
            load,
            f"{after / 1024:.0f} / {before / 1024:.0f}",
        )
    row("serve: stopped by SIGTERM, exit code", "", f"{code}", "0", code == 0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-serve-") as root:
        bench_serve(Path(root), args.memories, args.clients, args.seconds)


if __name__ == "__main__":
    main()
