"""The LangGraph store's reads and writes at the cost of LangGraph's own PostgreSQL store (issue 23).

On PostgreSQL, counted with the handle's ``repo.kv.round_trips``: a put is the
commit's two round trips, a get one, a search of a namespace two, whatever the
namespace holds. Under them, the library reads they rest on: ``Repo.ids`` (a
listing that reads no node), ``Repo.histories`` (what ``get`` and ``history``
say of many ids, in one read) and ``Repo.nodes`` reading its chunks a level at a
time and its nodes a batch at once. The behaviour is the store's as before
(tests/test_langgraph_store.py): these tests pin what the faster reads must keep.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp
from support.clocks import Clock

from mnemosyne import History, InvalidInput, Node, Repo
from mnemosyne.history import walk
from mnemosyne.integrations.langgraph.items import ItemMeta, meta_of
from mnemosyne.integrations.langgraph.namespaces import node_id
from mnemosyne.integrations.langgraph.store import MnemosyneStore


def _item(i: int) -> dict[str, Any]:
    return {"text": f"note {i}: short answers about topic {i % 7}", "n": i}


def _trips(repo: Repo, work: Callable[[], object]) -> int:
    kv: Any = repo.kv
    before = kv.round_trips
    work()
    return int(kv.round_trips - before)


@pytest.fixture
def repos(tmp_path: Path) -> Iterator[Callable[[str], Repo]]:
    """Stores of each local kind, closed at the end: ``make("memory" | "lmdb")``."""
    made: list[Repo] = []

    def make(kind: str, **options: Any) -> Repo:
        repo = (
            Repo.in_memory(**options)
            if kind == "memory"
            else Repo.init(tmp_path / f"s{len(made)}.mnemo", sync=False, **options)
        )
        made.append(repo)
        return repo

    yield make
    for repo in made:
        repo.close()


# -- round trips on PostgreSQL ------------------------------------------------------


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[MnemosyneStore]:
    """A store on PostgreSQL holding a namespace of 300 items, its handle warm (as an agent's is)."""
    with Repo.init(pg_url) as repo:
        store = MnemosyneStore(repo)
        store.batch([PutOp(("notes",), f"item-{i:03d}", _item(i)) for i in range(300)])
        for k in range(3):  # the read-ahead learns what each kind of transaction reads first
            store.put(("users", "u1"), f"warm-{k}", _item(k))
            store.get(("users", "u1"), f"warm-{k}")
            store.search(("notes",), limit=10)
        yield store


@pytest.mark.slow
def test_a_put_is_the_commits_two_round_trips(pg_store: MnemosyneStore) -> None:
    repo = pg_store.repo
    for k in range(3):
        # No tip read first, none passed as text to resolve: last writer wins, as an upsert.
        assert _trips(repo, lambda k=k: pg_store.put(("users", "u1"), f"k{k}", _item(k))) == 2
    assert _trips(repo, lambda: pg_store.put(("users", "u1"), "k0", _item(99))) == 2  # an update too


@pytest.mark.slow
def test_a_get_is_one_round_trip_times_included(pg_store: MnemosyneStore) -> None:
    repo = pg_store.repo
    pg_store.put(("users", "u1"), "lang", {"v": "de"})
    pg_store.put(("users", "u1"), "lang", {"v": "fr"})
    for _ in range(3):
        item = None

        def get() -> None:
            nonlocal item
            item = pg_store.get(("users", "u1"), "lang")

        assert _trips(repo, get) == 1
        assert item is not None and item.value == {"v": "fr"} and item.created_at < item.updated_at
    assert _trips(repo, lambda: pg_store.get(("users", "u1"), "absent")) == 1


@pytest.mark.slow
def test_a_search_is_two_round_trips_whatever_the_namespace_holds(pg_store: MnemosyneStore) -> None:
    repo = pg_store.repo
    found: list[Any] = []
    assert _trips(repo, lambda: found.extend(pg_store.search(("notes",), limit=10))) == 2
    assert [item.key for item in found] == [f"item-{i:03d}" for i in range(10)]
    pg_store.batch([PutOp(("notes",), f"more-{i:03d}", _item(i)) for i in range(300)])
    pg_store.search(("notes",), limit=10, offset=20)
    assert _trips(repo, lambda: pg_store.search(("notes",), limit=10, offset=20)) == 2


@pytest.mark.slow
def test_a_batch_of_reads_reads_one_snapshot_in_few_round_trips(pg_store: MnemosyneStore) -> None:
    repo = pg_store.repo
    ops = [GetOp(("notes",), "item-001"), GetOp(("notes",), "item-002"), SearchOp(("notes",), limit=5)]
    pg_store.batch(ops)
    results: list[Any] = []
    # The tip once, the gets' items with their histories, the search's listing and page.
    assert _trips(repo, lambda: results.extend(pg_store.batch(ops))) <= 4
    assert results[0].key == "item-001" and [item.key for item in results[2]][:2] == ["item-000", "item-001"]


@pytest.mark.slow
def test_histories_of_many_ids_are_one_round_trip(pg_url: str) -> None:
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id=f"m/{i:03d}", content=i) for i in range(200)])
        repo.commit([Node(id=f"m/{i:03d}", content=-i) for i in range(0, 200, 7)])
        ids = [f"m/{i:03d}" for i in range(0, 200, 9)]
        repo.histories(ids)
        found: dict[str, History] = {}
        assert _trips(repo, lambda: found.update(repo.histories(ids))) == 1
        assert all(found[i].versions == repo.history(i) for i in ids)
        assert _trips(repo, lambda: repo.history(ids[0])) >= 2  # what each cost alone


@pytest.mark.slow
def test_a_listing_on_a_new_handle_reads_chunks_a_level_at_a_time(pg_url: str) -> None:
    with Repo.init(pg_url) as repo:
        repo.commit([Node(id=f"m/{i:05d}", content=f"note {i}") for i in range(3000)])
    with Repo.open(pg_url) as cold:  # nothing cached: every chunk and node comes from the server
        listed: list[str] = []
        trips = _trips(cold, lambda: listed.extend(node.id for node in cold.nodes(prefix="m/")))
        assert listed == [f"m/{i:05d}" for i in range(3000)]
        # Per batch of 256: begin, one read per tree level it misses, one for its nodes (was
        # one per chunk and one per node: thousands).
        assert trips <= 6 * (3000 // walk.BATCH + 1), trips
        assert list(cold.ids(prefix="m/")) == listed
        # The chunks are cached now: a listing of ids is the read's one round trip.
        assert _trips(cold, lambda: list(cold.ids(prefix="m/"))) == 1


# -- the library reads under them -----------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_histories_say_what_get_and_history_say(repos: Callable[..., Repo], kind: str) -> None:
    clock = Clock(step=timedelta(seconds=1))
    repo = repos(kind, clock=clock)
    oldest = repo.commit(
        [Node(id="kept", content=1), Node(id="gone", content=1), Node(id="erased", content=1)]
    )
    repo.commit([Node(id="kept", content=2), Node(id="brief", content=3, expires_at=clock.now)])
    repo.commit(delete=["gone"])
    repo.forget("erased", "asked to")
    ids = ["kept", "gone", "erased", "brief", "never", "kept"]
    found = repo.histories(ids)
    assert list(found) == ["kept", "gone", "erased", "brief", "never"]  # once each, in order
    for i in found:
        assert found[i].id == i and found[i].versions == repo.history(i)
    assert found["kept"].node == repo.get("kept") and found["kept"].node.content == 2  # type: ignore[union-attr]
    assert found["gone"].node is None and found["never"].node is None and found["never"].versions == []
    assert found["erased"].node is None and found["erased"].versions[0].status == "redacted"
    assert found["brief"].node is None  # expired, as get says
    assert repo.histories(["brief"], include_expired=True)["brief"].node is not None
    assert repo.histories(["kept"], at=oldest)["kept"].node.content == 1  # type: ignore[union-attr]
    assert repo.histories(["kept"], as_of=oldest.record_time)["kept"].versions == repo.history(
        "kept", at=oldest
    )
    assert [len(h.versions) for h in repo.histories(["kept"], limit=1).values()] == [1]
    assert all(h.versions == [] for h in repo.histories(["kept", "gone"], limit=0).values())
    assert repo.histories([]) == {}


def test_histories_keep_the_snapshots_node_after_a_merge_that_kept_ours(repos: Callable[..., Repo]) -> None:
    repo = repos("memory")
    repo.commit([Node(id="x", content="base")])
    repo.branch("side")
    repo.commit([Node(id="x", content="ours")])
    repo.commit([Node(id="x", content="theirs, later")], branch="side")
    repo.merge("side", strategy="ours")
    found = repo.histories(["x"])["x"]
    assert found.node == repo.get("x") and found.versions == repo.history("x")


def test_histories_refuse_what_is_not_a_list_of_ids(repos: Callable[..., Repo]) -> None:
    repo = repos("memory")
    repo.commit([Node(id="a", content=1)])
    with pytest.raises(InvalidInput, match="not one string"):
        repo.histories("a")
    with pytest.raises(InvalidInput):
        repo.histories([1])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        repo.histories(["a"], limit=-1)


def test_ids_list_the_snapshot_and_say_which_commit(repos: Callable[..., Repo]) -> None:
    repo = repos("memory")
    assert list(repo.ids()) == [] and repo.ids().commit is None  # no commits yet
    first = repo.commit([Node(id="a/1", content=1), Node(id="a/2", content=2), Node(id="b", content=3)])
    repo.commit([Node(id="a/3", content=4)])
    listing = repo.ids(prefix="a/")
    assert list(listing) == ["a/1", "a/2", "a/3"] and listing.commit == repo.resolve()
    assert next(repo.ids(at=first)) == "a/1"
    assert list(repo.ids(at=first.id, prefix="a/")) == ["a/1", "a/2"]
    with pytest.raises(InvalidInput):
        repo.ids(prefix=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_listings_in_batches_match_a_plain_walk(
    repos: Callable[..., Repo], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(23)
    words = ["a", "a/", "a/b", "ab", "b", "b/c/", "é", "z\U0010ffff"]
    ids = sorted({"".join(rng.choice(words) for _ in range(rng.randint(1, 4))) + str(i) for i in range(700)})
    repo = repos(kind)
    repo.commit([Node(id=i, content=n) for n, i in enumerate(ids)])
    # Small batches, so that a listing crosses many batch and chunk boundaries.
    monkeypatch.setattr(walk, "BATCH", 7)
    monkeypatch.setattr(walk, "ID_BATCH", 13)
    for prefix in ["", "a", "a/", "a/b", "ab", "b/c/", "é", "z\U0010ffff", "zz", "\U0010ffff"]:
        under = [i for i in ids if i.startswith(prefix)]
        assert list(repo.ids(prefix=prefix)) == under, prefix
        assert [node.id for node in repo.nodes(prefix=prefix)] == under, prefix
        for after in rng.sample(ids, 3):
            assert [n.id for n in repo.nodes(prefix=prefix, after=after)] == [i for i in under if i > after]


# -- the store's behaviour with the reads it now makes ------------------------------------


def _expected(
    written: dict[tuple[tuple[str, ...], str], dict[str, Any]], prefix: tuple[str, ...]
) -> list[Any]:
    return sorted(item for item in written if item[0][: len(prefix)] == prefix)


def test_search_order_holds_for_labels_that_escape_nest_or_run_long() -> None:
    labels = ["a", "a-b", "a/b", "%", "~", "é", "a b", "A", "\x01", "x" * 150, "", ".", ".."]
    rng = random.Random(5)
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        written: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        for n in range(160):
            # Namespace labels are any but those LangGraph refuses (empty, or with a dot).
            namespace = ("root", *(rng.choice(labels[:10]) for _ in range(rng.randint(0, 2))))
            written[(namespace, rng.choice(labels))] = {"n": n}
        store.batch([PutOp(ns, key, value) for (ns, key), value in written.items()])
        for prefix in [("root",), ("root", "a"), ("root", "%"), ("root", "x" * 150)]:
            want = _expected(written, prefix)
            got = [(tuple(i.namespace), i.key) for i in store.search(prefix, limit=1000)]
            assert got == want, prefix
            paged = [(tuple(i.namespace), i.key) for i in store.search(prefix, limit=7, offset=5)]
            assert paged == want[5:12], prefix
            evens = [(tuple(i.namespace), i.key) for i in store.search(prefix, filter={"n": {"$lt": 40}})]
            assert evens == [k for k in want if written[k]["n"] < 40][:10], prefix


def test_search_pages_past_expired_items_and_filters() -> None:
    clock = Clock(step=timedelta(0))
    with Repo.in_memory(clock=clock) as repo:
        store = MnemosyneStore(repo)
        store.batch([PutOp(("s",), f"k{i:03d}", {"n": i}, ttl=1 if i % 3 else None) for i in range(120)])
        clock.now += timedelta(minutes=2)  # two items of three expire
        kept = [f"k{i:03d}" for i in range(0, 120, 3)]
        assert [i.key for i in store.search(("s",), limit=15, offset=10)] == kept[10:25]
        assert [i.key for i in store.search(("s",), filter={"n": {"$gte": 90}}, limit=50)] == kept[30:]


def test_search_and_get_agree_on_times() -> None:
    clock = Clock(step=timedelta(seconds=1))
    with Repo.in_memory(clock=clock) as repo:
        store = MnemosyneStore(repo)
        store.put(("u",), "k", {"v": 1})
        store.put(("u",), "k", {"v": 2})
        store.put(("u",), "other", {"v": 3})
        got = store.get(("u",), "k")
        found = {item.key: item for item in store.search(("u",))}
        assert got is not None and (found["k"].created_at, found["k"].updated_at) == (
            got.created_at,
            got.updated_at,
        )
        assert got.created_at < got.updated_at
        assert found["other"].created_at == found["other"].updated_at > got.updated_at


def test_a_node_whose_meta_names_another_item_is_no_item() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        store.put(("u",), "real", {"v": 1})
        # Written around the store: an id of one item, the meta of another.
        meta = meta_of(ItemMeta(namespace=("u",), key="claimed"), {"v": 2})
        repo.commit([Node(id=node_id(("u",), "forged"), content={"v": 2}, meta=meta)])
        assert [item.key for item in store.search(("u",))] == ["real"]
        assert [item.key for item in store.search(("u",), query="v")] == ["real"]
        assert store.get(("u",), "forged") is None and store.get(("u",), "claimed") is None
        assert store.list_namespaces() == [("u",)]


def test_deletes_in_a_batch_with_reads_use_the_batchs_tip_and_stay_silent_for_the_absent() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        store.put(("u",), "a", {"v": 1})
        results = store.batch([SearchOp(("u",)), PutOp(("u",), "a", None), PutOp(("u",), "never", None)])
        assert [item.key for item in results[0]] == ["a"]
        assert store.get(("u",), "a") is None
        assert repo.log(limit=1).__next__().message == 'langgraph store: delete ("u") / a'
