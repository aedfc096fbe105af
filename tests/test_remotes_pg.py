"""Remotes with a PostgreSQL store on either side: clone from a hub, fetch, pull, push, erasure."""

from __future__ import annotations

import pytest
from support.round_trips import RoundTrips

from mnemosyne import InvalidInput, Node, Redacted, RefConflict, Repo, to_json
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.slow  # every test runs on the session's PostgreSQL server

CANARY = "C4NARY-PG-7Q9X-passport"


def note(node_id: str, content: object) -> Node:
    return Node(id=node_id, content=content)


def holds(repo: Repo, text: str) -> bool:
    """Whether any stored object of the store holds ``text`` (read as the backend stores it)."""
    with repo.store.kv.read() as txn:
        return any(text.encode() in value for _, value in txn.scan(Space.OBJECTS, b""))


@pytest.fixture
def hub(pg_url):
    repo = Repo.init(pg_url)
    repo.commit([note("users/mira/lang", "de"), note("users/mira/city", "Berlin")], message="m1", author="a")
    repo.branch("review/run-1")
    repo.commit([note("users/mira/pet", "cat")], branch="review/run-1", message="r1", author="a")
    yield repo
    repo.close()


def test_clone_from_a_postgres_hub_then_push_fetch_and_pull(hub, pg_url, tmp_path):
    with Repo.clone(pg_url, tmp_path / "b.mnemo", author="b") as b:
        assert [(r.name, r.location) for r in b.store.remotes()] == [("origin", pg_url)]
        assert [name for name, _ in b.remote_branches()] == ["origin/main", "origin/review/run-1"]
        assert b.resolve("main").id == hub.resolve("main").id and b.get("users/mira/lang").content == "de"
        made = b.commit([note("users/mira/lang", "en")], message="b1", author="b")
        (part,) = b.push(author="b").tenants
        assert (part.commits, part.objects, part.refs[0].new) == (1, 3, made.id)
        assert hub.get("users/mira/lang").content == "en" and hub.fsck().ok
        again, fetched = b.push().tenants[0], b.fetch().tenants[0]
        assert (again.commits, again.objects, fetched.commits, fetched.refs) == (0, 0, 0, [])
        # The hub moves on; a push from behind is refused; pull merges by the rule asked for.
        hub.commit([note("users/mira/lang", "it")], message="h1", author="a")
        b.commit([note("users/mira/lang", "es"), note("users/mira/pet", "dog")], message="b2", author="b")
        with pytest.raises(RefConflict, match="pull"):
            b.push()
        stopped = b.pull(author="b").merge
        assert [c.id for c in stopped.conflicts] == ["users/mira/lang"] and stopped.commit is None
        merged = b.pull(strategy="theirs", author="b").merge
        assert merged.commit is not None and b.get("users/mira/lang").content == "it"
        b.push(author="b")
        assert hub.resolve("main").id == b.resolve("main").id and hub.get("users/mira/pet").content == "dog"
        # A branch the hub deletes goes from the clone's tracking refs at the next fetch.
        hub.delete_branch("review/run-1")
        assert [(u.ref, u.new) for u in b.fetch().tenants[0].refs] == [("origin/review/run-1", None)]
        assert hub.fsck().ok and b.fsck().ok


def test_a_postgres_store_fetches_from_and_pushes_to_a_directory_and_another_schema(hub, pg_server, tmp_path):
    with Repo.init(tmp_path / "laptop.mnemo") as laptop:
        laptop.commit([note("laptop/k", "v")], message="l1", author="l")
        hub.store.add_remote("laptop", tmp_path / "laptop.mnemo")
        hub.fetch("laptop")  # a history with no common root: merged when asked for by name
        assert hub.merge("laptop/main", author="a", allow_unrelated_histories=True).commit is not None
        hub.push("laptop", force=True)
        assert laptop.resolve("main").id == hub.resolve("main").id
        assert laptop.get("users/mira/city").content == "Berlin" and laptop.fsck().ok
    mirror_url = pg_server.url()
    try:
        Repo.init(mirror_url).close()
        hub.store.add_remote("mirror", mirror_url)
        hub.push("mirror")
        hub.push("mirror", "review/run-1")
        with Repo.open(mirror_url) as mirror:
            assert mirror.branches() == ["main", "review/run-1"]
            assert mirror.get("laptop/k").content == "v" and mirror.fsck().ok
            mirror.commit([note("mirror/k", "m")], message="mi", author="m")
        assert hub.pull("mirror").merge.fast_forward and hub.get("mirror/k").content == "m"
    finally:
        pg_server.drop_schema(mirror_url)


def test_erasure_travels_to_and_from_a_postgres_hub_and_never_comes_back(hub, pg_url, tmp_path):
    hub.commit([note("users/mira/passport", CANARY)], message="scan", author="a")
    stale = Repo.clone(pg_url, tmp_path / "stale.mnemo")  # keeps the bytes
    with Repo.clone(pg_url, tmp_path / "b.mnemo") as b:
        b.forget("users/mira/passport", reason="erasure request", author="dpo")
        assert b.push().tenants[0].redactions == 1
    assert hub.get("users/mira/passport") is None  # forget removed it at the tip and erased the bytes
    with pytest.raises(Redacted, match="erasure request"):
        hub.get("users/mira/passport", at="HEAD~1")
    assert not holds(hub, CANARY) and hub.fsck().ok
    # The stale clone still has the bytes: a branch it pushes whose history holds them
    # cannot bring them back to the hub, and its next fetch erases them there.
    stale.branch("side")
    stale.commit([note("other", "y")], branch="side", message="s", author="s")
    assert stale.push("origin", "side").tenants[0].commits == 1
    with pytest.raises(Redacted):
        hub.get("users/mira/passport", at="side~1")
    assert not holds(hub, CANARY)
    assert stale.pull().fetch.tenants[0].redactions == 1
    assert not holds(stale, CANARY) and stale.fsck().ok and hub.fsck().ok
    stale.close()


def test_a_password_in_a_remote_url_is_never_shown(hub, pg_url, tmp_path):
    secret = f"{pg_url}&password=s3cret-word"  # the test server trusts its socket: ignored there
    with Repo.clone(secret, tmp_path / "b.mnemo") as b:
        (origin,) = b.store.remotes()
        report = b.fetch()
        for shown in (origin.location, report.location, to_json(report), to_json(origin)):
            assert "s3cret-word" not in shown
        assert "password=" in origin.location  # left in, its value shown as an ellipsis
        assert b.store.add_remote("again", secret).location == origin.location


def test_a_postgres_store_is_not_its_own_remote(hub, pg_url):
    for itself in (pg_url, f"{pg_url}&password=x", pg_url.replace("postgresql://", "postgres://")):
        with pytest.raises(InvalidInput, match="itself"):
            hub.store.add_remote("me", itself)
    assert hub.store.remotes() == []


def _history_of(repo: Repo, commits: int, per_commit: int) -> None:
    for c in range(commits):
        repo.commit(
            [note(f"n/{c}-{j}", f"note {c}.{j}") for j in range(per_commit)], message=f"c{c}", author="a"
        )


def test_a_push_to_postgres_costs_round_trips_per_transaction_not_per_commit_or_version(pg_url, tmp_path):
    # Indexing the received commits asks which are indexed once for all of them, and
    # queues their versions for recall once; storing looks up no redaction record
    # per version while the tenant has erased nothing. Before: 3 round trips a
    # commit and one a version.
    Repo.init(pg_url).close()
    with Repo.init(tmp_path / "local.mnemo", sync=False) as local:
        _history_of(local, 40, 5)
        local.store.add_remote("hub", pg_url)
        with RoundTrips() as trips:
            assert local.push("hub").tenants[0].commits == 40
        assert trips.count <= 30, trips.count
        with Repo.open(pg_url) as hub:
            assert hub.fsck().ok
            assert [v.commit for v in hub.history("n/7-3")] == [v.commit for v in local.history("n/7-3")]
            assert hub.search("note 7.3", k=1)[0].id == "n/7-3"  # every version was queued for recall


def test_planning_a_fetch_from_postgres_reads_the_commits_and_their_roots_together(pg_url, tmp_path):
    with Repo.init(pg_url) as hub:
        _history_of(hub, 40, 5)
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", pg_url)
        with RoundTrips() as trips:
            assert fresh.fetch("hub").tenants[0].commits == 40
        # About one a commit remains: the walk of the commit graph, by a handle that
        # has not seen it, reads an entry at a time. Planning reads the commits, their
        # parents, and their trees a level at a time, for 64 commits together; one
        # tree at a time it made about 4.5 a commit, the commits and roots read
        # together for a whole part about 2.5.
        assert trips.count <= 40 + 20, trips.count
        assert fresh.get("n/39-4", at="hub/main").content == "note 39.4" and fresh.fsck().ok


def test_a_fetch_from_postgres_reads_ahead_merges_and_trees_that_grow_and_shrink(pg_url, tmp_path):
    # Planning reads a part's trees ahead a level at a time; a merge (two parents'
    # trees), a tree that grows taller than its parent's and one that shrinks below
    # it take the other turns of that walk. What is planned must be all that is sent.
    with Repo.init(pg_url) as hub:
        _history_of(hub, 6, 3)
        hub.branch("side")
        hub.commit([note(f"bulk/{i:04d}", f"row {i}") for i in range(3000)], branch="side", message="grow")
        hub.commit([note("n/1-1", "changed on main")], message="main moves")
        hub.merge("side", message="merge side")
        hub.commit([], delete=[f"bulk/{i:04d}" for i in range(2990)], message="shrink")
        for c in range(3):
            hub.commit([note(f"late/{c}", c)], message=f"late {c}")
        expected = {branch: {n.id: n.content for n in hub.nodes(at=branch)} for branch in ("main", "side")}
    with Repo.init(tmp_path / "fresh.mnemo", sync=False) as fresh:
        fresh.store.add_remote("hub", pg_url)
        assert fresh.fetch("hub").tenants[0].commits == 6 + 1 + 1 + 1 + 1 + 3
        for branch, nodes in expected.items():
            assert {n.id: n.content for n in fresh.nodes(at=f"hub/{branch}")} == nodes
        assert fresh.fsck().ok
