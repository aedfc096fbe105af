"""The write path on PostgreSQL (ADR 31): two round trips per commit, values in binary, nothing lost.

Resolving a commit id given as text asks whether a branch bears that name
(``refs/heads/<id>``: a branch wins over a commit id). That key changes with
every commit; the read-ahead follows it from the branch's ref, spelled in hex, in
the statement that begins the transaction, so it costs no round trip of its own.

The round trip that commits sends its statements in libpq's pipeline mode, the
values as binary ``bytea[]`` parameters: they must come back byte for byte, and a
statement failing part way must leave none of the transaction's rows.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate

from mnemosyne import MnemoError, Node, RefConflict, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.slow  # each test needs the session's PostgreSQL server


def _trips(repo: Repo, work) -> int:
    before = repo.kv.round_trips
    work()
    return repo.kv.round_trips - before


def test_a_commit_naming_its_parent_by_id_is_two_round_trips(pg_url):
    with Repo.init(pg_url) as repo:
        tip = repo.commit([Node(id="a", content=0)]).id
        trips = []
        for i in range(1, 8):
            before = repo.kv.round_trips
            tip = repo.commit([Node(id="a", content=i)], parent=tip).id
            trips.append(repo.kv.round_trips - before)
        assert repo.get("a").content == 7
    assert set(trips[3:]) == {2}, trips


def test_a_checkpoint_put_is_two_round_trips(pg_url):
    # The saver commits on the tip it knows, naming it by id as the expected parent.
    with Repo.init(pg_url) as repo:
        saver = MnemosyneSaver(repo)
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        trips = []
        for step in range(8):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"step": step, "notes": f"note {step}"}
            checkpoint["channel_versions"] = {"step": step + 1, "notes": step + 1}
            before = repo.kv.round_trips
            config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"step": step + 1})
            trips.append(repo.kv.round_trips - before)
        assert saver.get_tuple(config).checkpoint["channel_values"]["step"] == 7
    assert set(trips[4:]) == {2}, trips


def test_a_branch_named_after_the_parent_id_still_wins_once_the_read_ahead_follows_it(pg_url):
    with Repo.init(pg_url) as mine, Repo.open(pg_url) as other:
        first = mine.commit([Node(id="a", content=0)]).id
        tip = first
        for i in range(1, 6):  # the read-ahead learns to follow refs/heads/<parent id>
            tip = mine.commit([Node(id="a", content=i)], parent=tip).id
        # Another handle names a branch after the tip's id, pointing at an older commit:
        # the parent id now resolves to that branch (as in git), so the commit is refused.
        other.branch(tip, at=first)
        with pytest.raises(RefConflict):
            mine.commit([Node(id="a", content="lost?")], parent=tip)
        assert mine.get("a").content == 5  # nothing was written
        other.delete_branch(tip)
        assert _trips(mine, lambda: mine.commit([Node(id="a", content=6)], parent=tip)) == 2
        assert mine.get("a").content == 6


def test_values_of_every_kind_of_byte_come_back_exactly(pg_url):
    values = {
        b"empty": b"",
        b"nul": b"\x00",
        b"quotes": b"'\\\"{},:",
        b"every byte": bytes(range(256)) * 3,
        b"large": bytes(range(251)) * 1000,
    }
    with Repo.init(pg_url) as repo:
        repo.kv.transact(lambda txn: txn.put_absent(Space.OBJECTS, sorted(values.items())))
        repo.kv.transact(lambda txn: txn.put_many(Space.INDEX, sorted(values.items())))
        repo.commit([Node(id="text", content="é ' \\ \x00 {a,b} 🙂" * 50)])
    with Repo.open(pg_url) as fresh:  # nothing cached: read from the server
        with fresh.kv.read() as txn:
            keys = sorted(values)
            assert txn.get_many(Space.OBJECTS, keys) == [values[key] for key in keys]
            assert txn.get_many(Space.INDEX, keys) == [values[key] for key in keys]
        assert fresh.get("text").content == "é ' \\ \x00 {a,b} 🙂" * 50


def test_a_statement_failing_mid_commit_leaves_none_of_its_rows(pg_server, pg_url):
    schema = pg_url.rsplit("schema=", 1)[1]
    with Repo.init(pg_url) as first:
        tip = first.commit([Node(id="a", content=0)]).id
    # The reflog's insert comes after the objects', the index's and the ref's in the
    # commit's round trip: make the server refuse it.
    pg_server.sql(
        f'CREATE FUNCTION "{schema}".refuse() RETURNS trigger LANGUAGE plpgsql '
        "AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"
    )
    pg_server.sql(
        f'CREATE TRIGGER refuse BEFORE INSERT ON "{schema}".reflog '
        f'FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse()'
    )
    with Repo.open(pg_url) as repo:  # new connections: the failing round trip prepares its statements
        counts = _rows(pg_server, schema)
        with pytest.raises(MnemoError, match="refused by the test"):
            repo.commit([Node(id="a", content="refused"), Node(id="b", content="new")])
        assert _rows(pg_server, schema) == counts  # not one row of it in any table
        assert repo.resolve("HEAD").id == tip
        pg_server.sql(f'DROP TRIGGER refuse ON "{schema}".reflog')
        # What it prepared before failing is known: the next commits prepare nothing twice.
        for i in range(3):
            repo.commit([Node(id="a", content=f"after {i}")])
        assert _trips(repo, lambda: repo.commit([Node(id="b", content="at last")])) == 2
        assert (repo.get("a").content, repo.get("b").content) == ("after 2", "at last")


def _rows(server, schema: str) -> dict[str, int]:
    tables = ("objects", "refs", "reflog", "index", "recall")
    with psycopg.connect(f"host={server.socket} user={server.user} dbname=postgres") as conn:
        return {
            table: conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]
            for table in tables
        }


def test_two_handles_committing_to_one_branch_lose_no_commit(pg_url):
    with Repo.init(pg_url) as first:
        first.commit([Node(id="seed", content=0)])
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with Repo.open(pg_url) as repo:
                for i in range(12):
                    repo.commit([Node(id=f"{name}/{i:02d}", content=i)], message=f"{name} {i}")
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with Repo.open(pg_url) as repo:
        messages = [commit.message for commit in repo.log()]
        assert len(messages) == 25  # the seed and every one of the 24, each its own commit
        for name in ("left", "right"):
            assert [repo.get(f"{name}/{i:02d}").content for i in range(12)] == list(range(12))


def test_threads_committing_through_one_handle_run_each_commit_once(pg_url):
    """A served tenant's requests share one handle: its commits queue, none runs again.

    Begun at once, all but one of them failed at COMMIT (the branch's ref) and ran
    again: four runs a commit with 16 connections to one server. Queued in the
    handle, each is its two round trips.
    """
    with Repo.init(pg_url) as repo:
        for i in range(3):  # the read-ahead learns what a commit reads first
            repo.commit([Node(id=f"warm/{i}", content=i)])
        start = threading.Barrier(8)

        def writer(number: int) -> None:
            start.wait()
            for i in range(4):
                repo.commit([Node(id=f"t{number}/{i}", content=i)])

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        trips = _trips(repo, lambda: ([t.start() for t in threads], [t.join() for t in threads]))
        assert len(list(repo.log())) == 3 + 32
        assert trips <= 2 * 32 + 2, trips


def test_the_saver_on_postgres_passes_langgraph_conformance_suite(pg_server):
    urls: list[str] = []

    @checkpointer_test(name="MnemosyneSaver[postgres]")
    async def fresh():
        urls.append(pg_server.url())  # a fresh store for each capability, as the suite asks
        repo = Repo.init(urls[-1])
        yield MnemosyneSaver(repo)
        repo.close()

    try:
        report = asyncio.run(validate(fresh))
    finally:
        for url in urls:
            pg_server.drop_schema(url)
    counts = {name: (r.tests_passed, r.tests_failed, r.failures) for name, r in report.results.items()}
    assert report.passed_all(), counts
    assert report.conformance_level() == "FULL" and len(counts) == 8
