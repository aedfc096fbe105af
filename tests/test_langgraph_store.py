"""MnemosyneStore, LangGraph's long-term memory store on a repo.

The first part is one suite run against our store (in memory and on LMDB) and
against LangGraph's own InMemoryStore, so both are held to the behaviours
LangGraph's store tests describe. The second part tests what only ours does:
history, as-of reads, provenance, commits, TTL, the id encoding.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore
from support.clocks import Clock
from support.tiers import examples

from mnemosyne import InvalidInput, MnemoError, NotFound, Repo
from mnemosyne.integrations.langgraph import namespaces
from mnemosyne.integrations.langgraph.store import MnemosyneStore
from mnemosyne.model.validation import check_id

KINDS = ["mnemosyne-memory", "mnemosyne-lmdb", "langgraph-inmemory"]
VOCAB = ["apple", "banana", "cherry", "python", "typescript", "guide", "tutorial", "rust"]


class Spy:
    """A tiny embedding function: one dimension per word of VOCAB; remembers what it embedded."""

    dims = len(VOCAB) + 1

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen += texts
        return [[float(word in text.lower()) for word in VOCAB] + [0.01] for text in texts]


Factory = Callable[..., BaseStore]


@pytest.fixture(params=KINDS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of empty stores of one kind: ``make(index=None)``."""
    repos: list[Repo] = []

    def factory(index: Any = None) -> BaseStore:
        if request.param == "langgraph-inmemory":
            return InMemoryStore(index=index)
        if request.param == "mnemosyne-memory":
            repo = Repo.in_memory()
        else:
            repo = Repo.init(tmp_path / f"store{len(repos)}.mnemo", sync=False)
        repos.append(repo)
        return MnemosyneStore(repo, index=index)

    yield factory
    for repo in repos:
        repo.close()


@pytest.fixture
def store(make: Factory) -> BaseStore:
    return make()


@pytest.fixture
def ours() -> Iterator[MnemosyneStore]:
    with Repo.in_memory() as repo:
        yield MnemosyneStore(repo)


def keys(items: Sequence[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(tuple(item.namespace), item.key) for item in items]


# -- one suite, three stores ------------------------------------------------------


def test_put_get_update_delete(store: BaseStore) -> None:
    ns = ("users", "mira")
    assert store.get(ns, "lang") is None
    store.put(ns, "lang", {"value": "de", "nested": {"a": [1, 2.5, None, True]}})
    item = store.get(ns, "lang")
    assert item is not None
    assert (item.namespace, item.key) == (ns, "lang")
    assert item.value == {"value": "de", "nested": {"a": [1, 2.5, None, True]}}
    assert item.created_at <= item.updated_at and item.created_at.tzinfo is not None
    store.put(ns, "lang", {"value": "fr"})
    again = store.get(ns, "lang")
    assert again is not None and again.value == {"value": "fr"}
    assert again.updated_at >= item.updated_at
    store.delete(ns, "lang")
    assert store.get(ns, "lang") is None
    store.delete(ns, "never-written")  # deleting an absent item is not an error
    assert store.get(("users",), "mira") is None  # a namespace is not an item


def test_batch_results_follow_the_ops_and_reads_see_the_store_before_the_batch(store: BaseStore) -> None:
    store.put(("docs",), "old", {"text": "before"})
    results = store.batch(
        [
            PutOp(("docs",), "new", {"text": "written"}),
            GetOp(("docs",), "new"),
            GetOp(("docs",), "old"),
            SearchOp(("docs",)),
            ListNamespacesOp(),
            PutOp(("docs",), "old", None),
        ]
    )
    assert results[0] is None and results[5] is None
    assert results[1] is None  # the batch's own put is not visible to its reads
    assert results[2] is not None and results[2].value == {"text": "before"}
    assert keys(results[3]) == [(("docs",), "old")]
    assert results[4] == [("docs",)]
    assert store.get(("docs",), "new") is not None and store.get(("docs",), "old") is None


def test_puts_to_one_key_in_a_batch_keep_the_last(store: BaseStore) -> None:
    store.batch([PutOp(("a",), "k", {"n": 1}), PutOp(("a",), "k", {"n": 2}), PutOp(("a",), "j", {"n": 3})])
    assert store.get(("a",), "k").value == {"n": 2}  # type: ignore[union-attr]
    store.batch([PutOp(("a",), "k", {"n": 4}), PutOp(("a",), "k", None)])
    assert store.get(("a",), "k") is None
    store.batch([PutOp(("a",), "j", None), PutOp(("a",), "j", {"n": 5})])
    assert store.get(("a",), "j").value == {"n": 5}  # type: ignore[union-attr]


def test_search_filters(store: BaseStore) -> None:
    rows = {
        "a": {"color": "red", "score": 4.5, "n": 1, "tags": ["x"], "meta": {"lang": "de"}},
        "b": {"color": "blue", "score": 3.0, "n": 2, "tags": ["x", "y"], "meta": {"lang": "fr"}},
        "c": {"color": "red", "score": 1.0, "n": 3, "tags": [], "meta": {"lang": "de", "v": 2}},
    }
    for key, value in rows.items():
        store.put(("items",), key, value)
    store.put(("other",), "d", {"color": "red", "score": 9.0})

    def found(filter: dict[str, Any]) -> set[str]:
        return {item.key for item in store.search(("items",), filter=filter)}

    assert found({}) == {"a", "b", "c"}
    assert found({"color": "red"}) == {"a", "c"}
    assert found({"color": {"$eq": "blue"}}) == {"b"}
    assert found({"color": {"$ne": "red"}}) == {"b"}
    assert found({"score": {"$gt": 3.0}}) == {"a"}
    assert found({"score": {"$gte": 3.0}}) == {"a", "b"}
    assert found({"score": {"$lt": 3.0}}) == {"c"}
    assert found({"score": {"$lte": 3.0}}) == {"b", "c"}
    assert found({"score": {"$gt": 1.0, "$lt": 4.5}}) == {"b"}
    assert found({"color": "red", "n": {"$gte": 2}}) == {"c"}
    assert found({"tags": ["x", "y"]}) == {"b"}
    assert found({"meta": {"lang": "de"}}) == {"a", "c"}  # a map matches the keys it names
    assert found({"color": "green"}) == set()


def test_search_scope_is_a_namespace_prefix_by_labels(store: BaseStore) -> None:
    store.put(("users",), "top", {"v": 0})
    store.put(("users", "mira"), "k", {"v": 1})
    store.put(("users", "mira", "prefs"), "k", {"v": 2})
    store.put(("users2",), "k", {"v": 3})
    store.put(("users/mira",), "k", {"v": 4})
    assert set(keys(store.search(("users",)))) == {
        (("users",), "top"),
        (("users", "mira"), "k"),
        (("users", "mira", "prefs"), "k"),
    }
    assert set(keys(store.search(("users", "mira")))) == {
        (("users", "mira"), "k"),
        (("users", "mira", "prefs"), "k"),
    }
    assert len(store.search(())) == 5


def test_search_pages_cover_everything_once(store: BaseStore) -> None:
    for n in range(13):
        store.put(("pages", str(n % 3)), f"k{n:02}", {"n": n})
    pages = [store.search(("pages",), limit=5, offset=offset) for offset in (0, 5, 10, 15)]
    assert [len(page) for page in pages] == [5, 5, 3, 0]
    seen = [key for page in pages for key in keys(page)]
    assert len(set(seen)) == 13
    assert keys(store.search(("pages",), limit=20)) == seen  # pages follow one stable order


def test_list_namespaces(store: BaseStore) -> None:
    for ns in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("x",),
    ]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == sorted(
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("x",),
        ]
    )
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("*", "e")) == [("a", "b", "d", "e")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("x",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert store.list_namespaces(prefix=("zzz",)) == []


@pytest.mark.parametrize(
    "namespace",
    [("langgraph", "x"), (), ("a.b",), ("",), ("a", ""), ("nul\x00",)],
)
def test_namespaces_langgraph_refuses(store: BaseStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"v": 1})
    if isinstance(
        store, MnemosyneStore
    ):  # ops given to batch directly are checked too (not by InMemoryStore)
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(namespace, "k", {"v": 1})])


def test_labels_and_keys_ids_refuse_still_round_trip(store: BaseStore) -> None:
    awkward = [
        (("a/b", "c d", "ünï", "tab\there", "%2F", "~"), ".."),
        (("users", "a/b"), "k"),
        (("users", "a", "b"), "k"),
        (("long" * 100,), "key" * 100),
        (("x",), ""),
        (("x",), "/"),
    ]
    for n, (ns, key) in enumerate(awkward):
        store.put(ns, key, {"n": n})
    for n, (ns, key) in enumerate(awkward):
        item = store.get(ns, key)
        assert item is not None and item.value == {"n": n} and (item.namespace, item.key) == (ns, key)
    assert {item.value["n"] for item in store.search(("users",))} == {1, 2}
    assert store.list_namespaces(prefix=("long" * 100,)) == [("long" * 100,)]


def test_query_ranks_by_meaning_and_embeds_the_configured_fields(make: Factory) -> None:
    spy = Spy()
    store = make(index={"dims": Spy.dims, "embed": spy, "fields": ["text"]})
    store.put(("docs",), "py", {"text": "a python tutorial", "tag": "banana"})
    store.put(("docs",), "ts", {"text": "a typescript guide", "tag": "cherry"})
    store.put(("docs",), "skip", {"text": "python python rust"}, index=False)
    store.put(("docs",), "own", {"text": "nothing", "title": "rust guide"}, index=["title"])
    results = store.search(("docs",), query="typescript guide")
    assert results[0].key == "ts" and results[0].score is not None
    assert {item.key for item in results} == {"py", "ts", "skip", "own"}  # a query filters nothing out
    assert "a python tutorial" in spy.seen and "rust guide" in spy.seen
    assert not any("banana" in text or "cherry" in text for text in spy.seen)  # only the fields
    assert not any("rust" in text and "python" in text for text in spy.seen)  # index=False: not embedded
    assert [item.key for item in store.search(("docs",), query="python", filter={"tag": "banana"})] == ["py"]


def test_async_methods(store: BaseStore) -> None:
    async def run() -> None:
        await store.aput(("a",), "k", {"v": 1})
        item = await store.aget(("a",), "k")
        assert item is not None and item.value == {"v": 1}
        assert keys(await store.asearch(("a",))) == [(("a",), "k")]
        assert await store.alist_namespaces() == [("a",)]
        await store.adelete(("a",), "k")
        assert await store.aget(("a",), "k") is None

    asyncio.run(run())


# -- ours only ------------------------------------------------------------------------


def test_one_batch_is_one_commit(ours: MnemosyneStore) -> None:
    repo = ours.repo
    ours.put(("a",), "gone", {"v": 0})
    before = len(list(repo.log()))
    ours.batch(
        [
            PutOp(("a",), "x", {"v": 1}),
            PutOp(("b", "c"), "y", {"v": 2}),
            GetOp(("a",), "x"),
            PutOp(("a",), "gone", None),
            PutOp(("a",), "absent", None),
        ]
    )
    (commit, *_) = repo.log()
    assert len(list(repo.log())) == before + 1
    assert repo.get(namespaces.node_id(("a",), "gone")) is None
    ours.batch([GetOp(("a",), "x"), SearchOp(("a",)), ListNamespacesOp()])
    ours.delete(("a",), "absent")
    assert len(list(repo.log())) == before + 1  # reads and absent deletes write nothing
    assert commit.author == "langgraph"


@pytest.mark.parametrize(
    "bad",
    [
        PutOp(("a",), "bad", {"v": float("nan")}),
        PutOp(("a",), "bad", {"v": {1, 2}}),
        PutOp(("a",), "bad", ["not", "a", "map"]),  # type: ignore[arg-type]
        PutOp(("a.b",), "bad", {"v": 1}),
        PutOp(("a",), 7, {"v": 1}),  # type: ignore[arg-type]
        PutOp(("a",), "bad", {"v": 1}, ttl=float("inf")),
        PutOp(("a",), "bad", {"v": 1}, ttl=1e12),  # past any date
        PutOp(("a",), "bad", {"v": 1}, ttl=-1),
        PutOp(("a",), "\ud800", {"v": 1}),  # a lone surrogate is no text
        PutOp(("a", "\udc80"), "bad", {"v": 1}),
        SearchOp(("a",), filter={"v": {"$regex": "x"}}),
        SearchOp(("a",), limit=-1),
    ],
)
def test_a_bad_op_writes_nothing_and_says_why(ours: MnemosyneStore, bad: Any) -> None:
    ours.put(("a",), "kept", {"v": 0})
    before = ours.repo.resolve().id
    with pytest.raises((MnemoError, InvalidNamespaceError)) as caught:
        ours.batch([PutOp(("a",), "kept", {"v": 1}), PutOp(("a",), "new", {"v": 2}), bad])
    assert isinstance(caught.value, ValueError) and str(caught.value)
    assert ours.repo.resolve().id == before
    assert ours.get(("a",), "kept").value == {"v": 0}  # type: ignore[union-attr]
    assert ours.get(("a",), "new") is None


def test_created_at_stays_history_and_as_of() -> None:
    clock = Clock()
    with Repo.in_memory(clock=clock) as repo:
        store = MnemosyneStore(repo)
        store.put(("u",), "k", {"v": 1})
        first = store.get(("u",), "k")
        assert first is not None
        t1 = first.updated_at
        store.put(("u",), "k", {"v": 2})
        store.put(("u",), "k", {"v": 3})
        now = store.get(("u",), "k")
        assert first is not None and now is not None
        assert now.created_at == first.created_at and now.updated_at > first.updated_at
        assert [item.value["v"] for item in store.history(("u",), "k")] == [3, 2, 1]
        assert all(item.created_at == first.created_at for item in store.history(("u",), "k"))
        old = store.get(("u",), "k", as_of=t1)
        assert old is not None and old.value == {"v": 1} and old.updated_at == first.updated_at
        assert store.get(("u",), "k", as_of=t1.isoformat()) == old  # RFC 3339 text too
        assert store.get(("u",), "k", as_of="2000-01-01") is None  # before the store existed
        store.delete(("u",), "k")
        store.put(("u",), "k", {"v": 4})
        reborn = store.get(("u",), "k")
        assert reborn is not None and reborn.created_at > now.updated_at  # a delete ends a life
        assert [item.value["v"] for item in store.history(("u",), "k")] == [4, 3, 2, 1]


def test_ttl_expires_and_reads_refresh_it() -> None:
    clock = Clock(step=timedelta(0))
    with Repo.in_memory(clock=clock) as repo:
        store = MnemosyneStore(repo)
        assert store.supports_ttl
        store.put(("s",), "kept", {"v": 1}, ttl=10)
        store.put(("s",), "left", {"v": 2}, ttl=10)
        store.put(("s",), "forever", {"v": 3})
        written = store.get(("s",), "kept", refresh_ttl=False)
        clock.now += timedelta(minutes=6)
        refreshed = store.get(("s",), "kept")  # refresh_ttl defaults to True: pushed to +16
        assert store.get(("s",), "left", refresh_ttl=False) is not None
        assert refreshed is not None and written is not None
        assert refreshed.updated_at == written.updated_at  # a refresh is not an update
        clock.now += timedelta(minutes=6)
        assert store.get(("s",), "left") is None  # expired: never returned
        assert keys(store.search(("s",), refresh_ttl=False)) == [(("s",), "forever"), (("s",), "kept")]
        assert [item.value for item in store.history(("s",), "kept")] == [{"v": 1}]
        clock.now += timedelta(minutes=11)
        assert keys(store.search(("s",))) == [(("s",), "forever")]
        assert store.list_namespaces() == [("s",)]


def test_default_ttl_from_the_config() -> None:
    clock = Clock(step=timedelta(0))
    with Repo.in_memory(clock=clock) as repo:
        store = MnemosyneStore(repo, ttl={"default_ttl": 1, "refresh_on_read": False})
        store.put(("s",), "k", {"v": 1})
        store.get(("s",), "k")
        clock.now += timedelta(minutes=2)
        assert store.get(("s",), "k") is None


def test_a_namespace_lives_while_it_holds_items(ours: MnemosyneStore) -> None:
    # LangGraph's InMemoryStore keeps an emptied namespace listed; its SQL stores do not, nor do we.
    ours.put(("x", "y"), "k", {"v": 1})
    ours.delete(("x", "y"), "k")
    assert ours.list_namespaces() == []


def test_search_order_without_query_is_namespace_then_key(ours: MnemosyneStore) -> None:
    for ns, key in [(("b",), "a"), (("a", "z"), "b"), (("a",), "c"), (("a",), "b")]:
        ours.put(ns, key, {"v": key})
    assert keys(ours.search(())) == [(("a",), "b"), (("a",), "c"), (("a", "z"), "b"), (("b",), "a")]
    assert all(item.score is None for item in ours.search(()))


def test_provenance_outside_a_run(ours: MnemosyneStore) -> None:
    ours.put(("a",), "k", {"v": 1})
    node = ours.repo.get(namespaces.node_id(("a",), "k"))
    assert node is not None and node.provenance.source == "langgraph" and node.provenance.observation is None


class State(TypedDict):
    text: str


def test_a_graph_writes_with_the_thread_in_its_provenance() -> None:
    def remember(state: State) -> State:
        get_store().put(("memories", "mira"), "fact", {"text": state["text"]})
        return state

    def note(state: State, store: BaseStore) -> State:
        store.put(("memories", "mira"), "seen", {"text": "noted"})
        return state

    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        graph = (
            StateGraph(State)
            .add_node("remember", remember)
            .add_node("note", note)
            .add_edge(START, "remember")
            .add_edge("remember", "note")
            .add_edge("note", END)
            .compile(store=store)
        )
        graph.invoke({"text": "Mira prefers French"}, {"configurable": {"thread_id": "thread-7"}})
        assert store.get(("memories", "mira"), "fact").value == {"text": "Mira prefers French"}  # type: ignore[union-attr]
        fact = repo.blame(namespaces.node_id(("memories", "mira"), "fact"))
        seen = repo.get(namespaces.node_id(("memories", "mira"), "seen"))
        assert seen is not None
        assert (fact.node.provenance.observation, fact.node.provenance.tool_call) == ("thread-7", "remember")
        assert (seen.provenance.observation, seen.provenance.tool_call) == ("thread-7", "note")
        assert isinstance(fact.node.provenance.agent_step, int)
        assert fact.commit.meta is not None and fact.commit.meta["thread_id"] == "thread-7"


def test_a_store_on_a_branch_leaves_main_alone() -> None:
    with Repo.in_memory() as repo:
        MnemosyneStore(repo).put(("a",), "k", {"v": "main"})
        repo.branch("review/run-1")
        review = MnemosyneStore(repo, branch="review/run-1")
        review.put(("a",), "k", {"v": "review"})
        assert MnemosyneStore(repo).get(("a",), "k").value == {"v": "main"}  # type: ignore[union-attr]
        assert review.get(("a",), "k").value == {"v": "review"}  # type: ignore[union-attr]
        with pytest.raises(NotFound):
            MnemosyneStore(repo, branch="sdie")


def test_from_path_creates_opens_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "agent.mnemo"
    with MnemosyneStore.from_path(path) as store:
        store.put(("a",), "k", {"v": 1})
    with MnemosyneStore.from_path(path, tenant="acme") as acme:
        assert acme.get(("a",), "k") is None  # another tenant
    with MnemosyneStore.from_path(path) as store:
        assert store.get(("a",), "k").value == {"v": 1}  # type: ignore[union-attr]
    Repo.open(path).close()  # closed: nothing holds it


def test_misuse_is_a_clear_error(ours: MnemosyneStore) -> None:
    with pytest.raises(InvalidInput):
        MnemosyneStore("not a repo")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        MnemosyneStore(ours.repo, index={"dims": 0, "embed": Spy()})
    with pytest.raises(InvalidInput):
        ours.batch([object()])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        ours.list_namespaces(limit=-1)
    with pytest.raises(InvalidInput):
        ours.search(("a",), filter="color")  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError):
        ours.history(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        ours.batch([ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),))])


labels = st.text(st.characters(blacklist_characters=".\x00", codec="utf-8"), min_size=1, max_size=90).filter(
    lambda label: label != "langgraph"
)
items = st.tuples(st.lists(labels, min_size=1, max_size=4).map(tuple), st.text(max_size=90))


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(items, min_size=2, max_size=6, unique=True))
def test_ids_are_valid_and_never_collide(pairs: list[tuple[tuple[str, ...], str]]) -> None:
    ids = [namespaces.node_id(ns, key) for ns, key in pairs]
    assert len(set(ids)) == len(ids)
    for (ns, key), item_id in zip(pairs, ids, strict=True):
        assert check_id(item_id) == item_id
        decoded = namespaces.decode_id(item_id)
        assert decoded is None or decoded == (ns, key)
        full = "/".join([namespaces.ROOT, *map(namespaces.escape, ns), namespaces.escape(key)])
        assert (decoded is None) == (len(full.encode()) > 256)  # only ids too long to read hold a digest
        for cut in range(len(ns) + 1):
            assert item_id.startswith(namespaces.id_prefix(ns[:cut]))


def test_a_label_with_a_slash_is_not_two_labels() -> None:
    assert namespaces.node_id(("users", "a/b"), "k") != namespaces.node_id(("users", "a", "b"), "k")
    assert namespaces.node_id(("users", "a"), "b/k") != namespaces.node_id(("users", "a", "b"), "k")
    assert namespaces.node_id(("x",), "") != namespaces.node_id(("x",), "~")
    assert namespaces.decode_id(namespaces.node_id(("users", "a/b"), "..")) == (("users", "a/b"), "..")


@settings(
    max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(items, min_size=1, max_size=4, unique=True))
def test_items_round_trip_through_the_store(
    ours: MnemosyneStore, pairs: list[tuple[tuple[str, ...], str]]
) -> None:
    ours.batch([PutOp(ns, key, {"n": n}) for n, (ns, key) in enumerate(pairs)])
    for n, (ns, key) in enumerate(pairs):
        item = ours.get(ns, key)
        assert item is not None and (item.namespace, item.key, item.value) == (ns, key, {"n": n})
        assert (ns, key) in keys(ours.search(ns[:1], limit=1000))
    assert set(ours.list_namespaces(limit=10_000)) >= {ns for ns, _ in pairs}


def test_a_store_scoped_to_a_use_and_a_sensitivity_searches_only_what_may_serve_them() -> None:
    clock = Clock(step=timedelta(0))
    with Repo.in_memory(clock=clock, embedder="none") as repo:
        writer = MnemosyneStore(repo)
        writer.put(("u",), "support", {"text": "green tea", "allowed_for": ["support"]})
        billing = {"text": "green tea", "allowed_for": ["billing"], "sensitivity": "public"}
        writer.put(("u",), "billing", billing)
        writer.put(("u",), "personal", {"text": "green tea", "sensitivity": "personal"})
        data = {"text": "green tea", "sensitivity": 0.4, "allowed_for": "all"}  # the item's data, not labels
        writer.put(("u",), "data", data)
        assert repo.get(namespaces.node_id(("u",), "data")).meta.keys() == {"langgraph"}

        def found(store: MnemosyneStore, query: str | None) -> set[str]:
            return {item.key for item in store.search(("u",), query=query)}

        everything = {"support", "billing", "personal", "data"}
        assert found(writer, None) == found(writer, "tea") == everything
        support = MnemosyneStore(repo, allowed_for="support", max_sensitivity="internal")
        assert found(support, None) == found(support, "tea") == {"support", "data"}
        public = MnemosyneStore(repo, max_sensitivity="public")
        assert found(public, "tea") == found(public, None) == {"billing"}
        clock.now += timedelta(days=40)
        repo.verify(namespaces.node_id(("u",), "personal"))
        fresh = MnemosyneStore(repo, verified_within=timedelta(days=30))
        assert found(fresh, None) == found(fresh, "tea") == {"personal"}
        # A TTL refresh keeps the labels: they come from the value.
        ttl = MnemosyneStore(repo, ttl={"default_ttl": 60, "refresh_on_read": True})
        ttl.put(("t",), "k", {"text": "tea", "sensitivity": "public"}, ttl=60)
        clock.now += timedelta(minutes=5)
        assert ttl.get(("t",), "k", refresh_ttl=True) is not None
        assert len(repo.history(namespaces.node_id(("t",), "k"))) == 2  # refreshed: a new version
        assert MnemosyneStore(repo, max_sensitivity="public").search(("t",))[0].key == "k"
