"""The one module of the tests that reaches into a ``Repo``'s private parts.

A ``Repo`` keeps memory per handle that no public method shows: the decode cache
of its object store, and the vector matrices its semantic searches rank. The
tests of those bounds and indexes get at them through these two functions (each
reach is listed in ``PRIVATE_REACHES`` in test_architecture.py); what they read
there goes through the hooks the library keeps for tests
(:meth:`ObjectStore.cache_contents`, :meth:`VectorCache.held`).
"""

from __future__ import annotations

from mnemosyne import Repo
from mnemosyne.recall.matrix import VectorCache
from mnemosyne.store.object_store import ObjectStore


def object_store(repo: Repo) -> ObjectStore:
    """The object store of ``repo``'s handle: the one whose decode cache its reads fill."""
    return repo._handle.stores.objects


def vector_cache(repo: Repo) -> VectorCache:
    """``repo``'s memory of vectors and names: the matrices its semantic searches rank."""
    return repo._recall._vectors()
