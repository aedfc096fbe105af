"""Resource limits: a capped map fills up cleanly, a tiny map grows, read-only handles stay read-only.

- A store whose map may not grow past ``max_map_size`` refuses the commit that
  does not fit with ``StorageFull`` (CLI exit 6) and is left exactly as before it.
- From a tiny initial ``map_size`` the map doubles on demand; nobody sees ``MapFullError``.
- ``Repo.open(path, readonly=True)`` reads everything and refuses every write with
  ``InvalidInput``, also while another process keeps committing (and growing the map).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mnemo_cli import state as cli_state
from mnemo_cli.app import app
from support import script, script_env
from typer.testing import CliRunner

from mnemosyne import Claim, InvalidInput, Node, Repo, StorageFull
from mnemosyne.store.kv import lmdb_env

runner = CliRunner()
T0 = datetime(2026, 6, 1, tzinfo=UTC)
KIB = 1024
MIB = 1024 * KIB


def _filler(i: int, size: int = 20 * KIB) -> Node:
    # incompressible-looking, distinct per i, so each commit really takes pages
    return Node(id=f"fill/{i:05d}", content=os.urandom(size // 2).hex())


def _objects(repo: Repo) -> int:
    return repo.fsck().objects


def fill_until_full(repo: Repo, limit: int = 10_000) -> list[str]:
    """Commit ever more data until StorageFull; return the ids of the commits that made it."""
    made: list[str] = []
    for i in range(limit):
        try:
            made.append(repo.commit([_filler(i)], message=f"fill {i}").id)
        except StorageFull as exc:
            assert "nothing was written" in str(exc)
            return made
    raise AssertionError(f"{limit} commits and the capped map never filled up")


# -- a capped map ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_capped_map_fills_up_with_storage_full_and_stays_consistent(tmp_path):
    path = tmp_path / "capped"
    with Repo.init(path, map_size=64 * KIB, max_map_size=1 * MIB) as repo:
        repo.commit(
            [Node(id="keep/claim", kind="claim", content=Claim("mira", "lang", "de", T0))], message="claim"
        )
        made = fill_until_full(repo)
        assert 20 < len(made) < 60  # it grew from 64 KiB to the cap (1 MiB of 20 KiB commits)
        assert repo.kv.env.info()["map_size"] == 1 * MIB
        tip = repo.resolve("HEAD").id
        assert tip == made[-1]
        objects = _objects(repo)
        # the refused commit left nothing behind: not an object, not a ref move
        with pytest.raises(StorageFull):
            repo.commit([_filler(99_999, 200 * KIB)], message="too big")
        assert repo.resolve("HEAD").id == tip
        assert _objects(repo) == objects
        report = repo.fsck()
        assert report.ok, report.problems
        # every earlier commit is readable, with its content
        log = [c.id for c in repo.log()]
        assert log[: len(made)] == made[::-1]
        for n, commit_id in enumerate(made):
            ids = [node.id for node in repo.nodes(at=commit_id, prefix="fill/")]
            assert ids == [f"fill/{i:05d}" for i in range(n + 1)]
        assert repo.facts("mira")[0].node.content.value == "de"
        # ref moves need pages too: branch creation runs until the map is full, then stops cleanly
        created = 0
        with pytest.raises(StorageFull):
            for created in range(5000):
                repo.branch(f"b{created:04d}")
        assert f"b{created:04d}" not in repo.branches()
        assert repo.branches() == sorted(["main", *(f"b{i:04d}" for i in range(created))])
        assert repo.resolve("HEAD").id == tip
        assert repo.fsck().ok
    # a larger cap lets the same store continue
    with Repo.open(path, max_map_size=8 * MIB) as repo:
        assert repo.resolve("HEAD").id == tip
        repo.commit([_filler(77_777, 300 * KIB)], message="room again")
        assert repo.fsck().ok
        assert repo.resolve("HEAD~1").id == tip


def test_storage_full_in_a_merge_and_a_reindex_leaves_the_store_as_it_was(tmp_path):
    path = tmp_path / "capped"
    with Repo.init(path, map_size=64 * KIB, max_map_size=1 * MIB) as repo:
        repo.commit([Node(id="shared", content="base")])
        repo.branch("side")
        repo.commit([Node(id="shared", content="ours")])
        repo.switch("side")
        side = repo.commit([Node(id="shared", content="theirs")]).id
        repo.switch("main")
        fill_until_full(repo)
        tip = repo.resolve("HEAD").id
        objects = _objects(repo)
        # resolving the conflict with a node that cannot fit: the whole merge is refused
        huge = Node(id="shared", content="x" * 400 * KIB)
        with pytest.raises(StorageFull):
            repo.merge("side", resolutions={"shared": huge})
        assert repo.resolve("main").id == tip
        assert repo.resolve("side").id == side
        assert _objects(repo) == objects
        assert repo.fsck().ok
        # a reindex rewrites every index entry: it either fits or changes nothing
        try:
            repo.reindex()
        except StorageFull:
            assert _objects(repo) == objects
        assert repo.fsck().ok
        assert repo.resolve("main").id == tip


def test_the_cli_reports_storage_full_as_exit_6(tmp_path, monkeypatch):
    """The CLI has no option for a map cap, so the test gives its ``Repo.open`` one."""
    path = tmp_path / "capped"
    with Repo.init(path, map_size=64 * KIB, max_map_size=1 * MIB) as repo:
        fill_until_full(repo)
        tip = repo.resolve("HEAD").id
        count = len(list(repo.log()))

    class CappedRepo:
        @staticmethod
        def open(where: Any, **options: Any) -> Repo:
            return Repo.open(where, map_size=64 * KIB, max_map_size=1 * MIB, **options)

    monkeypatch.setattr(cli_state, "Repo", CappedRepo)
    monkeypatch.setenv("MNEMO_AUTHOR", "tester")
    big = '{"id": "big", "content": "%s"}' % ("x" * 300 * KIB)
    result = runner.invoke(app, ["--repo", str(path), "commit", "-m", "too big"], input=big)
    assert result.exit_code == 6, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "full" in result.stderr and "nothing was written" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output
    # reads still work through the same capped CLI, and the store is as it was
    result = runner.invoke(app, ["--repo", str(path), "--json", "log", "-n", "1"])
    assert result.exit_code == 0 and tip in result.stdout
    result = runner.invoke(app, ["--repo", str(path), "fsck"])
    assert result.exit_code == 0, result.output
    with Repo.open(path, readonly=True) as repo:
        assert repo.resolve("HEAD").id == tip
        assert len(list(repo.log())) == count


# -- a map that grows ---------------------------------------------------------------------


def test_the_map_grows_on_demand_from_a_tiny_initial_size(tmp_path, monkeypatch):
    path = tmp_path / "tiny"
    grown_from: list[int] = []
    original = lmdb_env.SharedEnv.grow

    def watch(shared: Any, failed_size: int) -> None:
        grown_from.append(failed_size)  # LMDB said MapFullError; the library grows and retries
        original(shared, failed_size)

    monkeypatch.setattr(lmdb_env.SharedEnv, "grow", watch)
    with Repo.init(path, map_size=32 * KIB) as repo:
        start = repo.kv.env.info()["map_size"]
        assert start <= 64 * KIB
        # many small commits, then one commit far larger than the map (several doublings at once)
        small = [repo.commit([_filler(i, 8 * KIB)]).id for i in range(40)]
        big = Node(id="big", content=os.urandom(2 * MIB).hex())
        repo.commit([big], message="4 MiB in one commit")
        grown = repo.kv.env.info()["map_size"]
        assert grown >= 4 * MIB > start
        assert repo.get("big").content == big.content
        assert [c.id for c in repo.log()][1:] == small[::-1]
        assert repo.fsck().ok
    assert len(grown_from) >= 7  # 32 KiB to 4 MiB is seven doublings, all invisible to the caller
    with Repo.open(path, map_size=32 * KIB) as repo:  # reopening with a tiny map: LMDB takes the file's size
        assert repo.get("big").hash == big.hash
        repo.commit([_filler(1000, 100 * KIB)])
        assert repo.fsck().ok


# -- read-only handles ------------------------------------------------------------------


def _sample_store(path: Path) -> dict[str, Any]:
    with Repo.init(path) as repo:
        first = repo.commit(
            [
                Node(id="users/mira/lang", content="de"),
                Node(id="mira/lang/e1", kind="claim", content=Claim("mira", "lang", "de", T0)),
            ],
            message="first",
        )
        repo.branch("side")
        second = repo.commit([Node(id="users/mira/lang", content="fr")], message="second")
        repo.switch("side")
        repo.commit([Node(id="side/only", content=1)], message="side")
        repo.switch("main")
        return {"first": first.id, "second": second.id}


def test_a_read_only_handle_reads_everything(tmp_path):
    path = tmp_path / "ro"
    ids = _sample_store(path)
    with Repo.open(path, readonly=True) as repo:
        assert repo.readonly
        assert repo.get("users/mira/lang").content == "fr"
        assert repo.get("users/mira/lang", at=ids["first"]).content == "de"
        assert [n.id for n in repo.nodes()] == ["mira/lang/e1", "users/mira/lang"]
        assert [c.id for c in repo.log()] == [ids["second"], ids["first"]]
        assert [v.node.content for v in repo.history("users/mira/lang")] == ["fr", "de"]
        assert repo.blame("users/mira/lang").commit.id == ids["second"]
        assert [c.id for c in repo.diff(ids["first"], ids["second"]).modified] == ["users/mira/lang"]
        assert repo.facts("mira")[0].node.content.value == "de"
        assert len(repo.timeline("mira", "lang")) == 1
        assert repo.branches() == ["main", "side"]
        assert repo.head == "main"
        assert repo.resolve("side~1").id == ids["first"]
        assert repo.is_ancestor(ids["first"], "side")
        assert repo.contradictions() == []
        assert repo.fsck().ok
        assert repo.search("fr", mode="lexical") is not None


def test_a_read_only_handle_refuses_every_write(tmp_path):
    path = tmp_path / "ro"
    ids = _sample_store(path)
    with Repo.open(path) as repo:
        before = (repo.branch_tips(), repo.head, repo.fsck().objects)
    with Repo.open(path, readonly=True) as repo:
        writes = {
            "commit": lambda: repo.commit([Node(id="n", content=1)]),
            "commit --allow-empty": lambda: repo.commit(allow_empty=True),
            "rm": lambda: repo.commit(delete=["users/mira/lang"]),
            "branch": lambda: repo.branch("new"),
            "delete_branch": lambda: repo.delete_branch("side"),
            "switch": lambda: repo.switch("side"),
            "reset": lambda: repo.reset("main", ids["first"]),
            "merge": lambda: repo.merge("side"),
            "revert": lambda: repo.revert(ids["second"]),
            "reindex": lambda: repo.reindex(),
            "forget": lambda: repo.forget("users/mira/lang", reason="test"),
            "forget_expired": lambda: repo.forget_expired(),
            "gc": lambda: repo.gc(grace=timedelta(0)),
            "drop_tenant": lambda: repo.drop_tenant("other"),
            "config": lambda: repo.config("embedder", "none"),
            "reindex_recall": lambda: repo.reindex_recall(),
        }
        refused = []
        for name, write in writes.items():
            try:
                write()
            except InvalidInput as exc:
                if "read-only" in str(exc):  # and says why
                    refused.append(name)
        assert refused == list(writes)
    with Repo.open(path) as repo:
        assert (repo.branch_tips(), repo.head, repo.fsck().objects) == before
    # the CLI's read-only commands open read-only; its writes against a read-only file system are not
    # tested here, but a second tenant cannot be created through a read-only handle either
    with pytest.raises(InvalidInput):
        Repo.open(path, readonly=True, tenant="acme", create=True)


@pytest.mark.slow
def test_a_read_only_handle_follows_a_writer_process_that_grows_the_map(tmp_path, monkeypatch):
    path = tmp_path / "live"
    adopted: list[int] = []
    original = lmdb_env.SharedEnv.adopt_new_size

    def watch(shared: Any) -> None:
        original(shared)
        adopted.append(shared.map_size)  # LMDB said MapResizedError: another process grew the map

    monkeypatch.setattr(lmdb_env.SharedEnv, "adopt_new_size", watch)
    Repo.init(path, map_size=64 * KIB).close()
    errors = (tmp_path / "writer.err").open("w")
    proc = subprocess.Popen(
        script("crash_writer", str(path), "0", "7", str(64 * KIB)),
        env=script_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    try:
        assert proc.stdout.readline() == "ready\n", (tmp_path / "writer.err").read_text()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("commit "), (tmp_path / "writer.err").read_text()
        seen: list[int] = []
        with Repo.open(path, readonly=True, map_size=64 * KIB) as repo:
            map_at_open = repo.kv.env.info()["map_size"]
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                tip = repo.resolve("HEAD")
                i = int(tip.message.rsplit(" ", 1)[1])
                # a consistent snapshot: the tip's tree holds what commit i wrote
                assert repo.get("t0/counter", at=tip.id).content == i
                assert repo.get(f"t0/c{i}/n0", at=tip.id).content["i"] == i
                assert len(list(repo.log(at=tip, limit=5))) == min(5, i + 1)
                assert not seen or i >= seen[-1]
                seen.append(i)
                with pytest.raises(InvalidInput):
                    repo.commit([Node(id="reader/write", content=1)])
            assert repo.fsck().ok
            assert repo.kv.env.info()["map_size"] > map_at_open
        assert seen[-1] > seen[0]  # it saw the writer's new commits through one handle
        assert adopted and adopted[-1] > map_at_open  # and followed the map the writer grew
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        errors.close()
    with Repo.open(path) as repo:
        assert repo.fsck().ok
        assert repo.resolve("HEAD").message == f"trial 0 commit {len(list(repo.log())) - 1}"
