"""One contract for every storage backend: LMDB, in-memory and PostgreSQL."""

from __future__ import annotations

import itertools
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.components import POSTGRES
from support.tiers import examples

from mnemosyne import InvalidInput, MnemoError, StorageFull
from mnemosyne.store.kv.base import Space, prefix_end
from mnemosyne.store.kv.lmdb_kv import LmdbKV
from mnemosyne.store.kv.memory import MemoryKV

SETTINGS = settings(max_examples=examples(40), deadline=None)
# the fixture only hands out fresh stores, so sharing it between examples is safe
FIXTURE_SETTINGS = settings(SETTINGS, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Backend:
    """Makes fresh stores of one kind and cleans up after the test."""

    def __init__(self, kind, root, pg=None):
        self.kind = kind
        self.root = root
        self.pg = pg
        self.counter = itertools.count()
        self.opened = []
        self.urls = []
        self.paths = {}  # id of an LMDB store -> its directory

    def new(self):
        if self.kind == "memory":
            kv = MemoryKV()
        elif self.kind == "postgres":
            from mnemosyne.store.kv.postgres_kv import PostgresKV

            url = self.pg.url()
            self.urls.append(url)
            kv = PostgresKV(url, create=True, sync=False)
        else:
            path = self.root / f"kv{next(self.counter)}"
            kv = LmdbKV(path, create=True, map_size=1 << 24)
            self.paths[id(kv)] = path
        self.opened.append(kv)
        return kv

    def reopen_readonly(self, kv):
        """A read-only handle on the same data (memory: a fresh read-only store)."""
        if self.kind == "memory":
            ro = MemoryKV(readonly=True)
        elif self.kind == "postgres":
            from mnemosyne.store.kv.postgres_kv import PostgresKV

            kv.close()
            ro = PostgresKV(self.urls[-1], readonly=True)
        else:
            path = self.paths[id(kv)]
            kv.close()
            ro = LmdbKV(path, readonly=True)
        self.opened.append(ro)
        return ro

    def close(self):
        for kv in self.opened:
            kv.close()
        for url in self.urls:
            self.pg.drop_schema(url)


@pytest.fixture(params=["memory", "lmdb", POSTGRES])
def backend(request, tmp_path_factory):
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    made = Backend(request.param, tmp_path_factory.mktemp(request.param), pg)
    yield made
    made.close()


@pytest.fixture
def kv(backend):
    return backend.new()


def dump(kv, space=Space.INDEX):
    with kv.read() as txn:
        return dict(txn.scan(space, b""))


# keys over a small alphabet (so prefixes and starts hit often), including 0xff for prefix_end
keys = st.binary(min_size=1, max_size=4).map(lambda b: bytes(x % 4 for x in b).replace(b"\x03", b"\xff"))
values = st.binary(max_size=8)
ops = st.lists(
    st.tuples(st.sampled_from(["put", "put", "delete", "discard"]), keys, values),
    max_size=40,
)


def model_scan(model, prefix, start, reverse):
    chosen = [k for k in model if k.startswith(prefix)]
    if start is not None:
        chosen = [k for k in chosen if (k <= start if reverse else k >= start)]
    chosen.sort(reverse=reverse)
    return [(k, model[k]) for k in chosen]


class TestKVContract:
    def test_get_put_delete(self, kv):
        def write(txn):
            assert txn.get(Space.OBJECTS, b"k") is None
            assert txn.put(Space.OBJECTS, b"k", b"v1") is True
            assert txn.get(Space.OBJECTS, b"k") == b"v1"  # a write txn reads its own writes
            return "done"

        assert kv.transact(write) == "done"
        with kv.read() as txn:
            value = txn.get(Space.OBJECTS, b"k")
            assert value == b"v1"
            assert type(value) is bytes
            assert txn.get(Space.REFS, b"k") is None  # keyspaces are separate
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"v2"))
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"k") == b"v2"
        assert kv.transact(lambda txn: txn.delete(Space.OBJECTS, b"k")) is True
        assert kv.transact(lambda txn: txn.delete(Space.OBJECTS, b"k")) is False
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"k") is None

    def test_keyspaces_are_independent(self, kv):
        def write(txn):
            for space in Space:
                txn.put(space, b"same", space.value.encode())

        kv.transact(write)
        kv.transact(lambda txn: txn.delete(Space.REFS, b"same"))
        with kv.read() as txn:
            for space in Space:
                expected = None if space is Space.REFS else space.value.encode()
                assert txn.get(space, b"same") == expected
                assert [k for k, _ in txn.scan(space, b"")] == ([] if expected is None else [b"same"])

    def test_put_without_overwrite(self, kv):
        assert kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"first", overwrite=False)) is True
        assert kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"second", overwrite=False)) is False
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"k") == b"first"

    def test_binary_keys_and_values(self, kv):
        pairs = {bytes([i, 0, 255 - i]): bytes(range(i)) for i in range(0, 256, 17)}
        kv.transact(lambda txn: [txn.put(Space.INDEX, k, v) for k, v in pairs.items()])
        assert dump(kv) == pairs
        with kv.read() as txn:
            assert [k for k, _ in txn.scan(Space.INDEX, b"")] == sorted(pairs)

    @FIXTURE_SETTINGS
    @given(
        batches=st.lists(ops, min_size=1, max_size=4),
        probes=st.lists(
            st.tuples(
                st.binary(max_size=2).map(lambda b: bytes(x % 4 for x in b).replace(b"\x03", b"\xff")),
                st.none() | keys,
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        ),
    )
    def test_scans_match_a_sorted_dict(self, backend, batches, probes):
        kv = backend.new()
        model = {}
        for batch in batches:

            def write(txn, batch=batch):
                for op, key, value in batch:
                    if op == "put":
                        assert txn.put(Space.INDEX, key, value) is True
                        model[key] = value
                    elif op == "delete":
                        assert txn.delete(Space.INDEX, key) is (key in model)
                        model.pop(key, None)
                    else:  # discard: says nothing; on PostgreSQL sent with the commit
                        assert txn.discard(Space.INDEX, key) is None
                        model.pop(key, None)
                    assert txn.get(Space.INDEX, key) == model.get(key)  # its own write, read back
                # scans inside the write transaction see its own writes
                for prefix, start, reverse in probes:
                    got = list(txn.scan(Space.INDEX, prefix, start=start, reverse=reverse))
                    assert got == model_scan(model, prefix, start, reverse)

            kv.transact(write)
        with kv.read() as txn:
            for prefix, start, reverse in probes:
                got = list(txn.scan(Space.INDEX, prefix, start=start, reverse=reverse))
                assert got == model_scan(model, prefix, start, reverse), (prefix, start, reverse)
            for key in {k for batch in batches for _, k, _ in batch}:
                assert txn.get(Space.INDEX, key) == model.get(key)

    def test_scan_edges(self, kv):
        stored = [b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"\xff", b"\xff\xff", b"\xff\xff\x01"]
        kv.transact(lambda txn: [txn.put(Space.INDEX, k, k) for k in stored])
        model = {k: k for k in stored}
        cases = [
            (b"ab", None, False),
            (b"ab", None, True),
            (b"ab", b"abc", False),
            (b"ab", b"abc", True),
            (b"ab", b"a", False),  # start below the prefix range
            (b"ab", b"a", True),
            (b"ab", b"zz", False),  # start above the prefix range
            (b"ab", b"zz", True),
            (b"ab", b"abcz", True),  # start between stored keys
            (b"\xff", None, True),  # prefix with no successor
            (b"\xff\xff", None, True),
            (b"\xff", b"\xff\xff", True),
            (b"", None, True),
            (b"", b"ac", True),
            (b"", b"ac", False),
            (b"zz", None, True),
            (b"zz", None, False),
        ]
        with kv.read() as txn:
            for prefix, start, reverse in cases:
                got = list(txn.scan(Space.INDEX, prefix, start=start, reverse=reverse))
                assert got == model_scan(model, prefix, start, reverse), (prefix, start, reverse)

    def test_scan_of_empty_space(self, kv):
        with kv.read() as txn:
            for reverse in (False, True):
                assert list(txn.scan(Space.INDEX, b"", reverse=reverse)) == []
                assert list(txn.scan(Space.INDEX, b"a", start=b"b", reverse=reverse)) == []

    def test_snapshot_isolation(self, kv):
        kv.transact(lambda txn: (txn.put(Space.OBJECTS, b"a", b"1"), txn.put(Space.OBJECTS, b"b", b"1")))
        with kv.read() as before:
            assert before.get(Space.OBJECTS, b"a") == b"1"

            def change(txn):
                txn.put(Space.OBJECTS, b"a", b"2")
                txn.delete(Space.OBJECTS, b"b")
                txn.put(Space.OBJECTS, b"c", b"3")

            kv.transact(change)
            # the snapshot opened before the write does not see it
            assert before.get(Space.OBJECTS, b"a") == b"1"
            assert before.get(Space.OBJECTS, b"b") == b"1"
            assert before.get(Space.OBJECTS, b"c") is None
            assert list(before.scan(Space.OBJECTS, b"")) == [(b"a", b"1"), (b"b", b"1")]
            assert list(before.scan(Space.OBJECTS, b"", reverse=True)) == [(b"b", b"1"), (b"a", b"1")]
            with kv.read() as after:
                assert list(after.scan(Space.OBJECTS, b"")) == [(b"a", b"2"), (b"c", b"3")]

    def test_snapshot_isolation_across_threads(self, kv):
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"x", b"old"))
        opened = threading.Event()
        written = threading.Event()
        seen = []

        def reader():
            with kv.read() as txn:
                opened.set()
                written.wait(10)
                seen.append(txn.get(Space.OBJECTS, b"x"))

        thread = threading.Thread(target=reader)
        thread.start()
        assert opened.wait(10)
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"x", b"new"))
        written.set()
        thread.join(10)
        assert seen == [b"old"]
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"x") == b"new"

    def test_failed_write_changes_nothing(self, kv):
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"keep", b"1"))
        before = {space: dump(kv, space) for space in Space}

        class Boom(Exception):
            pass

        def failing(txn):
            txn.put(Space.OBJECTS, b"new", b"x")
            txn.put(Space.REFS, b"ref", b"x")
            txn.put(Space.OBJECTS, b"keep", b"overwritten")
            txn.delete(Space.OBJECTS, b"keep")
            raise Boom

        with pytest.raises(Boom):
            kv.transact(failing)
        assert {space: dump(kv, space) for space in Space} == before
        # and the store still takes writes
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"after", b"2"))
        assert dump(kv, Space.OBJECTS) == {b"keep": b"1", b"after": b"2"}

    def test_concurrent_writers_are_serialised(self, kv):
        kv.transact(lambda txn: txn.put(Space.META, b"n", b"0"))

        def increment(txn):
            value = int(txn.get(Space.META, b"n"))
            txn.put(Space.META, b"n", str(value + 1).encode())

        def worker():
            for _ in range(50):
                kv.transact(increment)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        with kv.read() as txn:
            assert txn.get(Space.META, b"n") == b"200"

    def test_readonly_refuses_writes(self, backend, kv):
        kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"v"))
        ro = backend.reopen_readonly(kv)
        assert ro.readonly is True
        with pytest.raises(InvalidInput):
            ro.transact(lambda txn: txn.put(Space.OBJECTS, b"k2", b"v"))
        with ro.read() as txn:
            # reads still work (memory: the read-only store is a fresh, empty one)
            assert txn.get(Space.OBJECTS, b"k2") is None
            if backend.kind != "memory":
                assert txn.get(Space.OBJECTS, b"k") == b"v"

    def test_closed_store_refuses_use(self, kv):
        kv.close()
        with pytest.raises(MnemoError):
            kv.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"v"))
        with pytest.raises(MnemoError), kv.read():
            pass
        kv.close()  # closing twice is harmless


def test_prefix_end():
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"") is None


@SETTINGS
@given(st.binary(min_size=1, max_size=4), st.binary(max_size=5))
def test_prefix_end_bounds_every_extension(prefix, tail):
    end = prefix_end(prefix)
    if end is None:
        assert set(prefix) == {0xFF}
    else:
        assert prefix + tail < end
        assert end > prefix
        assert not end.startswith(prefix)


# -- LMDB map growth -------------------------------------------------------------------


def _fill(kv, batch, count=100, size=1000):
    calls = []

    def write(txn):
        calls.append(1)
        for j in range(count):
            txn.put(Space.OBJECTS, b"k%05d-%03d" % (batch, j), os.urandom(size))
        return batch

    assert kv.transact(write) == batch
    return len(calls)


def test_lmdb_map_grows_on_demand(tmp_path):
    kv = LmdbKV(tmp_path / "s", create=True, map_size=64 * 1024, max_map_size=64 * 1024 * 1024)
    try:
        calls = [_fill(kv, batch) for batch in range(30)]  # ~3 MB of values
        assert max(calls) > 1  # some write filled the map and was run again
        assert kv.env.info()["map_size"] > 64 * 1024
        with kv.read() as txn:
            assert sum(1 for _ in txn.scan(Space.OBJECTS, b"")) == 3000
    finally:
        kv.close()
    # the grown store reopens with the same data, even with a small initial map
    kv = LmdbKV(tmp_path / "s", map_size=64 * 1024)
    try:
        with kv.read() as txn:
            assert sum(1 for _ in txn.scan(Space.OBJECTS, b"")) == 3000
    finally:
        kv.close()


def test_lmdb_storage_full_at_max_map_size(tmp_path):
    kv = LmdbKV(tmp_path / "s", create=True, map_size=64 * 1024, max_map_size=1024 * 1024)
    try:
        batch = 0
        with pytest.raises(StorageFull):
            for batch in range(100):
                before = dump(kv, Space.OBJECTS)
                _fill(kv, batch)
        assert batch > 0  # it did take some writes first
        assert kv.env.info()["map_size"] <= 1024 * 1024
        # the failed write left nothing behind
        assert dump(kv, Space.OBJECTS) == before
        # reads still work and small writes into freed space still succeed
        kv.transact(lambda txn: txn.delete(Space.OBJECTS, b"k00000-000"))
        with kv.read() as txn:
            assert txn.get(Space.OBJECTS, b"k00000-000") is None
    finally:
        kv.close()


def test_lmdb_growth_with_threads(tmp_path):
    kv = LmdbKV(tmp_path / "s", create=True, map_size=64 * 1024, max_map_size=256 * 1024 * 1024)
    errors = []

    def worker(n):
        try:
            for b in range(8):
                _fill(kv, n * 100 + b, count=40)
                with kv.read() as txn:
                    assert txn.get(Space.OBJECTS, b"k%05d-%03d" % (n * 100 + b, 39)) is not None
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == []
        with kv.read() as txn:
            assert sum(1 for _ in txn.scan(Space.OBJECTS, b"")) == 4 * 8 * 40
    finally:
        kv.close()


def test_lmdb_second_handle_shares_the_environment(tmp_path):
    a = LmdbKV(tmp_path / "s", create=True)
    b = LmdbKV(tmp_path / "s")
    try:
        a.transact(lambda txn: txn.put(Space.OBJECTS, b"k", b"v"))
        with b.read() as txn:
            assert txn.get(Space.OBJECTS, b"k") == b"v"
        a.close()
        with b.read() as txn:  # closing one handle leaves the other working
            assert txn.get(Space.OBJECTS, b"k") == b"v"
    finally:
        a.close()
        b.close()
