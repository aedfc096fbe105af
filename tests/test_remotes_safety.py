"""Remotes that protect what they touch (issue 22, items 7, 8 and 16).

A pull (or merge) of a history with no commit in common is refused unless asked
for; a pull says what its fetch brought, then what its merge did, and nothing
that is not so; a clone killed part-way is finished by running it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.cli_harness import CliStore, assert_error, invoke
from support.clocks import Clock
from support.components import unavailable

from mnemosyne import InvalidInput, MnemoError, Node, Repo, Store


def note(node_id: str, content: object) -> Node:
    return Node(id=node_id, content=content)


@pytest.fixture
def theirs(tmp_path: Path) -> Path:
    """Another agent's store: a history unrelated to any other."""
    with Repo.init(tmp_path / "theirs.mnemo", clock=Clock()) as repo:
        repo.commit([note("users/ola/lang", "pl")], message="t1", author="agent-9")
        repo.commit([note("users/ola/city", "Gdansk")], message="t2", author="agent-9")
    return tmp_path / "theirs.mnemo"


def tip_of(location: Path, branch: str = "main", tenant: str = "default") -> str | None:
    with Repo.open(location, tenant=tenant, readonly=True) as repo:
        return repo.tip(branch)


# -- 7: unrelated histories ------------------------------------------------------------------


def test_a_pull_of_an_unrelated_history_is_refused_and_the_branch_does_not_move(theirs, tmp_path):
    with Repo.init(tmp_path / "mine.mnemo", clock=Clock()) as mine:
        mine.commit([note("users/mira/lang", "de")], message="m1", author="agent-7")
        mine.store.add_remote("pg1", theirs)  # a mistyped remote: another agent's memory
        before = (mine.tip("main"), [c.id for c in mine.log()], sorted(n.id for n in mine.nodes()))
        with pytest.raises(InvalidInput, match="refusing to merge unrelated histories: pg1/main and main"):
            mine.pull("pg1", "main", author="agent-7")
        with pytest.raises(InvalidInput, match="unrelated"):  # a strategy is no permission
            mine.pull("pg1", "main", strategy="theirs", author="agent-7")
        assert (mine.tip("main"), [c.id for c in mine.log()], sorted(n.id for n in mine.nodes())) == before
        # The fetch stands, as git keeps it: the tracking ref, and the history it names.
        assert mine.resolve("pg1/main").id == tip_of(theirs)
        assert mine.fsck().ok
        joined = mine.pull("pg1", "main", allow_unrelated_histories=True, author="agent-7").merge
        assert joined.commit is not None and joined.commit.parents == (before[0], tip_of(theirs))
        assert sorted(n.id for n in mine.nodes()) == ["users/mira/lang", "users/ola/city", "users/ola/lang"]
        # Joined once, they are related: a later pull needs no permission.
        with Repo.open(theirs, clock=Clock()) as other:
            other.commit([note("users/ola/pet", "dog")], message="t3", author="agent-9")
        assert mine.pull("pg1", "main", author="agent-7").merge.commit is not None
        assert mine.get("users/ola/pet") is not None and mine.fsck().ok


def test_a_branch_with_no_commits_yet_pulls_any_history(theirs, tmp_path):
    with Repo.init(tmp_path / "new.mnemo", clock=Clock()) as new:
        new.store.add_remote("origin", theirs)
        merged = new.pull(author="agent-7").merge
        assert merged.fast_forward and new.tip("main") == tip_of(theirs)


def test_merge_refuses_unrelated_histories_unless_allowed_and_the_flag_must_be_a_bool(tmp_path):
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit([note("a", 1)], message="a")
        repo.branch("other", orphan=True)
        repo.commit([note("b", 2)], message="b", branch="other")
        tip = repo.tip("main")
        with pytest.raises(InvalidInput, match="have no commit in common"):
            repo.merge("other")
        for bad in ("yes", 1, None):
            with pytest.raises(InvalidInput, match="allow_unrelated_histories"):
                repo.merge("other", allow_unrelated_histories=bad)  # type: ignore[arg-type]
        assert repo.tip("main") == tip and repo.fsck().ok
        merged = repo.merge("other", allow_unrelated_histories=True)
        assert merged.commit is not None and merged.commit.parents == (tip, repo.tip("other"))
        repo.branch("side")  # related histories merge as before, the flag or not
        repo.commit([note("c", 3)], message="c", branch="side")
        assert repo.merge("side").fast_forward


def test_a_pull_given_a_flag_that_is_no_bool_fetches_nothing(theirs, tmp_path):
    with Repo.init(tmp_path / "mine.mnemo", clock=Clock()) as mine:
        mine.store.add_remote("pg1", theirs)
        with pytest.raises(InvalidInput, match="allow_unrelated_histories"):
            mine.pull("pg1", allow_unrelated_histories="yes")  # type: ignore[arg-type]
        assert mine.remote_branches() == []


def test_cli_pull_and_merge_refuse_unrelated_histories_in_one_line(theirs, tmp_path):
    mine = CliStore(tmp_path / "mine.mnemo")
    mine.put({"id": "users/mira/lang", "content": "de"}, message="m1")
    mine.ok("remote", "add", "pg1", str(theirs))
    log = mine.ok("log", "--oneline")
    assert_error(mine.run("pull", "pg1", "main"), 2, "refusing to merge unrelated histories")
    assert mine.ok("log", "--oneline") == log
    assert_error(mine.run("merge", "pg1/main"), 2, "--allow-unrelated-histories")
    assert mine.ok("log", "--oneline") == log
    out = mine.ok("pull", "pg1", "main", "--allow-unrelated-histories", "--author", "tester")
    assert out.splitlines()[-1].endswith("Merge pg1/main into main")
    for command in ("pull", "merge"):
        assert "--allow-unrelated-histories" in mine.ok(command, "--help")


# -- 8: what a pull says ---------------------------------------------------------------------


def test_a_pull_after_a_fetch_says_only_what_the_merge_did(tmp_path):
    origin = CliStore(tmp_path / "origin.mnemo")
    origin.put({"id": "k", "content": "1"}, message="one")
    cloned = invoke("clone", str(origin.path), str(tmp_path / "b.mnemo"), "--author", "tester")
    assert cloned.exit_code == 0, cloned.output
    clone = CliStore(tmp_path / "b.mnemo")
    start = tip_of(clone.path)
    assert start is not None
    second = origin.put({"id": "k", "content": "2"}, message="two")
    assert "origin/main" in clone.ok("fetch", "--author", "tester")
    said = [f"Updating {start[:7]}..{second[:7]}", f"Fast-forward: main is now at {second[:7]} two"]
    assert clone.ok("pull", "--author", "tester").splitlines() == said  # not "Already up to date" first
    assert clone.ok("pull", "--author", "tester") == "Already up to date.\n"
    # A pull whose fetch brings something says both, in that order.
    third = origin.put({"id": "k", "content": "3"}, message="three")
    lines = clone.ok("pull", "--author", "tester").splitlines()
    assert lines[0] == f"From {origin.path.resolve()}" and lines[-1].endswith(f"{third[:7]} three")
    assert not any(line.startswith("Already up to date") for line in lines)
    # fetch alone still says when nothing came.
    assert clone.ok("fetch", "--author", "tester") == "Already up to date with origin.\n"


# -- 16: an interrupted clone ----------------------------------------------------------------

KILLED_CLONE = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import UTC, datetime

    from mnemosyne import Repo

    source, path, dies_at, tenants = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    readings = 0

    def clock():
        # A clone reads its clock once before each tenant's fetch and once before each
        # check-out: at reading number dies_at this process is SIGKILLed, as a crash takes it.
        global readings
        readings += 1
        if readings == dies_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return datetime.now(UTC)

    Repo.clone(source, path, all_tenants=tenants == "all", clock=clock, author="cloner").close()
    """
)


def killed_clone(source: Path, path: Path, dies_at: int, *, all_tenants: bool = False) -> None:
    """Run a clone in a child process that SIGKILLs itself at its ``dies_at``-th clock reading."""
    if not hasattr(signal, "SIGKILL"):
        unavailable("this platform has no SIGKILL")
    args = [str(source), str(path), str(dies_at), "all" if all_tenants else "one"]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_CLONE, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr)


def as_cloned(source: Path, path: Path, tenant: str = "default") -> None:
    """``path`` holds the finished clone of ``source``'s ``tenant``: every branch, checked out."""
    with Repo.open(source, tenant=tenant, readonly=True) as src, Repo.open(path, tenant=tenant) as repo:
        assert repo.store.unfinished_clone is None
        assert [(n, c.id) for n, c in repo.remote_branches()] == [
            (f"origin/{n}", c.id) for n, c in src.branch_tips()
        ]
        assert repo.head == src.head and repo.tip(repo.head) == src.tip(src.head)
        assert [n.id for n in repo.nodes()] == [n.id for n in src.nodes()]
        assert repo.fsck().ok


@pytest.fixture
def source(tmp_path: Path) -> Path:
    with Repo.init(tmp_path / "source.mnemo", clock=Clock()) as repo:
        repo.commit([note("users/mira/lang", "de"), note("users/mira/city", "Berlin")], message="m1")
        repo.commit([note("users/mira/lang", "fr")], message="m2")
        repo.branch("review/run-1")
        repo.commit([note("users/mira/pet", "cat")], branch="review/run-1", message="r1")
    return tmp_path / "source.mnemo"


@pytest.mark.slow
@pytest.mark.parametrize("dies_at", [1, 2], ids=["before-the-fetch", "before-the-check-out"])
def test_a_clone_killed_part_way_says_so_and_running_it_again_finishes_it(source, tmp_path, dies_at):
    path = tmp_path / "clone.mnemo"
    killed_clone(source, path, dies_at)
    # The store says it is unfinished: to Python, to fsck, and on every command.
    with Store.open(path) as store:
        assert store.unfinished_clone == f"{source.resolve()} (tenant 'default')"
    with Repo.open(path) as repo:
        report = repo.fsck()
        assert not report.ok and any("unfinished clone" in p.message for p in report.problems)
    logged = CliStore(path).run("log")
    assert logged.exit_code == 0 and "warning: " in logged.stderr and "unfinished clone" in logged.stderr
    checked = CliStore(path).run("fsck")
    assert checked.exit_code == 1 and "unfinished clone" in checked.stdout
    # Only the same clone finishes it.
    other = tmp_path / "other.mnemo"
    Repo.init(other).close()
    unfinished = r"is an unfinished clone of .*source\.mnemo \(tenant 'default'\)"
    for wrong in ({"source": other}, {"source": source, "all_tenants": True}):
        with pytest.raises(InvalidInput, match=unfinished):
            Repo.clone(wrong.pop("source"), path, **wrong)  # type: ignore[arg-type]
    finished = invoke("clone", str(source), str(path))
    assert finished.exit_code == 0, finished.output
    as_cloned(source, path)
    assert CliStore(path).run("log").stderr == ""
    assert_error(invoke("clone", str(source), str(path)), 2, "a store already exists")  # finished: a store


@pytest.mark.slow
def test_a_resumed_clone_never_drops_a_commit_made_in_the_unfinished_store(source, tmp_path):
    with Store.open(source) as store:
        store.create_tenant("acme")
        Repo.open(store, tenant="acme", clock=Clock()).commit([note("acme/k", "v1")], message="a1")
    path = tmp_path / "clone.mnemo"
    killed_clone(source, path, 3, all_tenants=True)  # acme cloned and checked out, default not yet
    with Repo.open(path, tenant="acme", clock=Clock()) as acme:
        assert acme.tip("main") == tip_of(source, tenant="acme")
        mine = acme.commit([note("acme/mine", "x")], message="made meanwhile").id
    with Repo.open(source, tenant="acme", clock=Clock()) as upstream:
        moved = upstream.commit([note("acme/k", "v2")], message="a2").id
    Repo.clone(source, path, all_tenants=True).close()
    with Repo.open(path, tenant="acme") as acme:
        assert acme.tip("main") == mine  # not moved to theirs: that would drop our commit
        assert acme.resolve("origin/main").id == moved and acme.fsck().ok
        assert acme.store.unfinished_clone is None
    as_cloned(source, path)


def test_a_clone_fills_a_store_holding_nothing_yet_and_refuses_one_holding_anything(source, tmp_path):
    Repo.init(tmp_path / "empty.mnemo").close()  # also what a clone killed before its first record leaves
    Repo.clone(source, tmp_path / "empty.mnemo").close()
    as_cloned(source, tmp_path / "empty.mnemo")
    with Repo.init(tmp_path / "busy.mnemo", clock=Clock()) as busy:
        busy.commit([note("k", "v")], message="mine")
        tip = busy.tip("main")
    with Store.init(tmp_path / "configured.mnemo") as configured:
        configured.add_remote("elsewhere", source)
    for taken in ("busy.mnemo", "configured.mnemo"):
        with pytest.raises(InvalidInput, match="a store already exists"):
            Repo.clone(source, tmp_path / taken)
    assert tip_of(tmp_path / "busy.mnemo") == tip
    with Repo.open(tmp_path / "configured.mnemo") as configured_repo:
        assert configured_repo.remote_branches() == [] and configured_repo.store.unfinished_clone is None


@pytest.mark.slow
def test_mnemo_clone_sigkilled_while_it_copies_is_finished_by_the_same_command(tmp_path):
    if not hasattr(signal, "SIGKILL"):
        unavailable("this platform has no SIGKILL")
    source = tmp_path / "big.mnemo"
    with Repo.init(source, clock=Clock()) as repo:
        for round_ in range(3):  # enough that copying takes a while after the store appears
            repo.commit([note(f"n/{round_}/{i}", f"value {round_} {i} " * 4) for i in range(2000)])
    path = tmp_path / "clone.mnemo"
    env = {**os.environ, "MNEMO_AUTHOR": "tester", "MNEMO_EMBEDDER": "none"}
    command = [sys.executable, "-m", "mnemo_cli", "clone", str(source), str(path)]
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while child.poll() is None and time.monotonic() < deadline:
        try:  # the store names its origin: the copying starts now
            with Store.open(path, readonly=True) as store:
                if store.remotes():
                    break
        except MnemoError:
            pass
        time.sleep(0.002)
    time.sleep(0.1)  # into the copying (a few tenths of a second here), then the kill
    child.send_signal(signal.SIGKILL)
    child.wait()
    with Store.open(path, readonly=True) as store:
        finished = store.unfinished_clone is None  # marked since origin appeared, until the clone's end
    if child.returncode == 0 or finished:  # it finished first (a fast machine): nothing to resume
        as_cloned(source, path)
        return
    assert child.returncode == -signal.SIGKILL
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    as_cloned(source, path)


@pytest.mark.parametrize("stops_at", [1, 2], ids=["before-the-fetch", "before-the-check-out"])
def test_a_clone_interrupted_part_way_keeps_its_store_for_a_rerun(source, tmp_path, stops_at):
    path = tmp_path / "clone.mnemo"
    readings = 0

    def clock() -> datetime:
        # Ctrl-C lands while the clone works: at its stops_at-th clock reading.
        nonlocal readings
        readings += 1
        if readings == stops_at:
            raise KeyboardInterrupt
        return datetime.now(UTC)

    with pytest.raises(KeyboardInterrupt):
        Repo.clone(source, path, clock=clock, author="cloner")
    with Store.open(path) as store:  # kept, as SIGTERM or SIGKILL leave it
        assert store.unfinished_clone == f"{source.resolve()} (tenant 'default')"
    Repo.clone(source, path, author="cloner").close()
    as_cloned(source, path)


@pytest.mark.slow
def test_mnemo_clone_stopped_by_ctrl_c_says_what_it_kept_and_the_same_command_finishes_it(tmp_path):
    source = tmp_path / "big.mnemo"
    with Repo.init(source, clock=Clock()) as repo:
        for round_ in range(3):  # enough that copying takes a while after the store appears
            repo.commit([note(f"n/{round_}/{i}", f"value {round_} {i} " * 4) for i in range(2000)])
    path = tmp_path / "clone.mnemo"
    env = {**os.environ, "MNEMO_AUTHOR": "tester", "MNEMO_EMBEDDER": "none"}
    command = [sys.executable, "-m", "mnemo_cli", "clone", str(source), str(path)]
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while child.poll() is None and time.monotonic() < deadline:
        try:  # the store names its origin: the copying starts now
            with Store.open(path, readonly=True) as store:
                if store.remotes():
                    break
        except MnemoError:
            pass
        time.sleep(0.002)
    # Ctrl-C at once: the copying has begun, and takes a few tenths of a second more
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    with Store.open(path, readonly=True) as store:
        finished = store.unfinished_clone is None
    if child.returncode == 0 or finished:  # it finished first (a fast machine): nothing to resume
        as_cloned(source, path)
        return
    assert child.returncode == 130, stderr
    (line,) = stderr.strip().splitlines()
    assert line == (
        f"interrupted: {path} is kept as an unfinished clone of {source.resolve()} (tenant 'default'): "
        "run the same clone again to finish it"
    )
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    as_cloned(source, path)
