"""PostgreSQL rows: a store on a real server over a unix socket, beside raw psycopg and LMDB.

The bench starts its own throwaway server (as the tests do). For each size it
bulk-imports n nodes, then times durable 10-node commits interleaved with a raw
psycopg transaction writing the same rows (the keys and value sizes a commit of the
same shape writes on LMDB, into a table of the same shape holding as many rows), and
`get` at HEAD with a warm cache beside the same `get` on LMDB. A cold `get` (a new
process opening the store and reading one memory) is reported.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import ByteCounter, make_node, median_us, node_id, row

from mnemosyne import Repo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.pg_server import PgServer


def _raw_table(conn: Any, name: str, rows: int, value_size: int) -> None:
    conn.execute(f"CREATE TABLE {name} (k bytea PRIMARY KEY, v bytea)")
    conn.execute(f"ALTER TABLE {name} ALTER COLUMN v SET STORAGE EXTERNAL")
    conn.execute(
        f"INSERT INTO {name} SELECT gen_random_bytes(36), gen_random_bytes({value_size}) "
        f"FROM generate_series(1, {rows})"
    )


def bench_postgres(root: Path, sizes: list[int], rounds: int) -> None:
    import psycopg

    server = PgServer().start()
    try:
        with psycopg.connect(
            f"host={server.socket} user={server.user} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgcrypto")
            for n in sizes:
                _bench_size(server, conn, root, n, rounds)
    finally:
        server.stop()


def _bench_size(server: PgServer, conn: Any, root: Path, n: int, rounds: int) -> None:
    url = server.url(f"bench{n}")
    nodes = [make_node(i) for i in range(n)]
    with Repo.init(url) as repo:
        start = time.perf_counter()
        repo.commit(nodes, message="import", author="bench")
        rate = n / (time.perf_counter() - start)
    row("postgres: bulk import, one commit (nodes/s)", n, f"{rate:,.0f}")
    # The rows a 10-node commit writes, as LMDB sees them (keyspace, key and value sizes).
    lmdb_path = root / f"pg-twin-{n}"
    with Repo.init(lmdb_path) as twin:
        twin.commit(nodes, message="import", author="bench")
        with ByteCounter() as counter:
            twin.commit([make_node(i, 1) for i in range(10)], message="shape", author="bench")
        lmdb_get = []
        for _ in range(3):
            for i in range(0, 2000):
                start = time.perf_counter()
                twin.get(node_id(i * 37 % n))
                lmdb_get.append(time.perf_counter() - start)
    table = f"raw{n}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    _raw_table(conn, table, n, 260)
    shapes = list(counter.puts)
    rng = random.Random(n)
    commit_t: list[float] = []
    raw_t: list[float] = []
    with Repo.open(url) as repo:
        version = 2
        for r in range(rounds):
            batch = list(
                {n_.id: n_ for n_ in (make_node(rng.randrange(n), version + k) for k in range(10))}.values()
            )
            version += 10
            start = time.perf_counter()
            repo.commit(batch, message=f"round {r}", author="bench")
            commit_t.append(time.perf_counter() - start)
            rows = [(os.urandom(k), os.urandom(v)) for k, v in shapes]
            start = time.perf_counter()
            with conn.transaction():
                with conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {table} (k, v) VALUES (%s, %s)", rows)
            raw_t.append(time.perf_counter() - start)
        warm: list[float] = []
        for _ in range(3):
            for i in range(0, 2000):
                start = time.perf_counter()
                repo.get(node_id(i * 37 % n))
                warm.append(time.perf_counter() - start)
    ratio = statistics.median(commit_t) / statistics.median(raw_t)
    row(
        f"postgres: durable commit of 10 nodes / raw psycopg txn of the same {len(shapes)} rows, medians",
        n,
        f"{median_us(commit_t):,.0f} / {median_us(raw_t):,.0f} µs = {ratio:.2f}",
        "<= 2.5",
        ratio <= 2.5,
    )
    get_ratio = statistics.median(warm) / statistics.median(lmdb_get)
    row(
        "postgres: get at HEAD, warm cache / the same get on LMDB, medians",
        n,
        f"{median_us(warm):.0f} / {median_us(lmdb_get):.0f} µs = {get_ratio:.2f}",
        "<= 2",
        get_ratio <= 2,
    )
    cold = [_cold_get(url, node_id(i * 101 % n)) for i in range(5)]
    row(
        "postgres: get in a new process (open + one get), median of 5 (ms)",
        n,
        f"{statistics.median(cold):.1f}",
    )


def _cold_get(url: str, key: str) -> float:
    code = (
        "import time; from mnemosyne import Repo; "
        f"repo = Repo.open({url!r}); t = time.perf_counter(); repo.get({key!r}); "
        "print((time.perf_counter() - t) * 1000)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bench_postgres(Path(tmp), [10_000, 100_000], 31)
