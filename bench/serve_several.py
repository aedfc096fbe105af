"""Several ``mnemo serve`` processes over one PostgreSQL store: commit and read throughput with 1, 2, 3.

One PostgreSQL server (tests/support/pg_server.py) holds a store of ``memories``
memories; 1, 2, then 3 real servers (``MNEMO_EMBEDDER=none``) serve it, and two
driver processes, eight keep-alive connections each, spread over the servers,
send for ``seconds``:

- **commits**: each one small memory on ``main`` (every server's commits land on
  the same branch: a SERIALIZABLE transaction each, run again on a
  serialization failure);
- **reads**: ``GET nodes/{id}`` of a random memory.

With one server the commits run once more with PostgreSQL's ``synchronous_commit``
off (for the measurement only): the difference is what waiting for the log's
flush costs, the bound of commits that form one chain.

Rows: operations/s for each count of servers, and where the CPU went meanwhile
(seconds of CPU per 1,000 operations in the servers, in PostgreSQL, in the
drivers, and the machine's cores busy), measured from ``/proc``: on a machine of
few cores, that says what bounds the throughput, since every process shares them.
Serialization failures are counted from PostgreSQL's log.

Call ``bench_serve_several(root)`` from bench/run.py, or run this file by itself:

    python bench/serve_several.py [--memories 10000] [--seconds 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

from harness import make_node, node_id, row
from placement import children

from mnemosyne import Repo, Store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.pg_server import PgServer

DRIVERS = 2
"""Driver processes (the same whatever the count of servers, so their cost is the same)."""

CONNECTIONS = 8
"""Keep-alive connections per driver, spread over the servers."""

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of a process (and of its children reaped, with ``children``); 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    used = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        used += int(fields[13]) + int(fields[14])  # cutime, cstime
    return used / TICKS


def _pg_cpu(postmaster: int) -> float:
    """PostgreSQL's CPU seconds: the postmaster, its live backends, and those that ended."""
    return _cpu(postmaster, children=True) + sum(_cpu(pid) for pid in children(postmaster))


def _fsync_ms(folder: Path) -> float:
    """What one flush to the disk under PostgreSQL's files costs: a commit waits for one."""
    probe = folder / "fsync-probe"
    times = []
    with open(probe, "wb") as out:
        for _ in range(50):
            out.write(b"x" * 8192)
            out.flush()
            started = time.perf_counter()
            os.fsync(out.fileno())
            times.append(time.perf_counter() - started)
    probe.unlink()
    return sorted(times)[len(times) // 2] * 1e3


def _start(url: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "MNEMO_EMBEDDER": "none"}
    command = [sys.executable, "-m", "mnemo_cli", "--repo", url, "serve", "--port", "0"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"on (http://\S+)/v1 ", line)
    if found is None:
        process.kill()
        raise RuntimeError(f"mnemo serve did not start: {line}{process.stderr.read()}")

    def report() -> None:  # never a full pipe; a failure the server reports is shown
        assert process.stderr is not None
        for said in process.stderr:
            if said.startswith("error"):
                print(f"  server {process.pid}: {said.rstrip()}", flush=True)

    threading.Thread(target=report, daemon=True).start()
    return process, found.group(1)


def _drive(
    urls: list[str], token: str, op: str, memories: int, seconds: float, number: int, out: object
) -> None:
    """One driver process: CONNECTIONS threads, each on one server, sending ``op`` until the time is up."""
    done = [0] * CONNECTIONS
    errors: list[str] = []
    start = threading.Barrier(CONNECTIONS)
    base = "/v1/tenants/default"

    def connection(index: int) -> None:
        rng = random.Random(number * 100 + index)
        host, port = urls[(number * CONNECTIONS + index) % len(urls)].removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        start.wait()
        deadline = time.perf_counter() + seconds
        written = 0
        while time.perf_counter() < deadline:
            if op == "commit":
                written += 1
                node = {"id": f"several/{os.getpid()}/c{index}/{written:06d}", "content": "wrote"}
                conn.request("POST", f"{base}/commits", body=json.dumps({"put": [node]}), headers=headers)
                expected = 201
            else:
                target = quote(node_id(rng.randrange(memories)), safe="")
                conn.request("GET", f"{base}/nodes/{target}", headers=headers)
                expected = 200
            answer = conn.getresponse()
            body = answer.read()
            if answer.status != expected:
                errors.append(f"{answer.status} {body[:200]!r}")
            else:
                done[index] += 1

    threads = [threading.Thread(target=connection, args=(i,)) for i in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put((sum(done), errors))  # type: ignore[attr-defined]


def _run(
    urls: list[str], servers: list[int], postmaster: int, token: str, op: str, memories: int, seconds: float
) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    drivers = [
        context.Process(target=_drive, args=(urls, token, op, memories, seconds, n, results))
        for n in range(DRIVERS)
    ]
    for driver in drivers:
        driver.start()
    time.sleep(1.0)  # the drivers import and connect (their start is not measured: CPU below is)
    before = {
        "servers": sum(_cpu(pid) for pid in servers),
        "pg": _pg_cpu(postmaster),
        "drivers": sum(_cpu(d.pid or 0) for d in drivers),
        "wall": time.perf_counter(),
    }
    found = [results.get(timeout=seconds + 120) for _ in drivers]
    after = {
        "servers": sum(_cpu(pid) for pid in servers),
        "pg": _pg_cpu(postmaster),
        "drivers": sum(_cpu(d.pid or 0) for d in drivers),
        "wall": time.perf_counter(),
    }
    for driver in drivers:
        driver.join(timeout=60)
    ops = sum(count for count, _ in found)
    errors = [error for _, some in found for error in some]
    if errors:
        print(f"  {op}: {len(errors)} errors, e.g. {errors[0]}", flush=True)
    spent = {name: after[name] - before[name] for name in before}
    # The window measured for CPU starts a little after the drivers' clocks: ops/s is theirs.
    return {"ops": ops, "per_s": ops / seconds, "errors": len(errors), **spent}


def bench_serve_several(root: Path, memories: int = 10_000, seconds: float = 8.0) -> None:
    """Rows: commits/s and reads/s with 1, 2 and 3 servers over one PostgreSQL store, and where the CPU went."""
    pg = PgServer().start()
    url = pg.url("several")
    processes: list[subprocess.Popen[str]] = []
    try:
        t0 = time.perf_counter()
        with Repo.init(url) as repo:
            for first in range(0, memories, 2_000):
                batch = [make_node(i) for i in range(first, min(first + 2_000, memories))]
                repo.commit(batch, message=f"load {first}", author="bench")
        with Store.open(url) as store:
            token = store.create_token("default", "write", name="bench").token
        row("serve x N: build the store on PostgreSQL (s)", f"{memories}m", f"{time.perf_counter() - t0:.1f}")
        postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
        # Every process here shares the machine's cores with whatever else runs: say how busy it was.
        row("serve x N: the machine's load average at the start (1 min)", "", f"{os.getloadavg()[0]:.1f}")
        row(
            "serve x N: fsync of 8 KiB beside PostgreSQL's log (median ms)", "50", f"{_fsync_ms(pg.root):.2f}"
        )
        urls: list[str] = []
        cores = os.cpu_count() or 1
        for count in (1, 2, 3):
            while len(processes) < count:
                process, served = _start(url)
                processes.append(process)
                urls.append(served)
            pids = [p.pid for p in processes]
            _run(urls, pids, postmaster, token, "read", memories, min(seconds, 2.0))  # a new server warms
            for op in ("commit", "read"):
                failures = pg.log.read_text().count("could not serialize access")
                took = _run(urls, pids, postmaster, token, op, memories, seconds)
                failures = pg.log.read_text().count("could not serialize access") - failures
                n = f"{count} server{'s' if count > 1 else ''}"
                per_k = {
                    name: took[name] / max(took["ops"], 1) * 1e3 for name in ("servers", "pg", "drivers")
                }
                busy = (took["servers"] + took["pg"] + took["drivers"]) / took["wall"]
                row(
                    f"serve x N: {op}s/s ({DRIVERS * CONNECTIONS} connections)",
                    n,
                    f"{took['per_s']:.0f}",
                    "0 errors",
                    took["errors"] == 0,
                )
                row(
                    f"serve x N: {op}s, CPU s per 1,000: servers / PostgreSQL / drivers; cores busy of {cores}",
                    n,
                    f"{per_k['servers']:.2f} / {per_k['pg']:.2f} / {per_k['drivers']:.2f}; {busy:.2f}",
                )
                if op == "commit":
                    row("serve x N: commits run again after a serialization failure", n, f"{failures}")
                if op == "commit" and count == 1:
                    # What the wait for the log's flush costs: the same run, PostgreSQL not waiting.
                    # (Measured, never recommended: an acknowledged commit could then be lost.)
                    pg.sql("ALTER SYSTEM SET synchronous_commit = off")
                    pg.sql("SELECT pg_reload_conf()")
                    unsynced = _run(urls, pids, postmaster, token, op, memories, seconds)
                    pg.sql("ALTER SYSTEM RESET synchronous_commit")
                    pg.sql("SELECT pg_reload_conf()")
                    row(
                        "serve x N: commits/s, PostgreSQL not waiting for its log's flush (synchronous_commit off)",
                        n,
                        f"{unsynced['per_s']:.0f}",
                    )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=60)
        pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    bench_serve_several(Path("."), args.memories, args.seconds)


if __name__ == "__main__":
    main()
