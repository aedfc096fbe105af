"""PostgreSQL rows: a store on a real server over a unix socket, beside raw psycopg, LMDB and LangGraph.

The bench starts its own throwaway server (as the tests do). For each size it
bulk-imports n nodes, then times durable 10-node commits interleaved with a raw
psycopg transaction writing the same rows (the keys and value sizes a commit of the
same shape writes on LMDB, into a table of the same shape holding as many rows), and
`get` at HEAD with a warm cache interleaved with one `SELECT` of a row by its key
(psycopg, prepared: what one round trip costs) and beside the same `get` on LMDB.
Round trips per commit and per get are counted by the handle (``kv.round_trips``).
A cold `get` (a new process opening the store and reading one memory) is reported.
The timed comparisons run twice: with the server on a CPU of its own, then with
everything on one CPU (see ``placement``: left to the scheduler, a round trip's
time depends on where each connection's backend happens to run).

Then LangGraph's long-term store on the same server: ``MnemosyneStore`` on a
PostgreSQL-backed repo beside LangGraph's own ``PostgresStore`` (package
``langgraph-checkpoint-postgres``), ``put``, ``get`` and a ``search`` of a namespace
of 1,000 items (a page of 10, LangGraph's default), blocks taking turns, medians.

Last, push and fetch with a PostgreSQL store on the other side (``transfer_pg``).
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

from harness import make_node, median_us, node_id, row
from placement import placed, placements

from mnemosyne import Repo
from mnemosyne.store.kv import lmdb_kv

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.pg_server import PgServer
from transfer_pg import bench_transfers_pg  # uses tests/support too


class RowCounter:
    """The (key size, value size) of every row an LMDB transaction writes: by put and put_many.

    (harness.ByteCounter counts new objects put one at a time; a commit's nodes and
    change-index entries go in by put_many, and a raw transaction "of the same rows"
    must write them too.)
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, int]] = []
        self._put = lmdb_kv._Txn.put
        self._put_many = lmdb_kv._Txn.put_many

    def __enter__(self) -> RowCounter:
        counter, put, put_many = self, self._put, self._put_many

        def counted_put(txn: Any, space: Any, key: bytes, value: bytes, overwrite: bool = True) -> bool:
            done = put(txn, space, key, value, overwrite)
            if done:
                counter.rows.append((len(key), len(value)))
            return done

        def counted_many(
            txn: Any, space: Any, items: list[tuple[bytes, bytes]], overwrite: bool = True
        ) -> int:
            counter.rows.extend((len(key), len(value)) for key, value in items)
            return put_many(txn, space, items, overwrite)

        lmdb_kv._Txn.put = counted_put  # type: ignore[method-assign]
        lmdb_kv._Txn.put_many = counted_many  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        lmdb_kv._Txn.put = self._put  # type: ignore[method-assign]
        lmdb_kv._Txn.put_many = self._put_many  # type: ignore[method-assign]


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
        _bench_langgraph_store(server, max(rounds, 21))
        bench_transfers_pg(server, root)
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
    # The rows a 10-node commit of ids spread over the store writes, as LMDB sees them
    # (key and value sizes): a raw transaction writes as many rows of the same sizes.
    lmdb_path = root / f"pg-twin-{n}"
    with Repo.init(lmdb_path) as twin:
        twin.commit(nodes, message="import", author="bench")
        with RowCounter() as counter:
            spread = random.Random(-n).sample(range(n), 10)
            twin.commit([make_node(i, 1) for i in spread], message="shape", author="bench")
        lmdb_get = []
        for _ in range(3):
            for i in range(0, 2000):
                start = time.perf_counter()
                twin.get(node_id(i * 37 % n))
                lmdb_get.append(time.perf_counter() - start)
    table = f"raw{n}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    _raw_table(conn, table, n, 260)
    shapes = list(counter.rows)
    rng = random.Random(n)
    commit_trips: list[int] = []
    get_trips: list[int] = []
    measured = []
    with Repo.open(url) as repo:
        kv: Any = repo.kv
        for _ in repo.nodes():  # a warm handle: every chunk cached, as a long-lived agent's are
            pass
        version = 2
        # A warm get beside one SELECT of a row by its key, in blocks of 200 taking turns. The
        # SELECTs take turns over four connections, as ours over its pool's.
        import psycopg

        selecting = [
            psycopg.connect(f"host={server.socket} user={server.user} dbname=postgres", autocommit=True)
            for _ in range(4)
        ]
        key = conn.execute(f"SELECT k FROM {table} LIMIT 1").fetchone()[0]
        for i in range(2000):  # warm: every chunk and node the timed gets read is cached
            repo.get(node_id(i * 37 % n))
        for where, client, serving in placements():
            commit_t: list[float] = []
            raw_t: list[float] = []
            warm: list[float] = []
            select_t: list[float] = []
            with placed(server.data, client, serving):
                for r in range(rounds):
                    batch = list(
                        {
                            n_.id: n_ for n_ in (make_node(rng.randrange(n), version + k) for k in range(10))
                        }.values()
                    )
                    version += 10
                    trips = kv.round_trips
                    start = time.perf_counter()
                    repo.commit(batch, message=f"round {r}", author="bench")
                    commit_t.append(time.perf_counter() - start)
                    commit_trips.append(kv.round_trips - trips)
                    rows = [(os.urandom(k), os.urandom(v)) for k, v in shapes]
                    start = time.perf_counter()
                    with conn.transaction():
                        with conn.cursor() as cur:
                            cur.executemany(f"INSERT INTO {table} (k, v) VALUES (%s, %s)", rows)
                    raw_t.append(time.perf_counter() - start)
                for block in range(30):
                    for i in range(block % 10 * 200, block % 10 * 200 + 200):
                        trips = kv.round_trips
                        start = time.perf_counter()
                        repo.get(node_id(i * 37 % n))
                        warm.append(time.perf_counter() - start)
                        get_trips.append(kv.round_trips - trips)
                    for k in range(200):
                        other = selecting[(block + k) % 4]
                        start = time.perf_counter()
                        other.execute(f"SELECT v FROM {table} WHERE k = %s", [key]).fetchone()
                        select_t.append(time.perf_counter() - start)
            measured.append((where, commit_t, raw_t, warm, select_t))
        for other in selecting:
            other.close()
    for where, commit_t, raw_t, _, _ in measured:
        ratio = statistics.median(commit_t) / statistics.median(raw_t)
        row(
            f"postgres ({where}): durable commit of 10 nodes, warm handle / raw psycopg txn of the same {len(shapes)} rows, medians",
            n,
            f"{median_us(commit_t):,.0f} / {median_us(raw_t):,.0f} µs = {ratio:.2f}",
            "<= 2",
            ratio <= 2,
        )
    row(
        "postgres: round trips per durable 10-node commit, warm handle, median (max)",
        n,
        f"{statistics.median(commit_trips):.0f} ({max(commit_trips)})",
        "<= 2",
        statistics.median(commit_trips) <= 2,
    )
    for where, _, _, warm, select_t in measured:
        get_ratio = statistics.median(warm) / statistics.median(select_t)
        row(
            f"postgres ({where}): get at HEAD, warm cache / one SELECT of a row by key (psycopg), medians",
            n,
            f"{median_us(warm):.0f} / {median_us(select_t):.0f} µs = {get_ratio:.2f}",
            "<= 2",
            get_ratio <= 2,
        )
    row(
        "postgres: round trips per warm get at HEAD, median (max)",
        n,
        f"{statistics.median(get_trips):.0f} ({max(get_trips)})",
        "<= 1",
        statistics.median(get_trips) <= 1,
    )
    _, _, _, warm, _ = measured[0]
    row(
        f"postgres ({measured[0][0]}): get at HEAD, warm cache / the same get on LMDB, medians",
        n,
        f"{median_us(warm):.0f} / {median_us(lmdb_get):.0f} µs = {statistics.median(warm) / statistics.median(lmdb_get):.2f}",
    )
    cold = [_cold_get(url, node_id(i * 101 % n)) for i in range(5)]
    row(
        "postgres: get in a new process (open + one get), median of 5 (ms)",
        n,
        f"{statistics.median(cold):.1f}",
    )


def _item(i: int) -> dict[str, Any]:
    return {"text": f"note {i}: the user prefers short answers about topic {i % 17}", "n": i}


def _bench_langgraph_store(server: PgServer, rounds: int) -> None:
    """MnemosyneStore on a PostgreSQL-backed repo beside LangGraph's PostgresStore, same server."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres import PostgresStore

    from mnemosyne.integrations.langgraph import MnemosyneStore

    space = ("bench", "notes")
    user = ("users", "u1")
    times: dict[str, dict[str, dict[str, list[float]]]] = {}
    trips: dict[str, list[int]] = {op: [] for op in ("put", "get", "search")}
    conninfo = f"host={server.socket} user={server.user} dbname=postgres"
    with Repo.init(server.url("bench_store")) as repo, PostgresStore.from_conn_string(conninfo) as theirs:
        theirs.setup()
        ours = MnemosyneStore(repo)
        kv: Any = repo.kv
        stores = {"ours": ours, "theirs": theirs}
        for store in stores.values():  # the namespace searched: 1,000 items, one batch each
            store.batch([PutOp(space, f"item-{i:04d}", _item(i)) for i in range(1000)])
            store.put(user, "warm", _item(-1))
            store.get(user, "warm")
            store.search(space, limit=10)
        for where, client, serving in placements():
            timed = times[where] = {op: {"ours": [], "theirs": []} for op in trips}
            with placed(server.data, client, serving):
                for r in range(rounds):
                    # Blocks taking turns: who goes first alternates from round to round.
                    order = ["ours", "theirs"] if r % 2 == 0 else ["theirs", "ours"]
                    for op in ("put", "get", "search"):
                        for name in order:
                            store = stores[name]
                            for k in range(5):
                                key = f"{where}-k{r}-{k}"
                                before = kv.round_trips
                                start = time.perf_counter()
                                if op == "put":
                                    store.put(user, key, _item(r * 5 + k))
                                elif op == "get":
                                    store.get(user, key)
                                else:
                                    store.search(space, limit=10)
                                timed[op][name].append(time.perf_counter() - start)
                                if name == "ours":
                                    trips[op].append(kv.round_trips - before)
    targets = {"put": 1.5, "get": 1.5, "search": 2.0}
    what = {
        "put": "put of one item (durable commit)",
        "get": "get of one item",
        "search": "search of a namespace of 1,000 items (a page of 10)",
    }
    for op, target in targets.items():
        for where, timed in times.items():
            mine, other = statistics.median(timed[op]["ours"]), statistics.median(timed[op]["theirs"])
            row(
                f"postgres ({where}): langgraph store {what[op]}, MnemosyneStore / PostgresStore, medians",
                1000,
                f"{mine * 1e6:,.0f} / {other * 1e6:,.0f} µs = {mine / other:.2f}",
                f"<= {target:g}",
                mine / other <= target,
            )
        # A put is the commit's two; a get one; a search two, its listing and its page (ADR 35).
        most = {"put": 2, "get": 1, "search": 2}[op]
        row(
            f"postgres: langgraph store {op}, MnemosyneStore's round trips, median (max)",
            1000,
            f"{statistics.median(trips[op]):.0f} ({max(trips[op])})",
            f"<= {most}",
            statistics.median(trips[op]) <= most,
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
        bench_postgres(Path(tmp), [int(n) for n in sys.argv[1:]] or [10_000, 100_000], 31)
