"""``mnemosyne.connect``: a served store used as a ``Repo`` is, over HTTP to a real ``mnemo serve``.

The Repo tests a served handle can run (tests/test_repo.py's, those that need no
injected clock, ``switch`` or the store's internals) run again here, each on a
fresh tenant of one served store; then what is the client's own.
"""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime

import pytest
from support.components import need_module
from support.served import Served

# The Repo tests a served handle runs, collected here with this module's ``repo`` fixture.
from test_repo import (  # noqa: F401
    test_blame_json_per_key,
    test_blame_whole_values_and_absent_ids,
    test_commit_meta_author_message_are_kept,
    test_commit_validates_its_arguments,
    test_deleting_an_absent_id_writes_nothing,
    test_diff_lists,
    test_duplicate_ids_in_one_commit_refused,
    test_empty_commit_refused_unless_allowed,
    test_history_and_log_follow_the_branch,
    test_history_statuses,
    test_issue_2_example,
    test_log_order_and_limit,
    test_log_over_a_multi_branch_dag,
    test_nodes_iterator_is_pinned_to_its_snapshot,
    test_nodes_ordering_prefix_and_batching,
    test_parent_refuses_a_moved_branch,
    test_reads_on_an_empty_store,
    test_revision_syntax,
)

import mnemosyne
from mnemosyne import AccessDenied, Claim, InvalidInput, Node, NotFound, Redacted, Repo, Store, to_json

need_module("httpx")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # a server process for the module

_tenants = itertools.count()
_T = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "store"
    Store.init(path).close()
    made = Served(path)
    yield made
    assert made.stop() == 0, made.stderr
    assert "Traceback" not in made.stderr


def fresh(server, role: str = "admin") -> str:
    """A token of ``role`` on a tenant of its own."""
    tenant = f"t{next(_tenants)}"
    with Store.open(server.path) as store:
        store.create_tenant(tenant)
        return store.create_token(tenant, role).token  # type: ignore[arg-type]


@pytest.fixture
def repo(server):
    with mnemosyne.connect(server.url, token=fresh(server)) as handle:
        yield handle


# -- the client's own ------------------------------------------------------------------


def test_connect_names_the_tenant_and_refuses_a_bad_token_or_url(server) -> None:
    token = fresh(server, "read")
    with mnemosyne.connect(server.url + "/", token=token) as handle:
        assert handle.tenant.startswith("t") and handle.role == "read" and handle.readonly
        with pytest.raises(AccessDenied, match="a read token cannot do this"):
            handle.commit([Node(id="a", content=1)])
    with pytest.raises(AccessDenied, match="unknown, revoked or expired"):
        mnemosyne.connect(server.url, token="mnemo_000000000000_" + "A" * 43)
    with pytest.raises(NotFound, match="this token reaches tenant"):
        mnemosyne.connect(server.url, token=token, tenant="default")
    with pytest.raises(NotFound, match="cannot reach"):
        mnemosyne.connect("http://127.0.0.1:9", token=token)
    with pytest.raises(InvalidInput):
        mnemosyne.connect("ftp://example.org", token=token)


def test_one_line_changes_a_local_loop_into_a_served_one(server, tmp_path) -> None:
    def agent(repo) -> list[str]:
        repo.commit([Node(id="users/mira/lang", content="German")], message="step 1", author="agent")
        repo.commit(
            [Node(id="facts/mira/city", kind="claim", content=Claim("mira", "city", "Oslo", _T))],
            message="step 2",
            author="agent",
        )
        repo.verify("users/mira/lang", by="agent")
        found = repo.search("German", k=3)
        packed = repo.context("German", 100)
        facts = repo.facts("mira")
        return [
            to_json([hit.node for hit in found]),
            packed.render(),
            to_json([fact.node for fact in facts]),
            to_json([c.message for c in repo.log()]),
            to_json([v.status for v in repo.history("users/mira/lang")]),
            to_json(repo.blame("users/mira/lang").lines[0].text),
        ]

    with Repo.init(tmp_path / "local") as local:
        here = agent(local)
    with mnemosyne.connect(server.url, token=fresh(server, "write")) as served:
        there = agent(served)
    assert there == here


def test_erasure_merges_and_streams(server) -> None:
    with mnemosyne.connect(server.url, token=fresh(server)) as repo:
        first = repo.commit([Node(id="x", content="base"), Node(id="gone", content="secret")])
        repo.branch("side")
        repo.commit([Node(id="x", content="ours")])
        repo.commit([Node(id="x", content="theirs")], branch="side")
        stopped = repo.merge("side")
        assert stopped.commit is None and [c.id for c in stopped.conflicts] == ["x"]
        merged = repo.merge("side", strategy="theirs")
        assert merged.commit is not None and repo.get("x").content == "theirs"
        report = repo.forget("gone", "asked to")
        assert [r.reason for r in report.redactions] == ["asked to"]
        with pytest.raises(Redacted, match="asked to"):
            repo.get("gone", at=first.id)
        side = repo.tip("side")
        assert repo.delete_branch("side").id == side and repo.tip("side") is None
        many = [repo.commit([Node(id=f"n/{i}", content=i)]) for i in range(5)]
        stream = repo.log()
        assert next(stream).id == many[-1].id
        stream.close()  # read no further: the connection goes back
        assert [c.id for c in repo.log(limit=2)] == [many[-1].id, many[-2].id]


def test_forgetting_several_ids_over_http_is_all_or_nothing(server) -> None:
    with mnemosyne.connect(server.url, token=fresh(server)) as repo:
        first = repo.commit([Node(id="a", content="one"), Node(id="b", content="two")])
        with pytest.raises(NotFound, match="never/was"):
            repo.forget(["a", "never/was"], "asked to")
        assert repo.get("a", at=first.id).content == "one"  # the id before it stands
        assert [c.id for c in repo.log(limit=1)] == [first.id]
        report = repo.forget(["a", "b", "a"], "asked to")
        assert sorted(r.id for r in report.redactions) == ["a", "b"]
        assert report.commit is not None and [c.id for c in repo.log(limit=2)] == [report.commit.id, first.id]
        for node_id in ("a", "b"):
            with pytest.raises(Redacted, match="asked to"):
                repo.get(node_id, at=first.id)


def test_acknowledged_commits_from_racing_writers_are_all_in_the_log(server) -> None:
    token = fresh(server, "write")
    acknowledged: list[str] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with mnemosyne.connect(server.url, token=token) as repo:
                for i in range(15):
                    made = repo.commit([Node(id=f"w{n}/{i}", content=i)], message=f"{n}.{i}")
                    acknowledged.append(made.id)
                    assert repo.get(f"w{n}/{i}").content == i
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with mnemosyne.connect(server.url, token=token) as repo:
        logged = {c.id for c in repo.log()}
        assert set(acknowledged) <= logged and len(acknowledged) == 90
        assert len(list(repo.nodes())) == 90
