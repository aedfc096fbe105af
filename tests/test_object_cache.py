"""The cache of decoded chunks and commits a handle keeps is bounded in bytes, not only in entries."""

from __future__ import annotations

from support.internals import object_store

from mnemosyne import Node, Repo
from mnemosyne.model.objects import TreeChunk
from mnemosyne.store import object_store as objectstore
from mnemosyne.store.kv.memory import MemoryKV


def cached_bytes(repo: Repo) -> tuple[int, list[TreeChunk]]:
    """Stored bytes of every object in the handle's cache, and the inner tree chunks among them."""
    objects = object_store(repo)
    cached = objects.cache_contents().objects
    with repo.kv.read() as txn:
        sizes = [len(objects.raw(txn, oid) or b"") for oid in cached]
    inner = [obj for obj in cached.values() if isinstance(obj, TreeChunk) and obj.level]
    return sum(sizes), inner


def test_reading_a_large_tree_keeps_the_cache_within_its_byte_budget(monkeypatch):
    budget = 48 * 1024
    # raising=False: a cache bounded only in entries ignores the budget, and fails below.
    monkeypatch.setattr(objectstore, "CACHE_BYTES", budget, raising=False)
    repo = Repo.in_memory()
    n = 4000
    repo.commit([Node(id=f"agents/a{i % 7}/mem/{i:06d}", content=f"memory {i}") for i in range(n)])
    for i in range(n):
        assert repo.get(f"agents/a{i % 7}/mem/{i:06d}").content == f"memory {i}"
    total, inner = cached_bytes(repo)
    assert 0 < total <= budget
    # Every read passes through the inner chunks: eviction drops leaves first.
    assert inner
    for i in range(0, n, 97):  # still right after evictions
        assert repo.get(f"agents/a{i % 7}/mem/{i:06d}").content == f"memory {i}"


def test_a_handle_forgets_the_size_of_what_it_removes():
    repo = Repo.in_memory()
    repo.commit([Node(id=f"n{i}", content=i) for i in range(200)])
    objects = object_store(repo)
    before = objects.cache_contents()
    assert before.total == sum(before.sizes.values()) > 0
    oid = next(iter(before.sizes))
    repo.kv.transact(lambda txn: objects.remove(txn, oid))  # as gc removes an unreachable object
    after = objects.cache_contents()
    assert oid not in after.objects
    assert after.total == sum(after.sizes.values()) < before.total


def test_a_cache_full_of_inner_chunks_still_sheds_a_quarter(monkeypatch):
    """Leaves go first, but when too few are old, inner chunks go too: evictions stay rare."""
    monkeypatch.setattr(objectstore, "CACHE_ENTRIES", 64)
    store = objectstore.ObjectStore(b"\x00\x00\x00\x01")
    kv = MemoryKV()

    def cache(chunk: TreeChunk) -> int:
        """Store a chunk (which caches it); how many objects the cache holds then."""
        kv.transact(lambda txn: store.put(txn, chunk))
        return len(store.cache_contents().objects)

    # One leaf in sixteen: the oldest half holds two, far fewer than a quarter.
    chunks = [TreeChunk(level=int(i % 16 != 0), keys=(f"k{i}",), values=(bytes(32),)) for i in range(64)]
    for chunk in chunks:
        held = cache(chunk)
    assert held == 64
    evictions = 0
    for i in range(64, 64 + 200):
        before = held
        held = cache(TreeChunk(level=1, keys=(f"k{i}",), values=(bytes(32),)))  # one more inner chunk
        evictions += held <= before
    # Each eviction drops 16 of 64 entries, so 200 inserts need at most 200 / 15 of them.
    assert 0 < evictions <= 14
    contents = store.cache_contents()
    assert contents.total == sum(contents.sizes.values())
