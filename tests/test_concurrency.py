"""Several processes, and several threads, writing one store at once."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading

import pytest
from support import script, script_env

from mnemosyne import Node, RefConflict, Repo, with_retry
from mnemosyne.store import object_store as objectstore

pytestmark = pytest.mark.slow  # processes and threads writing at once, on every backend

PROCESSES = 4


def run_writers(path, mode, count, tmp_path):
    """Start the writers, let them all open the store, then start them at once."""
    go = tmp_path / f"go-{mode}"
    procs = [
        subprocess.Popen(
            script("writer_proc", mode, str(path), str(worker), str(count), str(go)),
            env=script_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(PROCESSES)
    ]
    try:
        for proc in procs:
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read()
        go.write_text("go")
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(params=["lmdb", "postgres"])
def location(request, tmp_path):
    """Where the processes' store is: a directory, or a schema on the test server."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return tmp_path / "store"


def test_plain_commits_from_many_processes_are_never_lost(location, tmp_path):
    count = 30
    path = location
    # a small map, so processes also grow it under each other's feet
    Repo.init(path, map_size=64 * 1024).close()
    results = run_writers(path, "plain", count, tmp_path)
    assert results == [{"commits": count}] * PROCESSES
    with Repo.open(path) as repo:
        log = list(repo.log())
        assert len(log) == PROCESSES * count
        assert len({c.id for c in log}) == len(log)
        # one linear chain: each commit's parent is the next one in the log
        for newer, older in itertools.pairwise(log):
            assert newer.parents == (older.id,)
            assert newer.record_time > older.record_time
        assert log[-1].parents == ()
        # every put is readable at the tip, with the content its writer gave it
        nodes = {n.id: n.content for n in repo.nodes()}
        assert len(nodes) == PROCESSES * count
        for worker in range(PROCESSES):
            for j in range(count):
                content = nodes[f"w{worker}/n{j:03d}"]
                assert (content["worker"], content["j"]) == (worker, j)
        # each writer's own commits kept their order
        for worker in range(PROCESSES):
            mine = [int(c.message.split(":")[1]) for c in reversed(log) if c.author == f"w{worker}"]
            assert mine == list(range(count))
        assert repo.fsck().ok


def test_read_modify_write_with_retry_across_processes(location, tmp_path):
    per_process = 50
    path = location
    with Repo.init(path) as repo:
        repo.commit([Node(id="counter", content=0)], message="start")
    results = run_writers(path, "counter", per_process, tmp_path)
    assert all("error" not in r for r in results), results
    assert sum(r["attempts"] for r in results) >= PROCESSES * per_process
    with Repo.open(path) as repo:
        total = PROCESSES * per_process
        assert repo.get("counter").content == total
        log = list(repo.log())
        assert len(log) == total + 1
        # every commit moved the counter by exactly one: no increment was lost or doubled
        versions = repo.history("counter")
        assert [v.node.content for v in versions] == list(range(total, -1, -1))
        assert [v.commit.id for v in versions] == [c.id for c in log]


@pytest.fixture(params=["memory", "lmdb", "postgres"])
def shared_repo(request, tmp_path):
    if request.param == "memory":
        repo = Repo.in_memory()
    elif request.param == "postgres":
        repo = Repo.init(request.getfixturevalue("pg_url"), sync=False)
    else:
        repo = Repo.init(tmp_path / "store", map_size=64 * 1024, sync=False)
    yield repo
    repo.close()


def test_threads_share_one_repo(shared_repo):
    repo = shared_repo
    repo.commit([Node(id=f"pair/{k}", content=0) for k in "ab"] + [Node(id="counter", content=0)])
    errors = []
    stop = threading.Event()

    def writer(worker):
        # every commit keeps pair/a == pair/b and adds one node of its own
        try:
            for j in range(40):
                value = worker * 1000 + j
                repo.commit(
                    [
                        Node(id="pair/a", content=value),
                        Node(id="pair/b", content=value),
                        Node(id=f"own/{worker}/{j:03d}", content="x" * 500),
                    ]
                )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def incrementer():
        def bump():
            tip = repo.resolve("HEAD")
            value = repo.get("counter", at=tip.id).content
            return repo.commit([Node(id="counter", content=value + 1)], parent=tip.id)

        try:
            for _ in range(25):
                with_retry(bump, attempts=1000, base_delay=0.0001, max_delay=0.005)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            while not stop.is_set():
                tip = repo.resolve("HEAD")
                snapshot = {n.id: n.content for n in repo.nodes(at=tip.id)}
                assert snapshot["pair/a"] == snapshot["pair/b"]
                assert repo.get("pair/a", at=tip.id).content == repo.get("pair/b", at=tip.id).content
                log = list(repo.log(limit=5))
                assert log[0].id == tip.id or log[0].record_time > tip.record_time
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    writers += [threading.Thread(target=incrementer) for _ in range(4)]
    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(120)
    stop.set()
    for t in readers:
        t.join(30)
    assert errors == []
    assert repo.get("counter").content == 100
    own = [n.id for n in repo.nodes(prefix="own/")]
    assert len(own) == 3 * 40
    assert len(list(repo.log())) == 1 + 3 * 40 + 100
    assert repo.fsck().ok


def test_refused_commits_do_not_stall_behind_busy_readers(tmp_path):
    # Every refused commit (RefConflict, NotFound) and every map growth
    # aborts an LMDB write transaction. py-lmdb 3 makes that abort wait until no other
    # thread of the process is inside an LMDB call, which busy readers can postpone forever.
    repo = Repo.init(tmp_path / "store", map_size=64 * 1024, sync=False)
    c1 = repo.commit([Node(id="n", content=0)])
    repo.commit([Node(id="n", content=1)])
    stop = threading.Event()
    outcomes = []

    def reader():
        while not stop.is_set():
            repo.get("n")
            list(repo.nodes())

    def writer():
        try:
            for i in range(10):
                try:
                    repo.commit([Node(id="n", content=i + 10)], parent=c1.id)
                except RefConflict:
                    outcomes.append("refused")
                # and some that fill the map and make it grow
                repo.commit([Node(id=f"big/{i}", content="x" * 20000)])
                outcomes.append("written")
        except Exception as exc:  # pragma: no cover - reported below
            outcomes.append(exc)

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
    for t in readers:
        t.start()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    thread.join(20)
    finished = not thread.is_alive()
    stop.set()
    for t in readers:
        t.join(30)
    thread.join(30)
    try:
        assert finished, f"the writer stalled after {outcomes}"
        assert outcomes == ["refused", "written"] * 10
    finally:
        repo.close()


def test_threads_evicting_the_object_cache_at_once(monkeypatch):
    # Two threads filling the bounded commit/chunk cache used to evict the same entries
    # and fail with KeyError. A tiny cache and a tiny switch interval make that likely.
    monkeypatch.setattr(objectstore, "CACHE_ENTRIES", 8)
    repo = Repo.in_memory()
    for i in range(60):
        repo.commit([Node(id=f"n{i}", content=i)])
    commits = [c.id for c in repo.log()]
    errors = []

    def reader():
        try:
            for _ in range(60):
                for commit in commits[::7]:
                    assert len(list(repo.log(at=commit, limit=3))) == 3
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_the_postgres_read_ahead_learns_from_threads_at_once():
    """A served store's worker threads end transactions at once, each teaching the read-ahead.

    Unlocked, one thread's ``appendleft`` met another's walk over the last
    transactions' questions: "deque mutated during iteration", a 500 under load.
    """
    from mnemosyne.store.kv.base import Space
    from mnemosyne.store.kv.postgres_ahead import QUESTIONS, Get, ReadAhead

    ahead = ReadAhead({space: f'"{space}"' for space in Space}, "SELECT 0")
    kinds = [tuple(Get(Space.REFS, f"{kind}/{n}".encode()) for n in range(QUESTIONS)) for kind in range(6)]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def learner(number: int) -> None:
        start.wait()
        try:
            for step in range(3_000):
                ahead.learn(kinds[(number + step) % len(kinds)])
        except Exception as exc:  # reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=learner, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(ahead.opening.questions) == QUESTIONS
