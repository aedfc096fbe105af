"""The cache of decoded chunks and commits a handle keeps is bounded in bytes, not only in entries."""

from __future__ import annotations

from mnemosyne import Node, Repo
from mnemosyne.model.objects import TreeChunk
from mnemosyne.store import objects as objectstore


def cached_bytes(repo: Repo) -> tuple[int, list[TreeChunk]]:
    """Stored bytes of every object in the handle's cache, and the inner tree chunks among them."""
    objects = repo._handle.stores.objects
    with repo._handle.read() as view:
        sizes = [len(objects.raw(view.txn, oid) or b"") for oid in list(objects._cache)]
    inner = [obj for obj in objects._cache.values() if isinstance(obj, TreeChunk) and obj.level]
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
    objects = repo._handle.stores.objects
    before = objects._cached_bytes
    assert before == sum(objects._sizes.values()) > 0
    oid = next(iter(objects._sizes))
    objects._forget(oid)
    assert oid not in objects._cache
    assert objects._cached_bytes == sum(objects._sizes.values()) < before
