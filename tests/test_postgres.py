"""What is particular to stores on PostgreSQL: URLs, errors, the object cache, compaction, the CLI.

The backend-neutral behaviour runs on PostgreSQL in the shared suites (the KV
contract, the Repo API, concurrency, the canary); these pin what only a
server-backed store has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_harness import assert_error, invoke

from mnemosyne import InvalidInput, Node, NotFound, Redacted, Repo, Store
from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.location import shown_url
from mnemosyne.store.kv.postgres_conn import PgLocation

SCOPE = b"\x00\x00\x00\x00"


# -- locations ----------------------------------------------------------------------


def test_a_url_is_never_taken_for_a_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = "postgresql://nobody:sekrit@127.0.0.1:1/db"
    for call in (lambda: Repo.init(url), lambda: Repo.open(url), lambda: Store.open(url)):
        with pytest.raises(NotFound) as raised:
            call()
        assert "sekrit" not in str(raised.value) and "127.0.0.1" in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # no directory named after the URL
    with pytest.raises(InvalidInput, match="not supported"):
        Repo.init("mysql://localhost/db")


@settings(max_examples=30, deadline=None)
@given(
    user=st.sampled_from(["", "mira@", "mira:pw0rd@"]),
    host=st.sampled_from(["", "db.example.com", "db.example.com:6543", "[::1]:5432"]),
    query=st.lists(st.sampled_from(["sslmode=require", "password=pw0rd", "host=/run/pg", "schema=agents"])),
)
def test_urls_parse_and_never_show_a_password(user, host, query):
    url = f"postgresql://{user}{host}/memory" + (f"?{'&'.join(query)}" if query else "")
    where = PgLocation.parse(url)
    assert "pw0rd" not in where.display and "pw0rd" not in where.host and "pw0rd" not in shown_url(url)
    assert where.schema == ("agents" if "schema=agents" in query else "mnemosyne")
    assert "schema" not in where.conninfo


def test_bad_schema_names_are_refused():
    with pytest.raises(InvalidInput, match="schema name"):
        PgLocation.parse('postgresql:///db?schema=a"b')


@pytest.mark.slow
def test_url_options_with_spaces_reach_the_server_as_written(pg_url):
    # libpq reads %20 as a space and + as a plus: the URL must keep %20.
    url = pg_url + "&options=-c%20statement_timeout%3D4321&application_name=my%20agent"
    with Repo.init(url) as repo:
        repo.commit([Node(id="a", content=1)], message="one")
        assert repo.get("a").content == 1


@pytest.mark.slow
def test_init_open_and_refusals(pg_url):
    with pytest.raises(NotFound, match="no store at"):
        Repo.open(pg_url)
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id="a", content=1)], message="one")
        assert repo.store.where.startswith("postgresql://") and repo.path is None
    with pytest.raises(InvalidInput, match="already exists"):
        Repo.init(pg_url)
    with Repo.open(pg_url, readonly=True) as reader:
        assert reader.get("a").content == 1
        with pytest.raises(InvalidInput, match="read-only"):
            reader.commit([Node(id="a", content=2)])


@pytest.mark.slow
def test_a_missing_database_is_not_found_in_one_line(pg_server):
    url = pg_server.base_url.replace("///postgres", "///no_such_db")
    with pytest.raises(NotFound, match="no_such_db") as raised:
        Repo.open(url)
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_several_stores_share_a_database_by_schema(pg_server):
    a, b = pg_server.url(), pg_server.url()
    try:
        with Repo.init(a) as one, Repo.init(b) as two:
            one.commit([Node(id="x", content="a")])
            two.commit([Node(id="x", content="b")])
            assert (one.get("x").content, two.get("x").content) == ("a", "b")
    finally:
        pg_server.drop_schema(a)
        pg_server.drop_schema(b)


# -- the object cache -----------------------------------------------------------------

ERASER = """
import sys
from mnemosyne import Repo
with Repo.open(sys.argv[1]) as repo:
    repo.forget("secret", "asked", author="dpo")
"""


@pytest.mark.slow
def test_an_object_erased_by_another_process_is_never_served_from_the_cache(pg_url):
    with Repo.init(pg_url) as repo:
        made = repo.commit([Node(id="secret", content="C01X00T47"), Node(id="other", content=1)])
        node = repo.get("secret")
        oid = bytes.fromhex(node.hash)
        with repo.kv.read() as txn:  # read twice: the second time from the cache
            assert txn.get(Space.OBJECTS, SCOPE + oid) is not None
            assert txn.get(Space.OBJECTS, SCOPE + oid) is not None
        with repo.kv.read() as before:  # a snapshot from before the erasure keeps its view
            subprocess.run([sys.executable, "-c", ERASER, pg_url], check=True, timeout=60)
            assert before.get(Space.OBJECTS, SCOPE + oid) is not None
        with repo.kv.read() as after:
            assert after.get(Space.OBJECTS, SCOPE + oid) is None
        with pytest.raises(Redacted):
            repo.get("secret", at=made.id)
        assert repo.get("other").content == 1


@pytest.mark.slow
def test_a_snapshot_never_sees_an_object_stored_after_it_began(pg_url):
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        with kv.read() as old:
            kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"v", overwrite=False))
            with kv.read() as new:
                assert new.get(Space.OBJECTS, b"k") == b"v"  # cached now
            assert old.get(Space.OBJECTS, b"k") is None


@pytest.mark.slow
def test_an_object_guessed_new_that_was_there_runs_the_transaction_again_asking(pg_url):
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"old", b"v", overwrite=False))
        kv.cache.evict(b"old")  # as in another process: nothing here knows it exists
        answers: list[bool] = []

        def store(txn):
            answers.append(txn.put(Space.OBJECTS, b"old", b"v", overwrite=False))
            answers.append(txn.put(Space.OBJECTS, b"new", b"w", overwrite=False))

        kv.transact(store)
        # First run: both guessed "added", the check at commit failed; second run asked.
        assert answers == [True, True, False, True]
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"new") == b"w"


@pytest.mark.slow
@pytest.mark.parametrize("size", [10, 200_000], ids=["pipelined", "large"])
def test_objects_stored_where_absent_that_were_there_end_well(pg_url, size):
    # Objects a commit stores go in with a plain INSERT (no speculative insertion): one
    # that another process stored meanwhile fails the commit, which runs again with
    # ON CONFLICT DO NOTHING; the large one goes through psycopg's pipeline instead.
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        old = [(b"old%d" % i, bytes([i]) * size) for i in range(8)]
        kv.transact(lambda txn: txn.put_absent(Space.OBJECTS, old[::2]))
        for key, _ in old:
            kv.cache.evict(key)  # as in another process: nothing here knows they exist
        runs = []

        def store(txn):
            runs.append(txn)
            txn.put_absent(Space.OBJECTS, old)
            txn.put(Space.INDEX, b"k", b"v")

        kv.transact(store)
        assert len(runs) == 2  # guessed new and wrong, then stored where absent
        with kv.read() as txn:
            assert txn.get_many(Space.OBJECTS, [key for key, _ in old]) == [value for _, value in old]
            assert txn.get(Space.INDEX, b"k") == b"v"
        runs.clear()
        kv.transact(lambda txn: runs.append(txn) or txn.put_absent(Space.OBJECTS, [(b"new", b"w")]))
        assert len(runs) == 1  # the next transaction guesses again


@pytest.mark.slow
def test_the_same_memory_committed_by_two_handles_is_stored_once(pg_url):
    with Repo.init(pg_url) as first, Repo.open(pg_url) as second:
        first.commit([Node(id="a", content="same")])
        second.branch("other", at=first.resolve("HEAD").id)
        # The same node (same bytes, same id) from a handle that has not seen it, and again.
        for _ in range(2):
            second.commit([Node(id="a", content="same"), Node(id="b", content=1)], branch="other")
        assert second.get("a", at="other").content == "same"
        assert first.get("a").hash == second.get("a", at="other").hash


@pytest.mark.slow
def test_rows_read_ahead_are_of_the_new_snapshot(pg_url):
    with Repo.init(pg_url) as repo:
        kv = repo.kv
        for value in (b"1", b"2", b"3"):
            kv.transact(lambda txn, value=value: txn.put(Space.REFS, b"r", value))
            with kv.read() as txn:  # "r" is read ahead from the second read on
                assert txn.get(Space.REFS, b"r") == value


# -- compaction -------------------------------------------------------------------------


@pytest.mark.slow
def test_compaction_refuses_tables_of_another_role(pg_server, pg_url):
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id="a", content="x" * 3000)])
        report = repo.gc(grace=timedelta(0), compact=True)
        assert report.compacted and report.file_bytes_after is not None
    role = "mnemo_guest"
    pg_server.sql(f"DROP ROLE IF EXISTS {role}")
    pg_server.sql(f"CREATE ROLE {role} LOGIN")
    schema = pg_url.rsplit("schema=", 1)[1]
    pg_server.sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    pg_server.sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    guest = pg_url.replace("user=postgres", f"user={role}")
    try:
        with Repo.open(guest) as repo:
            assert repo.get("a").content == "x" * 3000
            with pytest.raises(InvalidInput, match="own"):
                repo.gc(grace=timedelta(0), compact=True)
    finally:
        pg_server.sql(f"DROP OWNED BY {role}")
        pg_server.sql(f"DROP ROLE {role}")


@pytest.mark.slow
def test_a_role_that_may_not_write_is_told_so(pg_server, pg_url):
    Repo.init(pg_url).close()
    role = "mnemo_reader"
    schema = pg_url.rsplit("schema=", 1)[1]
    pg_server.sql(f"DROP ROLE IF EXISTS {role}")
    pg_server.sql(f"CREATE ROLE {role} LOGIN")
    pg_server.sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    pg_server.sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    try:
        with Repo.open(pg_url.replace("user=postgres", f"user={role}")) as repo:
            assert list(repo.nodes()) == []
            with pytest.raises(InvalidInput, match="permission denied"):
                repo.commit([Node(id="a", content=1)])
    finally:
        pg_server.sql(f"DROP OWNED BY {role}")
        pg_server.sql(f"DROP ROLE {role}")


# -- the command line ---------------------------------------------------------------------


@pytest.mark.slow
def test_mnemo_works_on_a_url_from_repo_and_from_mnemo_dir(pg_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    result = invoke("--repo", pg_url, "--json", "init")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["path"].startswith("postgresql:///postgres?")
    node = json.dumps({"id": "users/mira/lang", "content": "de"})
    result = invoke("--repo", pg_url, "commit", "-m", "learned", input=node)
    assert result.exit_code == 0, result.output
    result = invoke("--json", "show", "users/mira/lang", env={"MNEMO_DIR": pg_url})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["content"] == "de"
    result = invoke("--repo", pg_url, "--tenant", "acme", "init")
    assert result.exit_code == 0 and "Created tenant acme" in result.stdout, result.output
    assert list(tmp_path.iterdir()) == []


def test_mnemo_names_an_unreachable_server_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("--repo", "postgresql://agent:sekrit@127.0.0.1:1/memory", "log")
    assert_error(result, 3, "127.0.0.1")
    assert "sekrit" not in result.output
    result = invoke("init", "postgresql://agent:sekrit@127.0.0.1:1/memory")
    assert_error(result, 3, "127.0.0.1")
    assert list(Path(tmp_path).iterdir()) == []
