"""Remotes: clone, fetch, pull and push between stores, by hash, with erasure travelling along."""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from support.clocks import Clock
from support.components import unavailable
from support.tiers import examples

from mnemosyne import (
    Claim,
    InvalidInput,
    Node,
    NotFound,
    Redacted,
    RefConflict,
    Repo,
    Store,
    to_json,
)
from mnemosyne.admin import transfer
from mnemosyne.store.kv.base import Space
from mnemosyne.store.prolly import EMPTY_ID

CANARY = "C4NARY-7Q9X-passport"


def note(node_id: str, content: object) -> Node:
    return Node(id=node_id, content=content)


def objects_of(repo: Repo) -> set[bytes]:
    """Every stored object id of the handle's tenant (a test's view of the keyspace)."""
    with repo.store.kv.read() as txn:
        return {key[4:] for key, _ in txn.scan(Space.OBJECTS, b"\x00\x00\x00\x00")}


@pytest.fixture
def origin(tmp_path: Path) -> Repo:
    repo = Repo.init(tmp_path / "origin.mnemo", clock=Clock())
    repo.commit([note("users/mira/lang", "de"), note("users/mira/city", "Berlin")], message="m1", author="a")
    repo.commit([note("users/mira/lang", "fr")], message="m2", author="a")
    repo.branch("review/run-1")
    repo.commit([note("users/mira/pet", "cat")], branch="review/run-1", message="r1", author="a")
    yield repo
    repo.close()


# -- clone, fetch, push, pull ------------------------------------------------------------


def test_clone_brings_every_branch_as_tracking_refs_and_checks_out_the_current_one(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "clone.mnemo", clock=Clock()) as clone:
        assert clone.store.remotes()[0].name == "origin"
        assert clone.store.remotes()[0].location == str((tmp_path / "origin.mnemo").resolve())
        assert [name for name, _ in clone.remote_branches()] == ["origin/main", "origin/review/run-1"]
        assert clone.head == "main" and clone.branches() == ["main"]
        assert clone.resolve("main").id == origin.resolve("main").id
        assert clone.resolve("origin/review/run-1").id == origin.resolve("review/run-1").id
        assert clone.get("users/mira/lang").content == "fr"
        assert [v.node.content for v in clone.history("users/mira/lang")] == ["fr", "de"]
        # Exactly the objects the source has (a history of notes has no derived chunks).
        assert objects_of(origin) - objects_of(clone) <= {EMPTY_ID}  # kept by origin's first commit
        assert objects_of(clone) <= objects_of(origin)
        assert clone.fsck().ok
    # A clone into a place that holds something fails and leaves it as it was.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(InvalidInput):
        Repo.clone(tmp_path / "origin.mnemo", tmp_path / "busy")
    assert os.listdir(tmp_path / "busy") == ["file"]
    with pytest.raises(NotFound):
        Repo.clone(tmp_path / "nowhere", tmp_path / "c2")
    assert not (tmp_path / "c2").exists()


def test_push_fast_forwards_and_a_noop_transfer_sends_nothing(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo", clock=Clock()) as b:
        made = b.commit([note("users/mira/lang", "en")], message="b1", author="b")
        report = b.push(author="b")
        (part,) = report.tenants
        assert (report.kind, part.commits, part.objects) == ("push", 1, 3)  # commit, root chunk, node
        (update,) = part.refs
        assert (update.ref, update.new, update.forced) == ("main", made.id, False)
        assert origin.resolve("main").id == made.id
        assert origin.get("users/mira/lang").content == "en"
        assert b.resolve("origin/main").id == made.id  # the tracking ref follows the push
        again = b.push(author="b").tenants[0]
        assert (again.commits, again.objects, again.refs) == (0, 0, [])
        fetched = b.fetch().tenants[0]
        assert (fetched.commits, fetched.objects, fetched.refs) == (0, 0, [])
        # The push is in the remote's reflog, so as-of reads there stay honest.
        assert origin.resolve("main", as_of=origin.now()).id == made.id
        assert origin.fsck().ok and b.fsck().ok


def test_push_refuses_a_non_fast_forward_unless_forced(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo", clock=Clock()) as b:
        theirs = origin.commit([note("x", "origin's")], message="o", author="a")
        mine = b.commit([note("x", "mine")], message="b", author="b")
        with pytest.raises(RefConflict, match="pull"):
            b.push()
        assert origin.resolve("main").id == theirs.id
        forced = b.push(force=True).tenants[0].refs[0]
        assert forced.forced and origin.resolve("main").id == mine.id
        assert origin.fsck().ok


def test_pull_fast_forwards_merges_and_stops_on_conflicts(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo", clock=Clock()) as b:
        origin.commit([note("users/mira/pet", "dog")], message="o1", author="a")
        pulled = b.pull()
        assert pulled.merge.fast_forward and b.get("users/mira/pet").content == "dog"
        origin.commit([note("users/mira/lang", "it")], message="o2", author="a")
        b.commit([note("users/mira/lang", "es")], message="b2", author="b")
        before = b.resolve("main").id
        stopped = b.pull()
        assert stopped.merge.commit is None and [c.id for c in stopped.merge.conflicts] == ["users/mira/lang"]
        assert b.resolve("main").id == before  # nothing merged; the fetch stands
        assert b.resolve("origin/main").id == origin.resolve("main").id
        merged = b.pull(strategy="theirs", author="b")
        assert merged.merge.commit is not None and len(merged.merge.commit.parents) == 2
        assert b.get("users/mira/lang").content == "it"
        b.push()
        assert origin.resolve("main").id == b.resolve("main").id


def test_pull_reports_contradictions_and_derived_indexes_catch_up(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo", clock=Clock(), author="b") as b:
        b.use_embedder("none")
        claim = Claim("mira", "city", "Berlin", valid_from=datetime(2026, 6, 1, tzinfo=UTC))
        origin.commit([Node(id="claims/a", kind="claim", content=claim)], message="o", author="a")
        other = Claim("mira", "city", "Lisbon", valid_from=datetime(2026, 6, 2, tzinfo=UTC))
        b.commit([Node(id="claims/b", kind="claim", content=other)], message="b", author="b")
        result = b.pull().merge
        assert [(c.subject, c.predicate) for c in result.contradictions] == [("mira", "city")]
        assert len(b.contradictions()) == 1
        # The claim index, the change index and recall were built here, not copied.
        assert [f.node.content.value for f in b.facts("mira", "city", valid_at="2026-06-01T12:00:00Z")] == [
            "Berlin"
        ]
        assert b.blame("claims/a").commit.author == "a"
        assert "claims/a" in [h.id for h in b.search("Berlin", mode="lexical")]
        assert b.fsck().ok


def test_fetch_prunes_tracking_refs_and_remote_names_resolve_like_git(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo", clock=Clock()) as b:
        tracked = b.resolve("origin/review/run-1").id
        assert b.resolve("refs/remotes/origin/review/run-1").id == tracked
        assert b.resolve(f"origin/review/run-1@{{{b.now().isoformat()}}}").id == tracked
        # A local branch of the same name wins; the full name still reaches the tracking ref.
        b.branch("origin/review/run-1", at="HEAD")
        assert b.resolve("origin/review/run-1").id == b.resolve("main").id != tracked
        assert b.resolve("refs/remotes/origin/review/run-1").id == tracked
        origin.delete_branch("review/run-1")
        (part,) = b.fetch().tenants
        assert [(u.ref, u.new) for u in part.refs] == [("origin/review/run-1", None)]
        assert [name for name, _ in b.remote_branches()] == ["origin/main"]
        assert b.fsck().ok  # the tracking ref's reflog still reaches its commits
        assert b.store.remove_remote("origin") == 1
        assert b.remote_branches() == [] and b.store.remotes() == []
        with pytest.raises(NotFound, match="no remote named"):
            b.fetch()


def test_remotes_are_checked(origin, tmp_path):
    store = origin.store
    with pytest.raises(InvalidInput, match="itself"):
        store.add_remote("self", tmp_path / "origin.mnemo")
    with pytest.raises(InvalidInput, match="remote name"):
        store.add_remote("a/b", tmp_path / "x")
    store.add_remote("peer", tmp_path / "x")
    with pytest.raises(InvalidInput, match="already exists"):
        store.add_remote("peer", tmp_path / "y")
    with pytest.raises(NotFound, match="no store"):
        origin.fetch("peer")
    with pytest.raises(NotFound, match="no branch"):
        origin.push("peer", "nope")
    with pytest.raises(NotFound):
        store.remove_remote("other")


def test_an_export_of_a_clone_imports(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo") as b:
        backup = io.BytesIO()
        b.store.export(backup)
    with Store.init(tmp_path / "restored.mnemo") as restored:
        assert restored.import_(io.BytesIO(backup.getvalue())).ok
        assert [n for n, _ in Repo.open(restored).remote_branches()] == ["origin/main", "origin/review/run-1"]


# -- in memory, tenants ---------------------------------------------------------------------


def test_in_memory_stores_exchange_history_through_store_argument():
    with Store.in_memory() as shared, Repo.in_memory() as a, Repo.in_memory() as b:
        a.commit([note("k", "v1")], message="a1", author="a")
        a.push("hub", store=shared)
        assert Repo.open(shared).get("k").content == "v1"
        b.fetch("hub", store=shared)
        assert b.resolve("hub/main").id == a.resolve("main").id
        assert b.merge("hub/main").fast_forward
        b.commit([note("k", "v2")], message="b1", author="b")
        b.push("hub", store=shared)
        assert a.pull("hub", store=shared).merge.fast_forward and a.get("k").content == "v2"
        assert all(r.fsck().ok for r in (a, b, Repo.open(shared)))


def test_a_transfer_concerns_one_tenant_unless_all_tenants(tmp_path):
    with Store.init(tmp_path / "a.mnemo") as a:
        a.create_tenant("acme")
        Repo.open(a, tenant="acme").commit([note("acme/k", "A")], message="acme", author="x")
        Repo.open(a).commit([note("k", "D")], message="default", author="x")
        a.create_tenant("empty")
        with Repo.clone(tmp_path / "a.mnemo", tmp_path / "b.mnemo", tenant="acme") as b:
            assert b.tenant == "acme" and b.store.tenants() == ["acme", "default"]
            assert b.get("acme/k").content == "A"
            assert Repo.open(b.store).branches() == []  # default was not fetched
            report = b.fetch(all_tenants=True)
            assert [p.tenant for p in report.tenants] == ["acme", "default", "empty"]
            assert Repo.open(b.store).resolve("origin/main").id == Repo.open(a).resolve("main").id
            with Repo.clone(tmp_path / "a.mnemo", tmp_path / "c.mnemo", all_tenants=True) as c:
                assert c.store.tenants() == ["acme", "default", "empty"]
                assert Repo.open(c.store).get("k").content == "D"
            b.commit([note("acme/k", "B")], message="b", author="b")
            Repo.open(b.store).merge("origin/main")
            Repo.open(b.store).commit([note("k", "E")], message="d", author="b")
            pushed = b.push(all_tenants=True)
            assert [(p.tenant, len(p.refs)) for p in pushed.tenants] == [
                ("acme", 1),
                ("default", 1),
                ("empty", 0),
            ]
        assert Repo.open(a, tenant="acme").get("acme/k").content == "B"
        assert Repo.open(a).get("k").content == "E"
    with Store.in_memory() as lacking, Store.in_memory() as d:
        d.create_tenant("acme")
        with pytest.raises(NotFound, match="no tenant 'acme'"):
            Repo.open(d, tenant="acme").fetch("x", store=lacking)


# -- erasure travels -----------------------------------------------------------------------


def _files_hold(path: Path, text: str) -> bool:
    return any(text.encode() in f.read_bytes() for f in path.iterdir() if f.is_file())


def test_erasure_travels_by_push_and_fetch_and_never_comes_back(tmp_path):
    a = Repo.init(tmp_path / "a.mnemo", clock=Clock())
    a.commit([note("users/mira/passport", CANARY), note("keep", "x")], message="scan", author="a")
    stale = Repo.clone(tmp_path / "a.mnemo", tmp_path / "stale.mnemo")  # still holds the bytes
    b = Repo.clone(tmp_path / "a.mnemo", tmp_path / "b.mnemo")
    (erased,) = a.forget("users/mira/passport", reason="erasure request", author="dpo").redactions
    b.close()
    a.store.add_remote("b", tmp_path / "b.mnemo")
    sent = a.push("b").tenants[0]
    assert sent.redactions == 1
    with Repo.open(tmp_path / "b.mnemo") as b:
        with pytest.raises(Redacted, match="erasure request"):
            b.get("users/mira/passport", at="HEAD~1")
        assert b.get("users/mira/passport") is None
        assert b.fsck().ok
        # A store that still has the bytes cannot bring them back.
        b.store.add_remote("stale", tmp_path / "stale.mnemo")
        stale.branch("side")
        stale.commit([note("other", "y")], branch="side", message="s", author="s")
        b.fetch("stale")
        with pytest.raises(Redacted):
            b.get("users/mira/passport", at="stale/side")
        assert b.fsck().ok
        b.gc(grace=timedelta(0))
    with Store.open(tmp_path / "b.mnemo") as store:
        store.compact()
    assert not _files_hold(tmp_path / "b.mnemo", CANARY)
    # And a fetch from the erasing side erases in the store fetching.
    stale.store.add_remote("a", tmp_path / "a.mnemo")
    assert stale.fetch("a").tenants[0].redactions == 1
    with pytest.raises(Redacted):
        stale.get("users/mira/passport")  # its main still names the version: it reads as erased
    assert stale.fsck().ok and a.fsck().ok
    assert erased.hash == stale.history("users/mira/passport")[0].hash
    stale.close()
    a.close()


# -- concurrency and crashes ------------------------------------------------------------------


def test_two_racing_pushers_exactly_one_wins(origin, tmp_path):
    pushers = [Repo.clone(tmp_path / "origin.mnemo", tmp_path / f"p{i}.mnemo") for i in range(2)]
    for round_ in range(4):
        for i, repo in enumerate(pushers):
            repo.pull()
            repo.commit([note(f"k/{i}", f"{round_}")], message=f"p{i} r{round_}", author=f"p{i}")
        barrier = threading.Barrier(2)
        outcome: dict[int, str] = {}

        def push(i: int, barrier: threading.Barrier = barrier, outcome: dict[int, str] = outcome) -> None:
            barrier.wait()
            try:
                pushers[i].push()
                outcome[i] = "won"
            except RefConflict as exc:
                assert "pull" in str(exc)
                outcome[i] = "told to pull"

        threads = [threading.Thread(target=push, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcome.values()) == ["told to pull", "won"]
        winner = next(i for i, what in outcome.items() if what == "won")
        assert origin.resolve("main").id == pushers[winner].resolve("main").id
    assert origin.fsck().ok
    for repo in pushers:
        repo.close()


PUSHER = textwrap.dedent(
    """
    import sys
    from mnemosyne import Repo
    from mnemosyne.admin import transfer
    transfer.BATCH = 150  # several object transactions per push
    with Repo.open(sys.argv[1]) as repo:
        print("ready", flush=True)
        repo.push("origin")
        print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_push_killed_at_random_moments_leaves_both_stores_consistent_and_a_rerun_completes(tmp_path):
    if not hasattr(signal, "SIGKILL"):
        unavailable("this platform has no SIGKILL")
    remote = Repo.init(tmp_path / "remote.mnemo")
    seed = remote.commit([note("seed", "0")], message="seed", author="r").id
    remote.close()
    local = Repo.clone(tmp_path / "remote.mnemo", tmp_path / "local.mnemo", author="l")
    for i in range(240):
        local.commit(
            [note(f"n/{i}/{j}", f"{i}-{j}-" + "x" * 40) for j in range(12)], message=f"c{i}", author="l"
        )
    tip = local.resolve("main").id
    local.close()
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    started = time.monotonic()
    kills = 0
    while time.monotonic() - started < 5:
        proc = subprocess.Popen(
            [sys.executable, "-c", PUSHER, str(tmp_path / "local.mnemo")],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.1))
        proc.kill()
        out, _ = proc.communicate()
        kills += "done" not in out
        with Repo.open(tmp_path / "remote.mnemo") as check:
            assert check.fsck().ok
            assert check.resolve("main").id in (seed, tip)  # the ref moves last, once
        if "done" in out:
            break
    with Repo.open(tmp_path / "local.mnemo") as again:
        assert again.fsck().ok
        again.push()
        assert again.resolve("origin/main").id == tip
    with Repo.open(tmp_path / "remote.mnemo") as done:
        assert done.resolve("main").id == tip and done.fsck().ok
        assert done.get("n/239/11").content.startswith("239-11-")
    print("pushes killed before done:", kills)
    assert kills >= 1


# -- a stateful model ------------------------------------------------------------------------


class Sharing(RuleBasedStateMachine):
    """Two agents' stores and a hub, in memory: any order of writes, pushes, pulls and erasures."""

    def __init__(self) -> None:
        super().__init__()
        self.hub = Store.in_memory()
        self.sides = [Repo.in_memory(clock=Clock()), Repo.in_memory(clock=Clock())]
        self.erased: set[str] = set()
        self.count = 0

    @rule(side=st.integers(0, 1), key=st.sampled_from(["a", "b", "c"]), value=st.integers(0, 3))
    def write(self, side: int, key: str, value: int) -> None:
        # Unique contents: bytes written again after an erasure are a new write, stored again.
        self.count += 1
        self.sides[side].commit([note(key, f"{key}={value}#{self.count}")], message="w", author=str(side))

    @rule(side=st.integers(0, 1), force=st.booleans())
    def push(self, side: int, force: bool) -> None:
        repo = self.sides[side]
        if repo.tip("main") is None:
            return
        before = Repo.open(self.hub).tip("main")
        try:
            repo.push("hub", store=self.hub, force=force)
        except RefConflict:
            assert not force and before is not None  # refused: the hub's branch did not move
            assert Repo.open(self.hub).tip("main") == before
            known = {c.id for _, c in repo.remote_branches()}
            assert before not in known or not repo.is_ancestor(before, "main")
            return
        assert Repo.open(self.hub).tip("main") == repo.tip("main")

    @rule(side=st.integers(0, 1))
    def pull(self, side: int) -> None:
        if Repo.open(self.hub).tip("main") is None:
            return
        repo, before = self.sides[side], self.sides[side].tip("main")
        try:
            result = repo.pull("hub", "main", store=self.hub, strategy="theirs").merge
        except InvalidInput:  # the sides began as separate stores: a first pull joins two roots
            assert before is not None and repo.tip("main") == before  # refused: nothing moved
            result = repo.pull(
                "hub", "main", store=self.hub, strategy="theirs", allow_unrelated_histories=True
            ).merge
        assert result.commit is not None
        assert self.sides[side].is_ancestor("hub/main", "main")

    @rule(side=st.integers(0, 1), key=st.sampled_from(["a", "b", "c"]))
    def forget(self, side: int, key: str) -> None:
        try:
            report = self.sides[side].forget(key, reason="asked", author="dpo")
        except NotFound:
            return
        self.erased.update(r.hash for r in report.redactions)

    @invariant()
    def consistent_and_erased_bytes_stay_gone(self) -> None:
        for repo in [*self.sides, Repo.open(self.hub)]:
            assert repo.fsck().ok
            with repo.store.kv.read() as txn:
                for oid in self.erased:
                    key = b"\x00\x00\x00\x00" + bytes.fromhex(oid)
                    if txn.get(Space.REDACTIONS, key) is not None:
                        assert txn.get(Space.OBJECTS, key) is None

    def teardown(self) -> None:
        for repo in self.sides:
            repo.close()
        self.hub.close()


TestSharing = Sharing.TestCase
TestSharing.settings = settings(
    max_examples=examples(25), stateful_step_count=15, deadline=None, suppress_health_check=list(HealthCheck)
)


# -- the command line ------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_session_in_subprocesses(tmp_path):
    env = {**os.environ, "MNEMO_AUTHOR": "tester", "MNEMO_EMBEDDER": "none"}
    mnemo = [sys.executable, "-m", "mnemo_cli"]

    def run(*args: str, code: int = 0, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*mnemo, *args], cwd=tmp_path, env=env, input=input, text=True, capture_output=True
        )
        assert done.returncode == code, (args, done.stdout, done.stderr)
        return done

    run("init", "a.mnemo")
    run("--repo", "a.mnemo", "commit", "-m", "one", input='{"id": "k", "content": "1"}')
    out = run("clone", "a.mnemo", "b.mnemo").stdout
    assert out.startswith(f"Cloned {tmp_path / 'a.mnemo'} into b.mnemo: 1 branch as origin/*")
    assert run("--repo", "b.mnemo", "remote", "-v").stdout == f"origin\t{tmp_path / 'a.mnemo'}\n"
    run("--repo", "b.mnemo", "commit", "-m", "two", input='{"id": "k", "content": "2"}')
    pushed = run("--repo", "b.mnemo", "push").stdout
    assert pushed.splitlines()[0] == f"To {tmp_path / 'a.mnemo'}" and "sent 1 commit(s)" in pushed
    run("--repo", "a.mnemo", "commit", "-m", "three", input='{"id": "j", "content": "3"}')
    run("--repo", "b.mnemo", "commit", "-m", "four", input='{"id": "i", "content": "4"}')
    refused = run("--repo", "b.mnemo", "push", code=4)
    assert refused.stdout == "" and refused.stderr.count("\n") == 1 and "pull" in refused.stderr
    pulled = run("--repo", "b.mnemo", "pull").stdout
    assert "origin/main" in pulled and "Merge origin/main into main" in pulled
    run("--repo", "b.mnemo", "push")
    assert run("--repo", "b.mnemo", "fetch").stdout == "Already up to date with origin.\n"
    doc = run("--repo", "b.mnemo", "--json", "fetch").stdout
    assert '"kind": "fetch"' in doc
    assert run("--repo", "b.mnemo", "show", "j", "--at", "origin/main").stdout.rstrip().endswith("3")
    run("--repo", "b.mnemo", "remote", "remove", "origin")
    assert run("--repo", "b.mnemo", "remote").stdout == ""
    missing = run("--repo", "b.mnemo", "fetch", code=3)
    assert missing.stderr.startswith("error: no remote named 'origin'")
    assert "remote-tracking" in run("fetch", "--help").stdout


def test_results_have_one_json_form(origin, tmp_path):
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "b.mnemo") as b:
        text = to_json(b.fetch())
        assert text.startswith('{"kind":"fetch","remote":"origin"')
        assert transfer.BATCH > 0


def test_a_push_interrupted_twice_with_gc_between_completes_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gc starts each unreachable object's grace when it first sees it, so between two
    # interrupted pushes it can remove nodes below a leaf chunk the receiver keeps.
    clock = {"now": datetime(2026, 6, 1, tzinfo=UTC)}
    a = Repo.init(tmp_path / "a.mnemo", clock=lambda: clock["now"])
    a.commit([Node(id=f"n{i}", content=f"v{i}") for i in range(3)], message="1")
    Repo.init(tmp_path / "b.mnemo").close()
    a.store.add_remote("b", tmp_path / "b.mnemo")
    monkeypatch.setattr(transfer, "BATCH", 1)
    real = transfer.store_objects
    budget = {"left": 0}

    def dies_after_budget(*args: object) -> object:
        if budget["left"] == 0:
            raise KeyboardInterrupt("killed")
        budget["left"] -= 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(transfer, "store_objects", dies_after_budget)

    def push(batches: int) -> None:
        budget["left"] = batches
        with contextlib.suppress(KeyboardInterrupt):
            a.push("b")

    def gc(at: datetime) -> None:
        with Repo.open(tmp_path / "b.mnemo", clock=lambda: at) as b:
            b.gc(grace=timedelta(hours=1))

    push(3)  # the three nodes arrive, then the transfer dies
    gc(datetime(2026, 6, 1, 0, 0, tzinfo=UTC))
    push(1)  # the leaf chunk arrives, then it dies again
    gc(datetime(2026, 6, 1, 1, 30, tzinfo=UTC))  # the nodes' grace is over, the chunk's is not
    with Repo.open(tmp_path / "b.mnemo") as b:
        assert b.redactions([]) == {} and b.tip("main") is None
    push(100)
    with Repo.open(tmp_path / "b.mnemo") as b:
        assert b.fsck().ok
        assert [b.get(f"n{i}").content for i in range(3)] == ["v0", "v1", "v2"]  # type: ignore[union-attr]
    a.close()


def test_removing_a_remote_drops_tracking_refs_an_import_brought_without_it(tmp_path: Path) -> None:
    source = Repo.init(tmp_path / "a.mnemo")
    source.commit([Node(id="x", content="1")], message="one")
    source.close()
    clone = Repo.clone(tmp_path / "a.mnemo", tmp_path / "c.mnemo")
    backup = io.BytesIO()
    clone.store.export(backup)
    clone.close()
    with Store.init(tmp_path / "restored.mnemo") as restored:
        restored.import_(io.BytesIO(backup.getvalue()))
    with Repo.open(tmp_path / "restored.mnemo") as repo:
        assert [name for name, _ in repo.remote_branches()] == ["origin/main"]
        assert repo.store.remotes() == []  # the export carries refs, not remotes
        assert repo.store.remove_remote("origin") == 1
        assert repo.remote_branches() == []
        with pytest.raises(NotFound, match="no remote named 'origin'"):
            repo.store.remove_remote("origin")
