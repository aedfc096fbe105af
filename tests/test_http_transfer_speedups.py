"""Pushes and fetches over HTTP: each tree compared once, the two processes at work at once.

The served side runs in this process: an httpx transport hands each request to
``Repo.answer_transfer`` as ``mnemo serve`` does, so the requests a transfer
makes, their order, and the tree comparisons (``TreeDiff.diff``) each side runs
while answering which step can be counted. A comparison is the costly part of
indexing a received commit: the receiving side makes one per commit, while it
stores the commit's objects (never trusting the sender's), and the planning side
makes none.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from support.components import need_module
from support.round_trips import RoundTrips

from mnemosyne import CorruptObject, MnemoError, Node, NotFound, Repo
from mnemosyne.admin import http_remote, receiving, transfer, wire
from mnemosyne.model.access import Token
from mnemosyne.store.tree_diff import TreeDiff

need_module("httpx")

URL = "http://hub.test"
TOKEN = Token(id="0123456789ab", name="tester", tenant="default", role="admin", created_at=datetime.now(UTC))


class Hub:
    """A served store in this process: the transport a remote's httpx client is given.

    Attributes:
        log: the transfer steps asked for, in the order they arrived.
        diffs: tree comparisons, by the step being answered while they ran
            (``""``: in the client, answering none).
    """

    def __init__(self, repo: Repo, *, max_body: int | None = None) -> None:
        self.repo = repo
        self.max_body = max_body
        self.log: list[str] = []
        self.diffs: Counter[str] = Counter()
        self.fail: Callable[[str, int], str | None] = lambda step, n: None
        self.answering = threading.local()
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        headers = {"x-mnemo-max-body": str(self.max_body)} if self.max_body else {}
        if request.url.path == "/v1/whoami":
            return httpx.Response(200, content=msgspec.json.encode(TOKEN), headers=headers)
        step = request.url.path.rsplit("/", 1)[-1]
        with self._lock:
            self.log.append(step)
            n = self.log.count(step)
        refused = self.fail(step, n)
        if refused is not None:
            return httpx.Response(500, json={"error": {"kind": "MnemoError", "message": refused}})
        self.answering.step = step
        try:
            body = self.repo.answer_transfer(step, request.content, author="tester")
        except MnemoError as error:
            kind = type(error).__name__
            return httpx.Response(400, json={"error": {"kind": kind, "message": str(error)}})
        finally:
            self.answering.step = ""
        return httpx.Response(200, content=body, headers=headers)


def _served(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Hub:
    """``repo`` served: every httpx client of this test reaches it."""
    served = Hub(repo)
    transport = httpx.MockTransport(served)
    real = httpx.Client

    class Routed(real):  # type: ignore[misc, valid-type]
        def __init__(self, **options: Any) -> None:
            super().__init__(**{**options, "transport": transport})

    monkeypatch.setattr(httpx, "Client", Routed)
    diff = TreeDiff.diff

    def counted(self: TreeDiff, a: bytes, b: bytes) -> Iterator[Any]:
        served.diffs[getattr(served.answering, "step", "")] += 1
        return diff(self, a, b)

    monkeypatch.setattr(TreeDiff, "diff", counted)
    return served


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    """An empty served store on LMDB."""
    served = _served(Repo.init(tmp_path / "hub.mnemo", sync=False), monkeypatch)
    yield served
    served.repo.close()


@pytest.fixture
def pg_hub(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    """An empty served store on the session's PostgreSQL server."""
    served = _served(Repo.init(pg_url), monkeypatch)
    yield served
    served.repo.close()


def history(path: Path, commits: int, per_commit: int = 2) -> Repo:
    """A store whose main has ``commits`` commits, each adding ``per_commit`` nodes and changing one."""
    repo = Repo.init(path, sync=False)
    for c in range(commits):
        nodes = [Node(id=f"n/{c}-{j}", content=f"note {c}.{j}") for j in range(per_commit)]
        repo.commit([*nodes, Node(id="status", content=f"at {c}")], message=f"c{c}")
    return repo


def same_history(a: Repo, b: Repo, ref: str = "main") -> None:
    """``b`` holds ``a``'s main, indexed as ``a`` indexed it."""
    assert b.fsck().ok
    for node in ("status", "n/0-0", "n/7-1"):
        assert [v.commit for v in b.history(node, at=ref)] == [v.commit for v in a.history(node)]


def test_a_push_over_http_compares_each_commit_once_on_the_receiving_side_and_never_in_finish(
    hub: Hub, tmp_path: Path
) -> None:
    with history(tmp_path / "local.mnemo", 12) as local:
        local.store.add_remote("hub", URL)
        done = local.push("hub", token="secret").tenants[0]
        assert done.commits == 12
        # Once per commit with a parent, while its objects are stored; the sender
        # plans without comparing (nobody here would take its comparisons).
        assert hub.diffs == Counter({"store": 11})
        same_history(local, hub.repo)


def test_a_fetch_over_http_plans_without_comparing_and_the_fetching_side_compares_once(
    hub: Hub, tmp_path: Path
) -> None:
    with history(tmp_path / "source.mnemo", 12) as source:
        source.store.add_remote("hub", URL)
        source.push("hub", token="secret")
    hub.diffs.clear()
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", URL)
        done = fresh.fetch("hub", token="secret").tenants[0]
        assert done.commits == 12
        assert hub.diffs == Counter({"": 11})  # in the fetching process, as the objects arrive
        same_history(hub.repo, fresh, "hub/main")


def test_a_push_stores_part_of_the_history_while_it_plans_the_rest(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "PLAN", 10)
    with history(tmp_path / "local.mnemo", 35) as local:
        local.store.add_remote("hub", URL)
        local.push("hub", token="secret")
        steps = [step for step in hub.log if step in ("lacking", "store")]
        # One question of which objects the hub lacks per part of 10 commits, each
        # followed by that part's objects (before: every question, then every object).
        assert steps.count("lacking") == 1 + 4
        first_store = steps.index("store")
        assert "lacking" in steps[first_store:]
        assert hub.log[-1] == "finish"
        same_history(local, hub.repo)


def test_a_fetch_plans_the_next_part_of_the_history_while_it_stores_one(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with history(tmp_path / "source.mnemo", 35) as source:
        source.store.add_remote("hub", URL)
        source.push("hub", token="secret")
    hub.log.clear()
    monkeypatch.setattr(transfer, "PLAN_THERE", 10)
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", URL)
        assert fresh.fetch("hub", token="secret").tenants[0].commits == 35
        steps = [step for step in hub.log if step in ("plan", "read")]
        assert steps.count("plan") == 4
        assert "plan" in steps[steps.index("read") :]
        same_history(hub.repo, fresh, "hub/main")


def test_a_store_request_that_fails_stops_the_ones_queued_after_it_and_the_hub_stays_consistent(
    hub: Hub, tmp_path: Path
) -> None:
    hub.max_body = 16 << 10  # small requests: many of them
    hub.fail = lambda step, n: "the disk is full" if step == "store" and n == 2 else None
    with history(tmp_path / "local.mnemo", 20, per_commit=6) as local:
        local.store.add_remote("hub", URL)
        with pytest.raises(MnemoError, match="the disk is full"):
            local.push("hub", token="secret")
        assert hub.log.count("store") == 2  # none sent after the failed one
        assert "finish" not in hub.log
        assert hub.repo.tip("main") is None and hub.repo.fsck().ok
        hub.fail = lambda step, n: None
        again = local.push("hub", token="secret").tenants[0]  # a rerun completes it
        assert again.commits == 20
        same_history(local, hub.repo)


def test_a_push_whose_last_finish_part_fails_leaves_the_hub_sound_and_a_rerun_completes_it(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Indexing is sent in parts; the earlier parts commit on their own, so a last part
    # refused leaves commits indexed that no branch reaches yet: sound, as any object
    # stored with no ref to it is, until a rerun moves the branch or gc drops them.
    monkeypatch.setattr(http_remote, "FINISH", 4)
    hub.fail = lambda step, n: "the connection dropped" if step == "finish" and n == 3 else None
    with history(tmp_path / "local.mnemo", 10) as local:
        local.store.add_remote("hub", URL)
        with pytest.raises(MnemoError, match="the connection dropped"):
            local.push("hub", token="secret")
        assert hub.log.count("finish") == 3  # 4 + 4 indexed, the last 2 refused
        assert hub.repo.tip("main") is None
        report = hub.repo.fsck()
        assert report.ok, report.problems
        assert report.commits == 8  # the dangling ones are checked, not skipped
        hub.fail = lambda step, n: None
        rerun = local.push("hub", token="secret").tenants[0]
        assert rerun.commits == 2 and rerun.objects == 0  # the rest was there, indexed
        same_history(local, hub.repo)
        assert hub.repo.fsck().commits == 10


def test_a_fetch_whose_planning_ahead_fails_raises_that_error_and_leaves_the_fetching_store_consistent(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with history(tmp_path / "source.mnemo", 30) as source:
        source.store.add_remote("hub", URL)
        source.push("hub", token="secret")
    monkeypatch.setattr(transfer, "PLAN_THERE", 10)
    hub.fail = lambda step, n: "the hub is shutting down" if step == "plan" and n == 2 else None
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", URL)
        with pytest.raises(MnemoError, match="the hub is shutting down"):
            fresh.fetch("hub", token="secret")
        assert fresh.remote_branches() == [] and fresh.fsck().ok
        hub.fail = lambda step, n: None
        assert fresh.fetch("hub", token="secret").tenants[0].commits == 30
        same_history(hub.repo, fresh, "hub/main")


# -- a hostile or broken client: the hub computes every comparison it indexes by --------


def objects_of(source: Repo) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """The commits of ``source``'s main (parents first) and their objects, in the order a push sends them."""
    offer = wire.decode(source.answer_transfer("offer", wire.encode(wire.Want())), wire.OfferMessage, "offer")
    commits = [oid for oid, _ in offer.commits]
    ids = wire.decode(
        source.answer_transfer("plan", wire.encode(wire.Plan(commits=commits))), wire.Ids, "plan"
    ).ids
    batch = wire.decode(
        source.answer_transfer("read", wire.encode(wire.Ids(ids=ids))), wire.ObjectBatch, "read"
    )
    return commits, [(oid, data) for oid, data in zip(batch.ids, batch.data, strict=True) if data is not None]


def store(hub: Repo, objects: list[tuple[bytes, bytes]]) -> None:
    batch = wire.ObjectBatch(ids=[oid for oid, _ in objects], data=[data for _, data in objects])
    hub.answer_transfer("store", wire.encode(batch))


def finish(hub: Repo, commits: list[bytes]) -> bytes:
    move = wire.Move(remote="hub", branch="main", tip=commits[-1])
    return hub.answer_transfer("finish", wire.encode(wire.Finish(commits=commits, move=move)))


def test_commits_of_a_batch_that_was_refused_are_not_indexed_by_what_was_compared_storing_it(
    tmp_path: Path,
) -> None:
    with history(tmp_path / "source.mnemo", 3) as source, Repo.init(tmp_path / "hub.mnemo") as hub:
        commits, objects = objects_of(source)
        forged = (b"\x01" * 32, objects[0][1])  # bytes that are not that id's
        with pytest.raises(CorruptObject):
            store(hub, [*objects, forged])  # every commit compared, then the batch rolled back
        with pytest.raises(NotFound, match="cannot be indexed"):
            finish(hub, commits)
        assert hub.tip("main") is None and hub.fsck().ok
        store(hub, objects)
        finish(hub, commits)
        same_history(source, hub)


def test_commits_sent_before_their_trees_are_compared_in_finish_and_indexed_right(tmp_path: Path) -> None:
    with history(tmp_path / "source.mnemo", 4) as source, Repo.init(tmp_path / "hub.mnemo") as hub:
        commits, objects = objects_of(source)
        in_order = {oid for oid in commits}
        backwards = [o for o in objects if o[0] in in_order] + [o for o in objects if o[0] not in in_order]
        store(hub, backwards)  # each commit first: nothing of its tree is there to compare yet
        finish(hub, commits)
        same_history(source, hub)


def test_what_a_served_store_keeps_of_its_comparisons_is_bounded_oldest_dropped_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(receiving, "DIFFS", 5)
    kept = receiving.Received()
    a, b, c = b"a" * 32, b"b" * 32, b"c" * 32
    change = ("k", None, b"v" * 32)
    kept.keep({a: [change] * 3})
    kept.keep({b: [change] * 2})
    assert kept.known([a, b]) == {a: [change] * 3, b: [change] * 2}
    kept.keep({c: [change]})  # 6 changes: the oldest commit's go
    assert kept.known([a, b, c]) == {b: [change] * 2, c: [change]}
    kept.drop([b])
    assert kept.known([a, b, c]) == {c: [change]} and len(kept) == 1


def test_a_batch_compares_at_most_a_bounded_number_of_changes_and_finish_does_the_rest(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(receiving, "DIFFS", 7)  # each commit changes 3 ids: two per batch are kept
    with history(tmp_path / "local.mnemo", 6) as local:
        local.store.add_remote("hub", URL)
        local.push("hub", token="secret")
        # Two compared and kept, a third compared past the bound and dropped: finish compares three.
        assert hub.diffs == Counter({"store": 3, "finish": 3})
        same_history(local, hub.repo)


@pytest.mark.slow  # on the session's PostgreSQL server
def test_a_hub_on_postgresql_answers_a_push_and_a_fetch_in_round_trips_per_request_not_per_commit(
    pg_hub: Hub, tmp_path: Path
) -> None:
    with history(tmp_path / "local.mnemo", 40, per_commit=5) as local:
        local.store.add_remote("hub", URL)
        with RoundTrips() as trips:
            assert local.push("hub", token="secret").tenants[0].commits == 40
        # Storing asks once per request which of its commits are indexed (before: once
        # for each, to compare it with its parent), and looks up no redaction record
        # while the hub has erased nothing (before: once per version).
        assert trips.count <= 30, trips.count
        same_history(local, pg_hub.repo)
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", URL)
        with RoundTrips() as trips:
            assert fresh.fetch("hub", token="secret").tenants[0].commits == 40
        # The walk of the hub's commit graph reads the shapes the hub kept when it
        # indexed them (before: one entry a commit).
        assert trips.count <= 10, trips.count
        same_history(pg_hub.repo, fresh, "hub/main")
