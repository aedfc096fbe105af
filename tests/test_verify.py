"""Verification: re-confirming a memory without a new version, and reading when it was last confirmed.

``Repo.verify`` records a commit whose tree is its parent's (no hash changes) and
whose record time is when the memories were re-confirmed; history, blame, facts
and recall read it from the change index; ``verified_within`` leaves out what was
not confirmed recently enough.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.clocks import Clock

from mnemosyne import Claim, InvalidInput, Node, NotFound, Repo
from mnemosyne.model import codec
from mnemosyne.model.objects import Commit, CommitObject, VerifyingCommitObject, decode_object

DAY = timedelta(days=1)


@pytest.fixture
def clock() -> Clock:
    return Clock(step=timedelta(0))


@pytest.fixture
def repo(clock: Clock):
    with Repo.in_memory(clock=clock) as repo:
        repo.use_embedder(None)
        yield repo


def claim(subject: str, predicate: str, value: str) -> Node:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return Node(
        id=f"claims/{subject}/{predicate}", kind="claim", content=Claim(subject, predicate, value, start)
    )


# -- the stored form ---------------------------------------------------------------


def test_a_commit_that_verifies_nothing_keeps_the_commit_at_1_bytes() -> None:
    plain = CommitObject(bytes(32), (), datetime(2026, 6, 4, tzinfo=UTC), "a", "m")
    data = codec.encode(plain)
    # The released format, byte for byte (as tests/test_objects.py's golden root commit).
    assert data.hex() == (
        "98a8636f6d6d69744031c4200000000000000000000000000000000000000000000000000000000000000000"
        "90d6ff6a20c000a161a16dc090"
    )
    assert codec.object_id(data).hex() == "085a09d0196900a2b270c82e26b03f62c98598769b233f2e8a3f44c73eebff80"
    assert Commit.from_object(b"\0" * 32, plain).verified == ()
    checked = VerifyingCommitObject(bytes(32), (), plain.record_time, "a", "m", None, (), ("x",))
    again = decode_object(codec.encode(checked), b"")
    assert isinstance(again, VerifyingCommitObject) and again.verified == ("x",)
    assert codec.encode(checked)[1:10] == b"\xa8commit@2"


# -- verify ------------------------------------------------------------------------


def test_verify_records_a_commit_without_a_new_version(repo: Repo, clock: Clock) -> None:
    written = repo.commit([Node(id="users/mira/diet", content="vegetarian")], message="learned")
    before = repo.get("users/mira/diet")
    clock.now += 10 * DAY
    checked = repo.verify("users/mira/diet", by="support", note="she confirmed it on the call")
    assert checked.tree == written.tree and checked.parents == (written.id,)
    assert checked.verified == ("users/mira/diet",)
    assert (checked.author, checked.message) == ("support", "she confirmed it on the call")
    assert checked.record_time == written.record_time + 10 * DAY
    assert repo.get("users/mira/diet") == before and repo.get("users/mira/diet").hash == before.hash
    assert repo.resolve("HEAD") == checked
    # Not a change: log --node lists the writes only.
    assert [c.id for c in repo.log(node="users/mira/diet")] == [written.id]
    assert repo.fsck().ok  # the change index matches a rebuild from the commits


def test_blame_and_history_show_the_last_verification_of_each_version(repo: Repo, clock: Clock) -> None:
    first = repo.commit([Node(id="k", content="one")])
    clock.now += DAY
    repo.verify("k", by="a")
    clock.now += DAY
    last_of_first = repo.verify("k", by="b")
    clock.now += DAY
    second = repo.commit([Node(id="k", content="two")])
    assert repo.blame("k").verified is None  # the current version was never re-confirmed
    newest, oldest = repo.history("k")
    assert (newest.commit.id, newest.verified) == (second.id, None)
    assert (oldest.commit.id, oldest.verified) == (first.id, last_of_first)
    clock.now += DAY
    checked = repo.verify("k", by="c")
    blamed = repo.blame("k")
    assert blamed.commit.id == second.id and blamed.verified == checked
    assert repo.history("k")[0].verified == checked


def test_verifying_what_is_not_there_writes_nothing(repo: Repo) -> None:
    with pytest.raises(NotFound, match="no commits"):
        repo.verify("k")
    tip = repo.commit([Node(id="k", content="v"), Node(id="gone", content="x")])
    repo.commit(delete=["gone"])
    tip = repo.resolve("HEAD")
    with pytest.raises(NotFound, match="cannot verify gone"):
        repo.verify("k", "gone")
    with pytest.raises(InvalidInput, match="at least one id"):
        repo.verify()
    with pytest.raises(InvalidInput):
        repo.verify("k", by=3)  # type: ignore[arg-type]
    assert repo.resolve("HEAD") == tip
    several = repo.verify("k", "k")
    assert several.verified == ("k",)


def test_verify_several_at_once_on_a_branch(repo: Repo) -> None:
    repo.commit([Node(id="a", content="1"), Node(id="b", content="2")])
    repo.branch("side")
    checked = repo.verify("b", "a", branch="side")
    assert checked.verified == ("a", "b")
    assert repo.resolve("side") == checked and repo.resolve("main").id != checked.id
    assert repo.blame("a", at="side").verified == checked
    assert repo.blame("a").verified is None  # main never saw it


# -- verified_within ---------------------------------------------------------------


def test_verified_within_leaves_out_what_was_not_confirmed_lately(repo: Repo, clock: Clock) -> None:
    repo.commit([Node(id="notes/diet", content="Mira eats vegetarian food"), claim("mira", "city", "Oslo")])
    repo.commit([Node(id="notes/team", content="Mira works on the food team")])
    clock.now += 40 * DAY
    fresh = repo.commit([Node(id="notes/lunch", content="Mira had food at noon")])
    month = timedelta(days=30)
    assert {h.id for h in repo.search("food", k=10)} == {"notes/diet", "notes/team", "notes/lunch"}
    assert [h.id for h in repo.search("food", k=10, verified_within=month)] == ["notes/lunch"]
    hit = next(h for h in repo.search("food", k=10) if h.id == "notes/lunch")
    assert hit.confirmed_at == fresh.record_time  # shown without the filter too
    assert repo.facts("mira", verified_within=month) == []
    clock.now += DAY
    checked = repo.verify("notes/diet", "claims/mira/city")
    assert {h.id for h in repo.search("food", k=10, verified_within=month)} == {"notes/diet", "notes/lunch"}
    (fact,) = repo.facts("mira", verified_within=month)
    assert fact.confirmed_at == checked.record_time and fact.id == "claims/mira/city"
    built = repo.context("food", verified_within=month)
    assert {item.id for item in built.items} == {"notes/diet", "notes/lunch"}
    assert all(item.confirmed_at is not None for item in built.items)
    # As of before the verification, it had not happened: judged at that time, it is too old.
    before = checked.record_time - timedelta(seconds=1)
    assert [h.id for h in repo.search("food", k=10, as_of=before, verified_within=month)] == ["notes/lunch"]
    assert repo.facts("mira", as_of=before, verified_within=month) == []
    with pytest.raises(InvalidInput, match="verified_within"):
        repo.search("food", verified_within=30)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="verified_within"):
        repo.facts("mira", verified_within=-DAY)


def test_a_verification_on_one_branch_is_not_seen_on_another(repo: Repo, clock: Clock) -> None:
    repo.commit([Node(id="notes/diet", content="Mira eats vegetarian food")])
    repo.branch("b")
    clock.now += 40 * DAY
    repo.verify("notes/diet")
    assert [h.id for h in repo.search("food", verified_within=timedelta(days=30))] == ["notes/diet"]
    assert repo.search("food", at="b", verified_within=timedelta(days=30)) == []
    repo.merge("main", into="b")  # a fast-forward brings the verification along
    assert [h.id for h in repo.search("food", at="b", verified_within=timedelta(days=30))] == ["notes/diet"]


def test_a_merge_that_takes_a_version_does_not_confirm_it(repo: Repo, clock: Clock) -> None:
    repo.commit([Node(id="base", content="x")])
    repo.branch("side")
    side = repo.commit([Node(id="notes/diet", content="Mira eats vegetarian food")], branch="side")
    clock.now += 40 * DAY
    repo.commit([Node(id="other", content="y")])
    merged = repo.merge("side")
    assert merged.commit is not None and len(merged.commit.parents) == 2
    (hit,) = repo.search("vegetarian")
    assert hit.confirmed_at == side.record_time  # when it was written, not when it was merged
    assert repo.search("vegetarian", verified_within=timedelta(days=30)) == []


def test_verification_survives_reindex_and_travels_with_push(tmp_path: Path) -> None:
    clock = Clock(step=timedelta(0))
    with Repo.init(tmp_path / "a.mnemo", clock=clock) as repo:
        repo.commit([Node(id="k", content="v")])
        clock.now += DAY
        checked = repo.verify("k", by="me")
        repo.reindex()
        assert repo.blame("k").verified == checked and repo.fsck().ok
    with Repo.clone(tmp_path / "a.mnemo", tmp_path / "b.mnemo", clock=clock) as copy:
        assert copy.blame("k").verified == checked
        assert copy.history("k")[0].verified == checked
        assert copy.fsck().ok


# -- the command line, as a real process ---------------------------------------------


@pytest.mark.slow
def test_mnemo_verify_and_verified_within_in_a_real_process(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MNEMO_DIR", "MNEMO_AUTHOR")}
    env["MNEMO_EMBEDDER"] = "none"

    def mnemo(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mnemo_cli", "--repo", str(tmp_path / "s"), *args]
        return subprocess.run(command, input=input, capture_output=True, text=True, env=env, timeout=60)

    assert mnemo("init").returncode == 0
    node = '{"id": "users/mira/diet", "content": "Mira eats vegetarian food"}'
    assert mnemo("commit", "-m", "learned", "-", input=node).returncode == 0
    done = mnemo("--json", "verify", "users/mira/diet", "--by", "support", "--note", "asked her")
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)
    assert (checked["verified"], checked["author"], checked["message"]) == (
        ["users/mira/diet"],
        "support",
        "asked her",
    )
    blamed = json.loads(mnemo("--json", "blame", "users/mira/diet").stdout)
    assert blamed["verified"]["id"] == checked["id"]
    assert "verified:" in mnemo("blame", "users/mira/diet").stdout
    hits = mnemo("--json", "search", "vegetarian", "--verified-within", "30d").stdout.splitlines()
    assert [json.loads(line)["confirmed_at"] for line in hits] == [checked["record_time"]]
    # Nothing is confirmed within no time at all, judged now.
    stale = mnemo("search", "vegetarian", "--verified-within", "0s")
    assert (stale.returncode, stale.stdout) == (0, "")
    missing = mnemo("verify", "users/nobody")
    assert (missing.returncode, missing.stderr) == (
        3,
        "error: cannot verify users/nobody: it is not in branch main\n",
    )
    bad = mnemo("search", "vegetarian", "--verified-within", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --verified-within: 'soon' is not a duration")
    level = mnemo("context", "vegetarian", "--max-sensitivity", "top-secret")
    assert level.returncode == 2 and "public, internal, personal, restricted" in level.stderr
    assert mnemo("search", "vegetarian", "--allowed-for", "support", "--max-sensitivity", "internal").stdout
