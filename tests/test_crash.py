"""Crash safety: a writer killed with SIGKILL at a random moment never leaves a broken store.

Each trial starts ``support/crash_writer.py`` on one shared store (so later trials start
from a store killed before), waits until it has acknowledged a commit, lets it
run a random few milliseconds more and kills it. Then the store must open, pass
fsck, hold every acknowledged commit with the nodes it wrote, and have moved at
most one commit past the last acknowledged one (a commit may land unacknowledged,
never half). ``MNEMO_CRASH_TRIALS`` raises the number of trials;
``MNEMO_CRASH_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import crash_writer, script, script_env
from support.components import unavailable

from mnemosyne import Claim, Node, Repo

pytestmark = pytest.mark.slow  # writers killed with SIGKILL, trial after trial

TRIALS = int(os.environ.get("MNEMO_CRASH_TRIALS", "30"))
SEED = int(os.environ.get("MNEMO_CRASH_SEED", str(random.SystemRandom().randrange(2**32))))
MAX_DELAY = 0.08  # seconds the writer runs after its first acknowledgement, at most


@dataclass
class Trial:
    """What one killed writer acknowledged."""

    number: int
    seed: int
    commits: list[tuple[int, str]] = field(default_factory=list)  # (i, commit id)
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit id
    killed_after: float = 0.0


class Writer:
    """A started writer process, imported and waiting for the word to open the store."""

    def __init__(self, path: Path, number: int, seed: int, errors: Path) -> None:
        self.number, self.seed, self.errors = number, seed, errors
        self.err = errors.open("w")
        self.proc = subprocess.Popen(
            script("crash_writer", str(path), str(number), str(seed)),
            env=script_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.err):
            stream.close()


def run_trial(writer: Writer, rng: random.Random, start_next: Callable[[], None]) -> Trial:
    """Let a writer go, kill it at a random moment after its first acknowledged commit."""
    trial = Trial(writer.number, writer.seed)
    proc = writer.proc
    try:
        assert proc.stdout.readline() == "ready\n", writer.errors.read_text()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        first = proc.stdout.readline()
        assert first.startswith("commit "), (first, writer.errors.read_text())
        start_next()  # the next writer imports while this one runs and while it is checked
        trial.killed_after = rng.uniform(0, MAX_DELAY)
        time.sleep(trial.killed_after)
        os.kill(proc.pid, signal.SIGKILL)
        # through the same buffered reader as the first line: readline may have read ahead
        rest = proc.stdout.read()
        proc.wait(timeout=30)
    finally:
        writer.stop()
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, writer.errors.read_text())
    for line in (first + rest).splitlines():
        parts = line.split()
        # a line cut short by the kill is not an acknowledgement
        if len(parts) == 3 and parts[0] == "commit" and len(parts[1]) == 64:
            trial.commits.append((int(parts[2]), parts[1]))
        elif len(parts) == 3 and parts[0] == "branch" and len(parts[2]) == 64:
            trial.branches[parts[1]] = parts[2]
    assert trial.commits, "the writer acknowledged nothing"
    assert [i for i, _ in trial.commits] == list(range(len(trial.commits)))
    return trial


def expected_writes(trial: Trial, upto: int) -> list[tuple[list, list[str]]]:
    """The puts and removals of commits 0..upto of a trial, replayed from its seed."""
    rng = random.Random(trial.seed)
    return [crash_writer.nodes_for(trial.number, i, rng) for i in range(upto + 1)]


def check_after_crash(path: Path, trial: Trial, history: list[Trial], acked_before: str | None) -> int:
    """Reopen the store and check everything the brief promises; return the log length."""
    context = f"trial {trial.number} (seed {SEED}, killed {trial.killed_after * 1000:.0f} ms after ack)"
    with Repo.open(path) as repo:
        report = repo.fsck()
        assert report.ok, (context, report.problems)

        last_i, last_id = trial.commits[-1]
        tip = repo.resolve("main")
        if tip.id != last_id:
            # one commit may have landed without its acknowledgement; never more, never less
            assert tip.parents == (last_id,), (context, "tip is neither the last ack nor one past it")
            assert tip.message == f"trial {trial.number} commit {last_i + 1}", context
            landed = [*trial.commits, (last_i + 1, tip.id)]
        else:
            landed = list(trial.commits)

        # every commit of this trial holds exactly what the writer put there
        writes = expected_writes(trial, landed[-1][0])
        for i, commit_id in landed:
            commit = repo.resolve(commit_id)
            assert commit.id == commit_id, context
            if i == 0:
                assert commit.parents == ((acked_before,) if acked_before else ()), context
            else:
                assert commit.parents == (landed[i - 1][1],), context
            puts, removals = writes[i]
            for node in puts:
                stored = repo.get(node.id, at=commit_id)
                assert stored is not None and stored.hash == node.hash, (context, i, node.id)
            for gone in removals:
                assert repo.get(gone, at=commit_id) is None, (context, i, gone)
            ids = {n.id for n in repo.nodes(at=commit_id, prefix=f"t{trial.number}/")}
            # notes of commit j survive unless commit j + 2 removed them (j % 5 == 3)
            expected = {f"t{trial.number}/counter"}
            for j in range(i + 1):
                made, _ = writes[j]
                expected |= {n.id for n in made}
                if j >= 2 and j % 5 == 0:
                    expected.discard(f"t{trial.number}/c{j - 2}/n0")
            assert ids == expected, (context, i)

        # the claims of the last commit are queryable (claim index written with the commit)
        claims = [n for n in repo.nodes(at=landed[-1][1], prefix=f"t{trial.number}/claims/")]
        assert all(isinstance(n.content, Claim) for n in claims)
        assert len(claims) == landed[-1][0] // 3 + 1, context
        facts = repo.facts(f"s{trial.number}", at=landed[-1][1])
        assert {f.node.content.predicate for f in facts} == {c.content.predicate for c in claims}, context

        # acknowledged branches exist where they were made; an unacknowledged one points at a landed commit
        branches = dict((name, c.id) for name, c in repo.branch_tips())
        for name, commit_id in trial.branches.items():
            assert branches.get(name) == commit_id, (context, name)
        landed_ids = {c for _, c in landed}
        for name, commit_id in branches.items():
            if name.startswith(f"t{trial.number}/") and name not in trial.branches:
                assert commit_id in landed_ids, (context, name)

        # earlier trials' acknowledged commits are all still there, in one linear history
        log = list(repo.log())
        ids_in_log = [c.id for c in log]
        assert len(set(ids_in_log)) == len(ids_in_log)
        assert ids_in_log[0] == landed[-1][1]
        position = {c: n for n, c in enumerate(ids_in_log)}
        acked_everywhere = [c for t in [*history, trial] for _, c in t.commits]
        assert all(c in position for c in acked_everywhere), context
        assert [position[c] for c in acked_everywhere] == sorted(
            (position[c] for c in acked_everywhere), reverse=True
        ), "acknowledged commits out of order in the log"
        for older in history[-3:]:  # a sample of earlier trials: still readable
            _, commit_id = older.commits[-1]
            assert repo.get(f"t{older.number}/counter", at=commit_id).content == older.commits[-1][0]
        return len(log)


@pytest.fixture(params=["lmdb", "postgres"])
def crash_store(request):
    """Where the writers write, and how many trials: on PostgreSQL the server keeps the
    store and a killed client's transaction is rolled back by it, so fewer trials say as much."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_url"), max(4, TRIALS // 5)
    # On disk even when tmp_path is in RAM: there a writer lands several times the
    # commits before its kill, and the checks of every trial took twice as long.
    return request.getfixturevalue("disk_tmp_path") / "crash.mnemo", TRIALS


def wait_for_the_servers_work(url: str) -> None:
    """Wait until the PostgreSQL server has no session of the store's left.

    A client killed after sending ``COMMIT`` leaves the server finishing it: until its
    session ends, the commit may still land, and a check read before would see the
    store a moment too early (the writer's sessions, ours included, carry the store's
    ``application_name``; the next writer connects only when told to go).
    """
    import psycopg

    conninfo = re.sub(r"[&?]schema=[^&]*", "", url)
    schema = re.search(r"[&?]schema=([^&]*)", url)
    assert schema is not None, url
    deadline = time.monotonic() + 30
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [f"mnemosyne:{schema.group(1)}"],
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            assert time.monotonic() < deadline, "a killed writer's session did not end in 30 s"
            time.sleep(0.005)


def test_sigkill_at_random_moments_never_breaks_the_store(tmp_path, crash_store):
    if not hasattr(signal, "SIGKILL"):
        unavailable("this platform has no SIGKILL")
    rng = random.Random(SEED)
    path, trials = crash_store
    Repo.init(path).close()
    history: list[Trial] = []
    acked_before: str | None = None
    unacked_landings = 0
    log_length = 0
    writers = [Writer(path, 0, rng.randrange(2**32), tmp_path / "writer-0.err")]

    def start_next() -> None:
        number = len(writers)
        if number < trials:
            writers.append(Writer(path, number, rng.randrange(2**32), tmp_path / f"writer-{number}.err"))

    try:
        for number in range(trials):
            trial = run_trial(writers[number], rng, start_next)
            if isinstance(path, str):
                wait_for_the_servers_work(path)
            new_length = check_after_crash(path, trial, history, acked_before)
            assert new_length >= log_length + len(trial.commits)
            log_length = new_length
            with Repo.open(path, readonly=True) as repo:
                tip = repo.resolve("main").id
            if tip != trial.commits[-1][1]:
                unacked_landings += 1
            acked_before = tip
            history.append(trial)
    finally:
        for writer in writers:
            writer.stop()
    # the store stays usable for an ordinary writer after all those kills
    with Repo.open(path) as repo:
        made = repo.commit([Node(id="after/all", content="fine")], message="after the crashes")
        assert made.parents == (acked_before,)
        assert repo.fsck().ok
    print(f"{trials} trials, seed {SEED}, {unacked_landings} unacknowledged commits landed")
