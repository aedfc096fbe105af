"""``MnemosyneSaver`` and ``MnemosyneStore`` on a served store: a real ``mnemo serve``, reached with a token.

LangGraph's conformance suite runs against the saver over HTTP as it does against a
local one, each capability on a fresh tenant; the store's behaviours shared with
LangGraph's own store (tests/test_langgraph_store.py) run again on a served handle.
Then the round trips each LangGraph call costs over HTTP, counted by the client's
transport: the figures docs/langgraph.md and ADR 68 state.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.store.base import BaseStore
from support.components import need_module
from support.served import Served

# The store's behaviours a served handle runs, collected here with this module's fixtures.
from test_langgraph_store import (  # noqa: F401
    test_a_bad_op_writes_nothing_and_says_why,
    test_a_namespace_lives_while_it_holds_items,
    test_async_methods,
    test_batch_results_follow_the_ops_and_reads_see_the_store_before_the_batch,
    test_labels_and_keys_ids_refuse_still_round_trip,
    test_list_namespaces,
    test_namespaces_langgraph_refuses,
    test_one_batch_is_one_commit,
    test_put_get_update_delete,
    test_puts_to_one_key_in_a_batch_keep_the_last,
    test_search_filters,
    test_search_order_without_query_is_namespace_then_key,
    test_search_pages_cover_everything_once,
    test_search_scope_is_a_namespace_prefix_by_labels,
)

from mnemosyne import InvalidInput, Node, Repo, Store, to_json
from mnemosyne.integrations.client import ServedRepo
from mnemosyne.integrations.langgraph import MnemosyneSaver, MnemosyneStore
from mnemosyne.integrations.langgraph.threads import namespace_segment

httpx = need_module("httpx")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # a server process for the module

_tenants = itertools.count()


class Counting(httpx.HTTPTransport):  # type: ignore[misc]
    """The client's transport, counting the requests it sends: ``(method, path)`` each."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: Any) -> Any:
        self.sent.append((request.method, request.url.path.split("/", 5)[-1]))
        return super().handle_request(request)

    def trips(self, work: Any) -> int:
        """How many requests ``work()`` sends."""
        before = len(self.sent)
        work()
        return len(self.sent) - before


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("served") / "store"
    Store.init(path).close()
    made = Served(path)
    yield made
    assert made.stop() == 0, made.stderr
    assert "Traceback" not in made.stderr


def connect(server: Served, role: str = "admin") -> tuple[ServedRepo, Counting]:
    """A handle on a tenant of its own, with a token of ``role``, and its counting transport."""
    tenant = f"lg{next(_tenants)}"
    with Store.open(server.path) as store:
        store.create_tenant(tenant)
        token = store.create_token(tenant, role).token  # type: ignore[arg-type]
    counting = Counting()
    return ServedRepo(server.url, token=token, transport=counting), counting


@pytest.fixture
def served(server: Served) -> Iterator[tuple[ServedRepo, Counting]]:
    handle, counting = connect(server)
    yield handle, counting
    handle.close()


@pytest.fixture
def store(served: tuple[ServedRepo, Counting]) -> BaseStore:
    return MnemosyneStore(served[0])


@pytest.fixture
def ours(served: tuple[ServedRepo, Counting]) -> MnemosyneStore:
    return MnemosyneStore(served[0])


# -- LangGraph's conformance suite, over HTTP ------------------------------------------


def test_the_saver_over_http_passes_langgraph_conformance_suite(server: Served) -> None:
    handles: list[ServedRepo] = []

    @checkpointer_test(name="MnemosyneSaver[served]")
    async def fresh() -> AsyncIterator[MnemosyneSaver]:
        handle, _ = connect(server)  # a fresh tenant for each capability, as the suite asks
        handles.append(handle)
        yield MnemosyneSaver(handle)
        handle.close()

    report = asyncio.run(validate(fresh))
    counts = {name: (r.tests_passed, r.tests_failed, r.failures) for name, r in report.results.items()}
    assert report.passed_all(), counts
    assert report.conformance_level() == "FULL" and len(counts) == 8 and len(handles) == 8
    assert all(passed > 0 and failed == 0 for passed, failed, _ in counts.values())


# -- round trips -------------------------------------------------------------------------


def _checkpoint(step: int, versions: dict[str, int]) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1ef{step:05d}-0000-6000-8000-000000000000"
    checkpoint["channel_values"] = {name: f"{name} at {version}" for name, version in versions.items()}
    checkpoint["channel_versions"] = dict(versions)
    return checkpoint


class Steps:
    """One thread's checkpoints of twelve channels, two changed a step, as a running graph puts them."""

    def __init__(self, saver: MnemosyneSaver, thread_id: str) -> None:
        self.saver = saver
        self.versions = {f"c{i:02d}": 1 for i in range(12)}
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.step = 0

    def put(self) -> None:
        changed = list(self.versions) if self.step == 0 else [f"c{self.step % 12:02d}", "c00"]
        for name in changed:
            self.versions[name] += self.step > 0
        self.step += 1
        metadata: Any = {"source": "loop", "step": self.step, "parents": {}}
        new = {name: self.versions[name] for name in changed}
        self.config = self.saver.put(self.config, _checkpoint(self.step, self.versions), metadata, new)

    def writes(self, task: str) -> None:
        self.saver.put_writes(self.config, [("c01", f"written by {task}")], task)


def test_round_trips_of_the_saver_over_http_are_few_and_fixed(server: Served) -> None:
    handle, counting = connect(server)
    with handle:
        steps = Steps(MnemosyneSaver(handle), "chat-1")
        latest = {"configurable": {"thread_id": "chat-1"}}
        # A thread's first put: its tip and erasure count, the branch started, the commit.
        assert counting.trips(steps.put) == 3
        # Every put after: one commit naming the tip it read (If-Match), whatever the channels.
        assert [counting.trips(steps.put) for _ in range(5)] == [1] * 5
        # The latest, just put: freshness, and its writes (a task's may come before it); then
        # known whole: freshness alone.
        assert [counting.trips(lambda: steps.saver.get_tuple(latest)) for _ in range(3)] == [2, 1, 1]
        # A task's writes: one commit each (the checkpoint's writes were read with it).
        assert [counting.trips(lambda t=t: steps.writes(t)) for t in ("t1", "t2")] == [1, 1]
        # A running graph's super-step: the new checkpoint's writes read once, two commits.
        assert counting.trips(steps.put) == 1
        assert [counting.trips(lambda t=t: steps.writes(t)) for t in ("t3", "t4")] == [2, 1]
        assert counting.trips(steps.put) == 1
        # A saver that knows nothing (another process): freshness, the pointer (every place it
        # may be, in one read), the checkpoint, its twelve values in one read of a prefix, its
        # writes; a put: freshness, the pointer and the parent in one read, the namespace's value
        # nodes at the tip (what each holds, which to drop: ADR 65), the commit.
        fresh = MnemosyneSaver(handle)
        assert counting.trips(lambda: fresh.get_tuple(latest)) == 5
        cold = Steps(MnemosyneSaver(handle), "chat-1")
        cold.config, cold.versions, cold.step = steps.config, dict(steps.versions), steps.step
        assert counting.trips(cold.put) == 4
        # A task's writes from a saver that knows nothing: the tip, the task's writes there, the
        # checkpoint (for its step, in the message), the commit.
        other = Steps(MnemosyneSaver(handle), "chat-1")
        other.config = cold.config
        assert counting.trips(lambda: other.writes("t5")) == 4
        # One checkpoint by its id, an earlier one: the tip, the node with the commit of its put,
        # its values there, its writes.
        named = {"configurable": {**steps.config["configurable"]}}
        assert counting.trips(lambda: MnemosyneSaver(handle).get_tuple(named)) == 4
        # Listing one thread: its tip, every node of it in one stream, the value nodes' histories
        # (for the values the tip no longer holds); all threads: + the branches.
        assert counting.trips(lambda: list(fresh.list(latest))) == 3
        assert counting.trips(lambda: list(fresh.list(None))) == 4
        found = fresh.get_tuple(latest)
        assert found is not None
        assert found.checkpoint["channel_values"]["c00"] == f"c00 at {cold.versions['c00']}"


def test_round_trips_of_the_store_over_http_are_few_and_fixed(served: tuple[ServedRepo, Counting]) -> None:
    handle, counting = served
    store = MnemosyneStore(handle)
    ns = ("users", "mira")
    for key in ("lang", "city", "food"):  # a put: one commit, no tip to read first
        assert counting.trips(lambda k=key: store.put(ns, k, {"value": f"{k} of mira", "n": 1})) == 1
    # A get: the item with its history (its times), one read.
    assert counting.trips(lambda: store.get(ns, "lang")) == 1
    # A search without a query: the ids listed, then the page with its times.
    assert counting.trips(lambda: store.search(("users",), limit=2)) == 2
    # With a query: the tip, the items, the ranking, the page's times.
    assert counting.trips(lambda: store.search(("users",), query="city", limit=2)) == 4
    assert counting.trips(lambda: store.list_namespaces(prefix=("users",))) == 1
    # A delete: the tip, whether the item is there, the commit.
    assert counting.trips(lambda: store.delete(ns, "food")) == 3
    assert store.get(ns, "food") is None and [i.key for i in store.search(ns)] == ["city", "lang"]


# -- what only a served store does --------------------------------------------------------


def test_an_index_for_a_served_store_is_refused_saying_whose_embeddings_count(
    served: tuple[ServedRepo, Counting],
) -> None:
    index: Any = {"dims": 2, "embed": lambda texts: [[1.0, 0.0] for _ in texts]}
    with pytest.raises(InvalidInput, match="--embedder"):
        MnemosyneStore(served[0], index=index)


def test_the_saver_and_the_store_refuse_what_is_no_repo() -> None:
    for face in (MnemosyneSaver, MnemosyneStore):
        with pytest.raises(InvalidInput, match=r"mnemosyne\.connect"):
            face("store.mnemo")  # type: ignore[arg-type]


def test_a_thread_written_over_http_reads_alike_from_the_store_itself(server: Served) -> None:
    handle, _ = connect(server)
    with handle:
        steps = Steps(MnemosyneSaver(handle), "user@example.com")  # not plain: its branch is escaped
        for _ in range(3):
            steps.put()
        served_tuple = steps.saver.get_tuple({"configurable": {"thread_id": "user@example.com"}})
        tenant = handle.tenant
    with Repo.open(server.path, tenant=tenant) as local:
        local_tuple = MnemosyneSaver(local).get_tuple({"configurable": {"thread_id": "user@example.com"}})
        assert [t.message.split("\n")[0] for t in local.log(at=local.thread_branch("user@example.com"))] == [
            "checkpoint step 3 (loop)",
            "checkpoint step 2 (loop)",
            "checkpoint step 1 (loop)",
        ]
    assert served_tuple is not None and local_tuple is not None
    assert served_tuple.checkpoint == local_tuple.checkpoint and served_tuple.config == local_tuple.config


def _put(saver: MnemosyneSaver, thread: str, values: dict[str, Any], parent: Any, run_id: str) -> Any:
    """A put of every value at version 1 + its step, the ones that differ from the parent's marked changed."""
    step = 0 if parent is None else parent["step"] + 1
    previous = {} if parent is None else parent["values"]
    changed = [name for name, value in values.items() if previous.get(name) != value]
    versions = {name: step + 1 if name in changed else parent["versions"][name] for name in values}
    checkpoint = _checkpoint(step + 1 + (100 if thread != "kept" else 0), versions)
    checkpoint["channel_values"] = dict(values)
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent["config"]["configurable"]["checkpoint_id"]
    metadata: Any = {"source": "loop", "step": step, "parents": {}, "run_id": run_id}
    new = {name: versions[name] for name in changed}
    config = saver.put({"configurable": configurable}, checkpoint, metadata, new)  # type: ignore[arg-type]
    return {"config": config, "values": dict(values), "versions": versions, "step": step}


def test_removal_copy_and_erasure_of_one_id_values_work_over_http(server: Served) -> None:
    handle, _ = connect(server)  # admin: erasure is forget, of one version of a value node
    canary = "leaked passport X123"
    with handle:
        saver = MnemosyneSaver(handle, erase=True)
        clean = _put(saver, "kept", {"kept": "keep me", "leak": "nothing"}, None, "clean")
        leaky = _put(saver, "kept", {"kept": "keep me too", "leak": canary}, clean, "leaky")
        last = _put(saver, "kept", {"kept": "keep me too", "leak": "sealed"}, leaky, "clean")
        # An earlier checkpoint reads from its put's commit; a copy pins what the tip does not hold.
        first = saver.get_tuple(clean["config"])
        assert first is not None and first.checkpoint["channel_values"]["leak"] == "nothing"
        saver.copy_thread("kept", "copied")
        saver.delete_for_runs(["leaky"])  # its checkpoint goes, and the version of `leak` it wrote
        latest = saver.get_tuple({"configurable": {"thread_id": "kept"}})
        assert latest is not None and latest.checkpoint["channel_values"] == last["values"]
        copied = {"configurable": {**clean["config"]["configurable"], "thread_id": "copied"}}
        found = saver.get_tuple(copied)
        assert found is not None and found.checkpoint["channel_values"] == clean["values"]
        assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "kept"}})] == [
            last["config"]["configurable"]["checkpoint_id"],
            clean["config"]["configurable"]["checkpoint_id"],
        ]
        # A run's checkpoints go from every thread: from the copy too.
        theirs = {"configurable": {**leaky["config"]["configurable"], "thread_id": "copied"}}
        assert saver.get_tuple(theirs) is None
        tenant = handle.tenant
    with Repo.open(server.path, tenant=tenant) as local:
        versions = local.history(f"threads/kept/{namespace_segment('')}/~channels/leak", at="threads/kept")
        assert [v.status for v in versions] == ["current", "redacted", "superseded"]
        assert versions[1].node is None and versions[1].redaction is not None


# -- the routes the faces read through -----------------------------------------------------


def test_the_routes_the_faces_need_answer_as_the_library_and_are_documented(server: Served) -> None:
    tenant = f"lg{next(_tenants)}"
    with Store.open(server.path) as store:
        store.create_tenant(tenant)
        token = store.create_token(tenant, "read").token
    with Repo.open(server.path, tenant=tenant) as local:
        local.commit([Node(id="a/1", content=1), Node(id="a/2", content=[2]), Node(id="b", content="x")])
        local.commit([Node(id="a/1", content=11)])
        local.forget("b", "asked")
        tip = local.resolve()
        want_histories = local.histories(["a/1", "b", "nope", "a/2"], at=tip, limit=1)
        want_ids = list(local.ids(prefix="a/"))
        want_fresh = local.freshness(local.head)
        head = local.head
    with server.client(token) as http:
        base = f"/v1/tenants/{tenant}"
        body = {"ids": ["a/1", "b", "nope", "a/2"], "at": tip.id, "limit": 1}
        answer = http.post(f"{base}/histories", json=body)
        assert answer.status_code == 200
        assert answer.text == to_json(want_histories)  # the library's own answer, in the one JSON form
        assert list(answer.json()) == ["a/1", "b", "nope", "a/2"]  # in the order asked
        listed = http.get(f"{base}/ids", params={"prefix": "a/"})
        assert listed.status_code == 200 and listed.headers["etag"] == f'"{tip.id}"'
        assert listed.json()["ids"] == want_ids and listed.json()["commit"]["id"] == tip.id
        fresh = http.get(f"{base}/freshness/{head}")
        assert want_fresh.erasures == 1
        assert fresh.json() == {"tip": want_fresh.tip, "erasures": want_fresh.erasures}
        assert http.get(f"{base}/freshness/threads%2Fnone").json() == {"tip": None, "erasures": 1}
        refused = http.post(f"{base}/histories", json={"ids": "a/1"})
        assert refused.status_code == 400 and refused.json()["error"]["kind"] == "InvalidInput"
        paths = http.get("/v1/openapi.json").json()["paths"]
    documented = {
        ("post", "/v1/tenants/{tenant}/histories"),
        ("get", "/v1/tenants/{tenant}/ids"),
        ("get", "/v1/tenants/{tenant}/freshness/{name}"),
    }
    for method, path in documented:
        operation = paths[path][method]
        assert operation["x-mnemo-role"] == "read" and "200" in operation["responses"]
    assert "requestBody" in paths["/v1/tenants/{tenant}/histories"]["post"]
