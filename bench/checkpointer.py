"""LangGraph checkpointer rows: MnemosyneSaver beside the saver a user would pick instead.

A graph with 20 channels: a growing message list, a few counters and flags, and
text fields of a few hundred bytes. Each step changes three channels and saves a
checkpoint (as LangGraph does after every super-step, naming the changed channels
in ``new_versions``), then reads the thread's latest one (as LangGraph does when
it resumes a thread). Every saver is durable. On a file: ours on LMDB with its
default (sync on) beside SqliteSaver in WAL mode with ``synchronous=FULL``. On
PostgreSQL: ours on a store in one schema beside LangGraph's PostgresSaver in
another, on the same throwaway server (as the tests start it: fsync on, a unix
socket), timed twice: with the server on a CPU of its own and with everything on
one CPU (see ``placement``). Over HTTP: ours on a served store (``mnemo serve`` on
loopback, durable LMDB, reached by the Python client with a token) beside the local
saver and SqliteSaver, with the requests each call sends; then LangGraph.js's
MnemosyneSaver (clients/typescript) on the same server, the same thread put and read
by a node script (clients/typescript/bench/checkpointer.ts), one run after Python's.
Blocks of each take turns; the figures are medians.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import lmdb
from harness import row
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from placement import placed, placements

from mnemosyne import Repo, Store
from mnemosyne.integrations.client import ServedRepo
from mnemosyne.integrations.langgraph import MnemosyneSaver

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.pg_server import PgServer
from support.served import Served

CHANNELS = 20
CHANGED = 3


def _values(step: int) -> dict[str, Any]:
    values: dict[str, Any] = {
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "words " * 20}
            for i in range(min(step, 12) + 1)
        ],
        "step": step,
    }
    for c in range(CHANNELS - len(values)):
        values[f"field_{c:02d}"] = (f"channel {c} at step {step - step % (c + 2)} " * 6)[:240]
    return values


class Thread:
    """One thread's checkpoints, put and read back the way a running graph does."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.versions: dict[str, int] = {}
        self.step = 0

    def put(self) -> None:
        self.step += 1
        values = _values(self.step)
        names = list(values)
        changed = [*names[: CHANGED - 1], names[2 + self.step % (CHANNELS - 2)]]
        for name in values:
            if name not in self.versions or name in changed:
                self.versions[name] = self.versions.get(name, 0) + 1
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=self.step))
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(self.versions)
        new = {name: self.versions[name] for name in changed}
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        self.config = self.saver.put(self.config, checkpoint, metadata, new)

    def get(self) -> None:
        found = self.saver.get_tuple(
            {"configurable": {"thread_id": self.config["configurable"]["thread_id"]}}
        )
        assert found is not None and found.checkpoint["channel_values"]["step"] == self.step


def _timed(action: Any, times: int) -> list[float]:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def _raw_lmdb_floor(root: Path, rounds: int) -> float:
    """A durable LMDB transaction of five 4 KB values: the disk's floor for a put."""
    env = lmdb.open(str(root / "raw.lmdb"), map_size=1 << 30)
    payload = os.urandom(4096)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        with env.begin(write=True) as txn:
            for k in range(5):
                txn.put(f"{i:08d}/{k}".encode(), payload)
        samples.append(time.perf_counter() - start)
    env.close()
    return statistics.median(samples)


def _side_by_side(
    ours: Thread, theirs: Thread, rounds: int, blocks: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Put and get samples of both, in blocks taking turns, after a warm-up."""
    for thread in (ours, theirs):  # warm up: a thread that has run a while
        for _ in range(50):
            thread.put()
            thread.get()
    puts: dict[str, list[float]] = {"ours": [], "theirs": []}
    gets: dict[str, list[float]] = {"ours": [], "theirs": []}
    per_block = max(rounds // blocks, 1)
    for block in range(blocks):
        order = [("ours", ours), ("theirs", theirs)]
        for name, thread in order if block % 2 == 0 else reversed(order):
            puts[name] += _timed(thread.put, per_block)
            gets[name] += _timed(thread.get, per_block * 5)
    return puts, gets


def _written() -> int:
    """Bytes this process has handed to write calls so far (``wchar``: every pwrite and writev)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar"))


def _cpu_and_bytes(threads: dict[str, Thread], rounds: int, blocks: int) -> dict[str, tuple[float, float]]:
    """CPU time and bytes written per put of each, medians of blocks taking turns.

    CPU is process time, which a busy disk or machine disturbs far less than the
    time a durable put waits; the bytes are what each put's transaction writes.
    """
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in threads}
    per_block = max(rounds // blocks, 1)
    for block in range(blocks):
        order = list(threads.items())
        for name, thread in order if block % 2 == 0 else reversed(order):
            cpu, wrote = time.process_time(), _written()
            for _ in range(per_block):
                thread.put()
            samples[name].append(((time.process_time() - cpu) / per_block, (_written() - wrote) / per_block))
    return {
        name: (statistics.median(s[0] for s in found), statistics.median(s[1] for s in found))
        for name, found in samples.items()
    }


class _Nowhere:
    """A saver that keeps nothing: what is left of a put is the bench making the checkpoint."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return config


def _measured(base: Path, durable: bool, rounds: int, blocks: int) -> dict[str, tuple[float, float]]:
    """:func:`_cpu_and_bytes` of ours and SqliteSaver, each in a new store, synced or not, warmed up."""
    repo = Repo.init(base.with_suffix(".mnemo"), sync=durable)
    connection = sqlite3.connect(base.with_suffix(".sqlite"), check_same_thread=False)
    connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
    threads = {
        "ours": Thread(MnemosyneSaver(repo), "thread-1"),
        "theirs": Thread(SqliteSaver(connection), "thread-1"),
        "neither": Thread(_Nowhere(), "thread-1"),
    }
    for thread in threads.values():
        for _ in range(50):
            thread.put()
    try:
        return _cpu_and_bytes(threads, rounds, blocks)
    finally:
        repo.close()
        connection.close()


def bench_checkpointer_cost(root: Path, rounds: int = 1000, blocks: int = 10) -> None:
    """What a put costs apart from waiting for the disk: its CPU (sync off) and the bytes it writes (durable)."""
    cpu = _measured(root / "cpu", durable=False, rounds=rounds, blocks=blocks)
    written = _measured(root / "bytes", durable=True, rounds=max(rounds // 5, blocks), blocks=blocks)
    (cpu_ours, _), (cpu_theirs, _), (cpu_bench, _) = cpu["ours"], cpu["theirs"], cpu["neither"]
    (_, bytes_ours), (_, bytes_theirs) = written["ours"], written["theirs"]
    label = f"{CHANNELS} channels"
    row(
        "langgraph: CPU of a put (sync off), MnemosyneSaver / SqliteSaver, medians",
        label,
        f"{cpu_ours * 1e6:.0f} / {cpu_theirs * 1e6:.0f} µs = {cpu_ours / cpu_theirs:.2f}",
    )
    row(
        "langgraph: CPU of a put (sync off) less the bench making its checkpoint, MnemosyneSaver / SqliteSaver",
        label,
        f"{(cpu_ours - cpu_bench) * 1e6:.0f} / {(cpu_theirs - cpu_bench) * 1e6:.0f} µs = "
        f"{(cpu_ours - cpu_bench) / (cpu_theirs - cpu_bench):.2f} (the bench's share {cpu_bench * 1e6:.0f} µs)",
    )
    row(
        "langgraph: bytes a durable put writes, MnemosyneSaver / SqliteSaver, medians",
        label,
        f"{bytes_ours / 1024:.0f} / {bytes_theirs / 1024:.0f} KB = {bytes_ours / bytes_theirs:.2f}",
    )


def bench_checkpointer(root: Path, rounds: int = 200, blocks: int = 5) -> None:
    repo = Repo.init(root / "saver.mnemo")
    ours = Thread(MnemosyneSaver(repo), "thread-1")
    connection = sqlite3.connect(root / "saver.sqlite", check_same_thread=False)
    theirs = Thread(SqliteSaver(connection), "thread-1")
    connection.execute("PRAGMA synchronous=FULL")
    puts, gets = _side_by_side(ours, theirs, rounds, blocks)
    mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    sync = connection.execute("PRAGMA synchronous").fetchone()[0]
    assert mode == "wal" and sync == 2, (mode, sync)
    floor = _raw_lmdb_floor(root, rounds)
    repo.close()
    connection.close()
    put_ours, put_theirs = (statistics.median(puts[k]) * 1e6 for k in ("ours", "theirs"))
    get_ours, get_theirs = (statistics.median(gets[k]) * 1e6 for k in ("ours", "theirs"))
    label = f"{CHANNELS} channels"
    row(
        "langgraph: put a checkpoint, MnemosyneSaver / SqliteSaver (WAL, FULL), durable, medians",
        label,
        f"{put_ours:.0f} / {put_theirs:.0f} µs = {put_ours / put_theirs:.2f}",
        "<= 1.5",
        put_ours / put_theirs <= 1.5,
    )
    row(
        "langgraph: get_tuple of the latest, MnemosyneSaver / SqliteSaver, medians",
        label,
        f"{get_ours:.1f} / {get_theirs:.1f} µs = {get_ours / get_theirs:.2f}",
        "<= 1.5",
        get_ours / get_theirs <= 1.5,
    )
    row(
        "langgraph: the floor, a durable LMDB transaction of five 4 KB values / SqliteSaver's put",
        "median",
        f"{floor * 1e6:.0f} / {put_theirs:.0f} µs = {floor * 1e6 / put_theirs:.2f}",
    )


def postgres_savers(server: PgServer, schema: str) -> tuple[Repo, Any, Any]:
    """Ours on a store in ``schema`` and LangGraph's PostgresSaver, set up, on ``server``: (repo, connection, saver)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    repo = Repo.init(server.url(schema))
    connection = psycopg.connect(
        f"host={server.socket} user={server.user} dbname=postgres",
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,  # as PostgresSaver asks
    )
    saver = PostgresSaver(connection)  # type: ignore[arg-type]
    saver.setup()
    return repo, connection, saver


def bench_checkpointer_postgres(rounds: int = 200, blocks: int = 5) -> None:
    """MnemosyneSaver on a PostgreSQL store beside LangGraph's PostgresSaver on the same server."""
    server = PgServer().start()
    try:
        repo, connection, postgres_saver = postgres_savers(server, "saver")
        ours = Thread(MnemosyneSaver(repo), "thread-1")
        theirs = Thread(postgres_saver, "thread-1")
        kv: Any = repo.kv
        measured = []
        for where, client, serving in placements():
            with placed(server.data, client, serving):
                measured.append((where, *_side_by_side(ours, theirs, rounds, blocks)))
        trips_before = kv.round_trips
        ours.put()
        put_trips = kv.round_trips - trips_before
        trips_before = kv.round_trips
        ours.get()
        get_trips = kv.round_trips - trips_before
        synchronous = connection.execute("SHOW synchronous_commit").fetchone()
        fsync = connection.execute("SHOW fsync").fetchone()
        assert synchronous is not None and fsync is not None
        assert (synchronous["synchronous_commit"], fsync["fsync"]) == ("on", "on"), (synchronous, fsync)
        repo.close()
        connection.close()
    finally:
        server.stop()
    label = f"{CHANNELS} channels"
    for where, puts, gets in measured:
        put_ours, put_theirs = (statistics.median(puts[k]) * 1e6 for k in ("ours", "theirs"))
        get_ours, get_theirs = (statistics.median(gets[k]) * 1e6 for k in ("ours", "theirs"))
        row(
            f"langgraph on postgres ({where}): put a checkpoint, MnemosyneSaver / PostgresSaver, same server, medians",
            label,
            f"{put_ours:.0f} / {put_theirs:.0f} µs = {put_ours / put_theirs:.2f}",
            "<= 1.5",
            put_ours / put_theirs <= 1.5,
        )
        row(
            f"langgraph on postgres ({where}): get_tuple of the latest, MnemosyneSaver / PostgresSaver, medians",
            label,
            f"{get_ours:.0f} / {get_theirs:.0f} µs = {get_ours / get_theirs:.2f}",
            "<= 1.5",
            get_ours / get_theirs <= 1.5,
        )
    row(
        "langgraph on postgres: round trips of MnemosyneSaver's put / get_tuple",
        "one each",
        f"{put_trips} / {get_trips}",
    )


class _Counting(httpx.HTTPTransport):
    """The client's transport, counting the requests it sends."""

    sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)

    def trips(self, work: Any) -> int:
        before = self.sent
        work()
        return self.sent - before


TS = Path(__file__).resolve().parent.parent / "clients" / "typescript"


def _typescript_served(url: str, token: str, rounds: int, blocks: int) -> dict[str, float] | str:
    """clients/typescript/bench/checkpointer.ts against a served store: its figures, or why it did not run."""
    tsc = TS / "node_modules" / ".bin" / "tsc"
    if shutil.which("node") is None or not tsc.exists():
        return "node or clients/typescript/node_modules missing (make ts installs them)"
    subprocess.run([str(tsc), "-p", "tsconfig.build.json"], cwd=TS, check=True)
    done = subprocess.run(
        ["node", "dist/bench/checkpointer.js", url, token, str(rounds), str(blocks)],
        cwd=TS,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def bench_checkpointer_served(root: Path, rounds: int = 200, blocks: int = 5) -> None:
    """MnemosyneSaver on a served store (loopback, Python client) beside the local saver and SqliteSaver."""
    path = root / "served-saver"
    Store.init(path).close()
    with Store.open(path) as store:
        token = str(store.create_token("default", "write", name="bench").token)
    server = Served(path)
    counting = _Counting()
    handle = ServedRepo(server.url, token=token, transport=counting)
    local = Repo.init(root / "served-beside.mnemo")
    connection = sqlite3.connect(root / "served-beside.sqlite", check_same_thread=False)
    try:
        served = Thread(MnemosyneSaver(handle), "thread-1")
        ours = Thread(MnemosyneSaver(local), "thread-1")
        theirs = Thread(SqliteSaver(connection), "thread-1")
        connection.execute("PRAGMA synchronous=FULL")
        puts, gets = _side_by_side(served, theirs, rounds, blocks)
        local_puts, local_gets = _side_by_side(served, ours, rounds, blocks)
        put_trips = counting.trips(served.put)
        first_get, get_trips = counting.trips(served.get), counting.trips(served.get)
        typescript = _typescript_served(server.url, token, rounds, blocks)
    finally:
        handle.close()
        local.close()
        connection.close()
        assert server.stop() == 0, server.stderr
    label = f"{CHANNELS} channels"
    put_served, put_theirs = (statistics.median(puts[k]) * 1e6 for k in ("ours", "theirs"))
    get_served, get_theirs = (statistics.median(gets[k]) * 1e6 for k in ("ours", "theirs"))
    put_local, get_local = statistics.median(local_puts["theirs"]) * 1e6, statistics.median(local_gets["theirs"]) * 1e6
    row(
        "langgraph over HTTP (Python client): put, served MnemosyneSaver / SqliteSaver (WAL, FULL), medians",
        label,
        f"{put_served:.0f} / {put_theirs:.0f} µs = {put_served / put_theirs:.2f}",
    )
    row(
        "langgraph over HTTP (Python client): put, served / local MnemosyneSaver, medians",
        label,
        f"{put_served:.0f} / {put_local:.0f} µs = {put_served / put_local:.2f}",
    )
    row(
        "langgraph over HTTP (Python client): get_tuple of the latest, served MnemosyneSaver / SqliteSaver",
        label,
        f"{get_served:.0f} / {get_theirs:.1f} µs = {get_served / get_theirs:.1f}",
    )
    row(
        "langgraph over HTTP (Python client): get_tuple of the latest, served / local MnemosyneSaver",
        label,
        f"{get_served:.0f} / {get_local:.1f} µs = {get_served / get_local:.1f}",
    )
    row(
        "langgraph over HTTP: requests of a served put / get_tuple (right after a put) / get_tuple",
        "one each",
        f"{put_trips} / {first_get} / {get_trips}",
        "1 / 2 / 1",
        (put_trips, first_get, get_trips) == (1, 2, 1),
    )
    if isinstance(typescript, str):
        row("langgraph over HTTP (TypeScript client): not run", label, typescript)
        return
    put_ts, get_ts = typescript["put_us"], typescript["get_us"]
    row(
        "langgraph over HTTP (TypeScript client): put, served MnemosyneSaver / SqliteSaver (WAL, FULL), medians",
        label,
        f"{put_ts:.0f} / {put_theirs:.0f} µs = {put_ts / put_theirs:.2f}",
    )
    row(
        "langgraph over HTTP: put, TypeScript / Python client, same server, one run each, medians",
        label,
        f"{put_ts:.0f} / {put_served:.0f} µs = {put_ts / put_served:.2f}",
    )
    row(
        "langgraph over HTTP (TypeScript client): get_tuple of the latest, served MnemosyneSaver / SqliteSaver",
        label,
        f"{get_ts:.0f} / {get_theirs:.1f} µs = {get_ts / get_theirs:.1f}",
    )
    row(
        "langgraph over HTTP: get_tuple of the latest, TypeScript / Python client, one run each, medians",
        label,
        f"{get_ts:.0f} / {get_served:.0f} µs = {get_ts / get_served:.2f}",
    )
    row(
        "langgraph over HTTP (TypeScript client): requests of a put / get_tuple (right after a put) / get_tuple",
        "one each",
        f"{typescript['put_trips']:.0f} / {typescript['first_get']:.0f} / {typescript['get_trips']:.0f}",
        "1 / 3 / 3",
        (typescript["put_trips"], typescript["first_get"], typescript["get_trips"]) == (1, 3, 3),
    )


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bench_checkpointer(Path(tmp))
        bench_checkpointer_cost(Path(tmp))
        bench_checkpointer_served(Path(tmp))
    bench_checkpointer_postgres()
