"""Round trips to the server: a commit costs two, a warm read one, whatever they touch (ADR 31).

Counted by the handle's documented test hook, ``PostgresKV.round_trips``: every
wait for the server's answer (a ``ROLLBACK`` sent without waiting is none).
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest

from mnemosyne import Node, Redacted, Repo
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.slow  # each test needs the session's PostgreSQL server


def _nodes(count: int, version: int = 0, start: int = 0) -> list[Node]:
    return [Node(id=f"mem/{i:05d}", content=f"note {i} v{version}") for i in range(start, start + count)]


def _trips(repo: Repo, work) -> int:
    before = repo.kv.round_trips
    work()
    return repo.kv.round_trips - before


@pytest.fixture
def big(pg_url):
    """A store of 3,000 nodes (a tree three levels deep), imported by the handle the test uses."""
    with Repo.init(pg_url) as repo:
        repo.commit(_nodes(3000), message="import")
        yield repo


def test_a_commit_is_two_round_trips_whatever_it_changes(big):
    big.commit(_nodes(3, 1), message="the handle learns what a commit reads first")
    big.commit(_nodes(3, 2), message="and caches the chunks it wrote")
    for version, (count, stride) in enumerate([(1, 1), (10, 1), (10, 293), (100, 29), (400, 7)], start=3):
        nodes = [Node(id=f"mem/{i:05d}", content=f"v{version}") for i in range(0, count * stride, stride)]
        # The chunks on these paths were cached when the import and earlier commits wrote them.
        assert _trips(big, lambda nodes=nodes: big.commit(nodes, message="edit")) == 2, (count, stride)
    new = [Node(id=f"new/{i:03d}", content=i) for i in range(50)]
    assert _trips(big, lambda: big.commit(new, message="new ids")) == 2
    assert _trips(big, lambda: big.commit(delete=["new/007"], message="a removal")) == 2


def test_commits_after_many_stay_at_two_round_trips(pg_url):
    # The skip-pointer walk of the commit graph reads other commits' entries: they are kept.
    with Repo.init(pg_url) as repo:
        trips = [_trips(repo, lambda i=i: repo.commit([Node(id="a", content=i)])) for i in range(70)]
    assert set(trips[5:]) == {2}, trips


def test_a_warm_get_is_one_round_trip(big):
    for i in range(0, 3000, 150):
        big.get(f"mem/{i:05d}")  # the nodes and the chunks on their paths are cached now
    for i in range(0, 3000, 150):
        assert _trips(big, lambda i=i: big.get(f"mem/{i:05d}")) == 1
    assert _trips(big, lambda: big.get("mem/99999")) == 1  # absent: the tree says so
    assert _trips(big, lambda: big.resolve("HEAD")) == 1


def test_a_cold_commit_reads_the_tree_a_level_at_a_time(big, pg_url):
    with Repo.open(pg_url) as cold:  # a new handle: nothing cached
        cold.commit(_nodes(1, 5), message="learn the read-ahead")
        spread = [Node(id=f"mem/{i:05d}", content="spread") for i in range(3, 3000, 97)]  # 31 leaves apart
        trips = _trips(cold, lambda: cold.commit(spread, message="cold"))
    # Begin, one read per tree level the cache misses (3 here) and the graph entries
    # of the skip walk, commit: never one per chunk (the 31 leaves alone were 31).
    assert trips <= 7, trips


def test_a_read_sees_commits_made_meanwhile_by_another_handle(pg_url):
    with Repo.init(pg_url) as mine, Repo.open(pg_url) as theirs:
        mine.commit([Node(id="a", content=1)])
        for _ in range(3):
            assert mine.get("a").content == 1  # served by the read-ahead and the cache
        theirs.commit([Node(id="a", content=2)])
        # The first read after it reads what it has not cached: the new commit, one chunk
        # per tree level (one here), the node; after one read that fell short of the server.
        assert _trips(mine, lambda: mine.get("a")) <= 5
        assert _trips(mine, lambda: mine.get("a")) == 1
        assert mine.get("a").content == 2


ERASER = """
import sys
from mnemosyne import Repo
with Repo.open(sys.argv[1]) as repo:
    repo.forget("secret", "asked", author="dpo")
"""


def test_a_warm_get_never_serves_what_another_process_erased(pg_url):
    with Repo.init(pg_url) as repo:
        made = repo.commit([Node(id="secret", content="C01X00T47"), Node(id="other", content=1)])
        for _ in range(3):
            assert repo.get("secret", at=made.id).content == "C01X00T47"
        subprocess.run([sys.executable, "-c", ERASER, pg_url], check=True, timeout=60)
        with pytest.raises(Redacted):
            repo.get("secret", at=made.id)
        assert repo.get("secret") is None
        assert repo.get("other").content == 1


def test_a_read_holds_no_transaction_open_once_it_ended(pg_server, pg_url):
    import psycopg

    schema = pg_url.rsplit("schema=", 1)[1]
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id="a", content=1)])
        with repo.kv.read() as txn:
            assert txn.get(Space.REFS, b"\x00\x00\x00\x00HEAD") is not None
        repo.history("a")  # reads in a transaction, ended by a ROLLBACK nobody waits for
        with psycopg.connect(f"host={pg_server.socket} user={pg_server.user} dbname=postgres") as conn:
            deadline = time.monotonic() + 5
            while True:
                held = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                    "AND state LIKE 'idle in transaction%%'",
                    [f"mnemosyne:{schema}"],
                ).fetchone()[0]
                conn.commit()
                if held == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        assert held == 0  # no snapshot kept back from VACUUM, no lock in compaction's way
        assert repo.get("a").content == 1  # and the connections serve the next reads


def test_commits_go_on_after_misguessed_objects_abort_their_pipelines(pg_url):
    # A pipeline an error aborts must not leave psycopg thinking a statement prepared there exists.
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        for i in range(12):
            kv.transact(lambda txn, i=i: txn.put(Space.OBJECTS, b"old%d" % i, b"v", overwrite=False))
            kv.cache.evict(b"old%d" % i)  # as in another process: nothing here knows it exists

            def store(txn, i=i):
                txn.put(Space.OBJECTS, b"old%d" % i, b"v", overwrite=False)  # guessed new: wrong
                txn.put(Space.INDEX, b"k%d" % i, b"v")

            kv.transact(store)
            repo.commit([Node(id="a", content=i)])
        assert repo.get("a").content == 11
        with kv.read() as txn:
            assert [txn.get(Space.INDEX, b"k%d" % i) for i in (0, 11)] == [b"v", b"v"]


def test_a_transaction_rolled_back_keeps_the_statements_that_begin_the_next(pg_url):
    # psycopg, seeing a ROLLBACK once it has prepared statements of its own, deallocates
    # every statement of the session: the one each transaction begins with too.
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id="a", content=0)])

        def fail(txn):
            for i in range(8):  # asked of the server alone: prepared by psycopg from the fifth on
                txn.get(Space.INDEX, b"\x00\x00\x00\x00unknown%d" % i)
            raise ValueError("abandoned")

        for i in range(1, 8):
            with pytest.raises(ValueError):
                repo.kv.transact(fail)
            repo.commit([Node(id="a", content=i)])
            assert repo.get("a").content == i


def test_a_large_commit_is_two_round_trips_too(pg_url):
    # Over a MiB of values goes through psycopg's pipeline, unprepared, rather than libpq's directly.
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id="seed", content=0)])
        repo.commit([Node(id="seed", content=1)])
        large = [Node(id=f"big/{i:02d}", content="x" * 30_000 + str(i)) for i in range(40)]
        assert _trips(repo, lambda: repo.commit(large, message="large")) == 2
        assert repo.get("big/39").content.endswith("39")
        assert _trips(repo, lambda: repo.commit([Node(id="seed", content=2)])) == 2


def test_statements_prepared_by_a_commit_that_failed_are_known_afterwards(pg_url):
    # The commit's message prepares what it runs; when it fails part way, some of its
    # PREPAREs ran (they outlive the abort): the next commit must not prepare them again.
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        kv.transact(lambda txn: txn.put_absent(Space.OBJECTS, [(b"old", b"v")]))
        kv.cache.evict(b"old")  # as in another process: nothing here knows it exists
        answers = []
        kv.transact(lambda txn: answers.append(txn.put(Space.OBJECTS, b"old", b"v", overwrite=False)))
        assert answers == [True, False]  # guessed new, wrong: the first statement failed; asked
        kv.transact(lambda txn: answers.append(txn.put(Space.OBJECTS, b"new", b"w", overwrite=False)))
        assert answers[-1] is True  # guessed new again, and right: the same statement, prepared once
        with kv.read() as txn:
            assert txn.get_many(Space.OBJECTS, [b"old", b"new"]) == [b"v", b"w"]


def test_catching_up_the_search_index_reads_in_batches_not_a_version_at_a_time(pg_url):
    # A search first indexes the versions committed since the last one: whether each
    # is indexed already, its bytes, its content's vector, the postings and content
    # map entries it extends are each read for a batch at once (before: about seven
    # round trips a version).
    with Repo.init(pg_url) as repo:
        repo.use_embedder("hash")
        repo.commit(_nodes(40), message="indexed by the first search")
        repo.search("note 7", k=3)
        for version in range(1, 4):
            repo.commit(_nodes(100, version), message=f"v{version}")
        first = _trips(repo, lambda: repo.search("note 42", k=5))
        again = _trips(repo, lambda: repo.search("note 42", k=5))
        assert first - again <= 60, (first, again)  # catching up 300 versions
        hits = repo.search("note 42 v3", k=1)
        assert hits[0].id == "mem/00042" and hits[0].node.content == "note 42 v3"


def test_fsck_reads_in_batches_not_an_object_at_a_time(pg_url):
    # Every commit at once, each tree a level at a time, and the search index checked
    # against the objects fsck listed (before: a read for each indexed version, twice,
    # and for every ref tip, commit and tree chunk).
    with Repo.init(pg_url) as repo:
        repo.use_embedder("hash")
        for c in range(30):
            repo.commit(_nodes(20, c, start=c * 20), message=f"c{c}")
        repo.search("note 7", k=3)
    with Repo.open(pg_url) as repo:
        trips = repo.kv.round_trips
        report = repo.fsck()
        trips = repo.kv.round_trips - trips
        assert report.ok and report.commits == 30
        assert trips <= 5 * 30 + 40, trips


def test_gc_marks_every_tree_a_level_at_a_time(pg_url):
    # The commits' graph entries at once, the chunks of all their trees a level at a
    # time, when each unreachable object was first found so read a batch at once, and
    # deletions sent with the commit (before: a read or a delete for each entry,
    # chunk, object and reflog entry: 268 round trips here). The walk of the history
    # still reads a commit at a time, and each version collected is taken out of the
    # search index by itself.
    with Repo.init(pg_url) as repo:
        for c in range(30):
            repo.commit(_nodes(20, c, start=c * 20), message=f"c{c}")
        repo.branch("gone")
        repo.commit(_nodes(5, 99), branch="gone", message="only on a branch that goes")
        repo.delete_branch("gone")
    with Repo.open(pg_url) as repo:
        trips = repo.kv.round_trips
        report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
        trips = repo.kv.round_trips - trips
        assert trips <= 30 + 60, trips
        assert report.commits_removed == 1 and report.objects_removed > 5  # the branch that went
        assert repo.fsck().ok and len(list(repo.nodes())) == 600


def test_a_diff_far_back_reads_the_versions_together_and_skips_back(pg_url):
    # ``main~100`` by the commit graph's skip pointers (before: a commit at a time),
    # and every version the diff shows in one read (before: one each).
    with Repo.init(pg_url) as repo:
        repo.commit(_nodes(200), message="import")
        for c in range(100):
            repo.commit([Node(id=f"mem/{c:05d}", content=f"edited {c}")], message=f"e{c}")
    with Repo.open(pg_url) as repo:
        trips = repo.kv.round_trips
        diff = repo.diff("main~100", "main")
        trips = repo.kv.round_trips - trips
        assert len(diff.modified) == 100 and diff.modified[7].new.content == "edited 7"
        assert trips <= 60, trips
