"""What every backend offers for round-trip-bound engines: ``get_many``, ``put_absent``, ``view``.

And the tree update that uses them: chunks fetched a level at a time, the same
result as without (ADR 31).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.components import POSTGRES
from support.tiers import examples

from mnemosyne.model import codec
from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.lmdb_kv import LmdbKV
from mnemosyne.store.kv.memory import MemoryKV
from mnemosyne.store.prolly import EMPTY, Tree


@pytest.fixture(params=["memory", "lmdb", POSTGRES])
def kv(request, tmp_path):
    if request.param == "memory":
        made = MemoryKV()
    elif request.param == "lmdb":
        made = LmdbKV(tmp_path / "kv", create=True, map_size=1 << 24)
    else:
        from mnemosyne.store.kv.postgres_kv import PostgresKV

        server = request.getfixturevalue("pg_server")
        url = server.url()
        made = PostgresKV(url, create=True, sync=False)
        request.addfinalizer(lambda: server.drop_schema(url))
    yield made
    made.close()


def test_get_many_gives_each_value_in_order(kv):
    kv.transact(lambda txn: [txn.put(Space.INDEX, key, key * 2) for key in (b"a", b"b", b"c")])
    with kv.read() as txn:
        assert txn.get_many(Space.INDEX, [b"c", b"x", b"a", b"c"]) == [b"cc", None, b"aa", b"cc"]
        assert txn.get_many(Space.INDEX, []) == []

    def inside(txn):
        txn.put(Space.INDEX, b"x", b"new")
        txn.delete(Space.INDEX, b"a")
        return txn.get_many(Space.INDEX, [b"a", b"b", b"x"])

    assert kv.transact(inside) == [None, b"bb", b"new"]  # a write transaction's own writes


def test_get_many_of_objects_reads_them_once_cached(kv):
    kv.transact(lambda txn: txn.put_absent(Space.OBJECTS, [(b"o1", b"one"), (b"o2", b"two")]))
    for _ in range(2):
        with kv.read() as txn:
            assert txn.get_many(Space.OBJECTS, [b"o2", b"o3", b"o1"]) == [b"two", None, b"one"]


def test_put_absent_stores_what_is_absent_and_leaves_the_rest(kv):
    # Keys present hold the bytes given (content-addressed), as put_absent requires.
    kv.transact(lambda txn: txn.put(Space.OBJECTS, b"there", b"first"))

    def store(txn):
        txn.put_absent(Space.OBJECTS, [(b"there", b"first"), (b"new", b"n"), (b"new2", b"m")])
        seen = (txn.get(Space.OBJECTS, b"new"), txn.get(Space.OBJECTS, b"there"))
        scanned = [key for key, _ in txn.scan(Space.OBJECTS, b"new")]
        # Stored by this transaction: not stored again, and a delete removes it.
        added = txn.put(Space.OBJECTS, b"new", b"n", overwrite=False)
        removed = txn.delete(Space.OBJECTS, b"new2")
        return seen, scanned, added, removed

    seen, scanned, added, removed = kv.transact(store)
    assert seen == (b"n", b"first")
    assert scanned == [b"new", b"new2"]
    assert (added, removed) == (False, True)
    with kv.read() as txn:
        assert txn.get(Space.OBJECTS, b"there") == b"first"
        assert txn.get(Space.OBJECTS, b"new") == b"n"
        assert txn.get(Space.OBJECTS, b"new2") is None


def test_put_absent_is_undone_with_its_transaction(kv):
    def fail(txn):
        txn.put_absent(Space.OBJECTS, [(b"gone", b"g")])
        raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        kv.transact(fail)
    with kv.read() as txn:
        assert txn.get(Space.OBJECTS, b"gone") is None


def test_view_runs_a_read_on_one_snapshot_and_returns_its_result(kv):
    kv.transact(lambda txn: txn.put(Space.REFS, b"r", b"1"))

    def read(txn):
        return txn.get(Space.REFS, b"r"), [key for key, _ in txn.scan(Space.REFS, b"")]

    for value in (b"1", b"2", b"3"):  # the same kind of read again: PostgreSQL tries it outside a transaction
        kv.transact(lambda txn, value=value: txn.put(Space.REFS, b"r", value))
        assert kv.view(read, read.__code__) == (value, [b"r"])
    kv.transact(lambda txn: txn.put(Space.REFS, b"s", b"x"))
    assert kv.view(read, read.__code__) == (b"3", [b"r", b"s"])  # a page read ahead was too short
    assert kv.view(lambda txn: txn.get(Space.REFS, b"s")) == b"x"


# -- the tree ------------------------------------------------------------------------


class Chunks:
    """A chunk store that counts what it is asked, one at a time or in batches."""

    def __init__(self) -> None:
        self.data: dict[bytes, object] = {}
        self.loads = 0
        self.batches: list[list[bytes]] = []
        self.fetched: set[bytes] = set()

    def store(self, chunk):
        oid = codec.object_id(codec.encode(chunk))
        self.data[oid] = chunk
        return oid

    def load(self, oid):
        if oid not in self.fetched:
            self.loads += 1
        return self.data[oid]

    def fetch(self, oids):
        self.batches.append(list(oids))
        self.fetched.update(oids)


keys = st.lists(st.integers(0, 3000), min_size=2, max_size=60, unique=True)


@settings(max_examples=examples(25), deadline=None)
@given(edited=keys, removed=keys)
def test_an_update_fetched_a_level_at_a_time_is_the_same_update(edited, removed):
    chunks = Chunks()
    plain = Tree(chunks.load, chunks.store)
    root, _ = plain.update(chunks.store(EMPTY), [(f"k{i:05d}", b"%d" % i) for i in range(0, 3000, 3)])
    wanted: dict[str, bytes | None] = {f"k{i:05d}": b"new" for i in edited}
    wanted.update({f"k{i:05d}": None for i in removed if i not in edited})
    edits = sorted(wanted.items())
    expected = plain.update(root, edits)
    chunks.loads, chunks.fetched = 0, set()
    fetching = Tree(chunks.load, chunks.store, chunks.fetch)
    assert fetching.update(root, edits) == expected
    # One batch per level (three here); what the update then loads was fetched in them,
    # but for a few neighbours of edited chunks when a boundary moves (without: ~40 loads).
    assert len(chunks.batches) <= 3
    assert chunks.loads <= 6


def test_writes_to_many_keyspaces_and_twice_to_one_keep_their_order(kv):
    # On PostgreSQL a commit's writes to different tables go as one statement; an object
    # stored and then removed in the same transaction must still be gone afterwards.
    kv.transact(lambda txn: txn.put(Space.OBJECTS, b"kept", b"k"))

    def work(txn):
        txn.put_absent(Space.OBJECTS, [(b"brief", b"b"), (b"stays", b"s")])
        txn.put(Space.REFS, b"r", b"1")
        txn.put(Space.REFLOG, b"l", b"2")
        txn.put(Space.INDEX, b"i", b"3")
        txn.delete(Space.OBJECTS, b"brief")
        txn.discard(Space.OBJECTS, b"kept")
        txn.put(Space.OBJECTS, b"after", b"a", overwrite=False)

    kv.transact(work)
    with kv.read() as txn:
        assert txn.get_many(Space.OBJECTS, [b"brief", b"stays", b"kept", b"after"]) == [
            None,
            b"s",
            None,
            b"a",
        ]
        assert [
            txn.get(space, key)
            for space, key in ((Space.REFS, b"r"), (Space.REFLOG, b"l"), (Space.INDEX, b"i"))
        ] == [
            b"1",
            b"2",
            b"3",
        ]
