"""Vectors written straight into a model's vector blocks of an in-memory store, for index tests."""

from __future__ import annotations

import hashlib

import numpy as np

from mnemosyne.recall.vectors import VectorStore
from mnemosyne.store.kv.memory import MemoryKV


def stored_vectors(
    vectors: np.ndarray, scope: bytes, *, model: str = "m", identity: bool = False
) -> tuple[MemoryKV, list[bytes]]:
    """A store holding ``vectors`` of ``model`` (row i under a content hash made from i), and those hashes.

    With ``identity``, the store also gets the identity a saved index's header names.
    """
    hashes = [hashlib.blake2b(i.to_bytes(8, "big"), digest_size=32).digest() for i in range(len(vectors))]
    kv = MemoryKV()
    store = VectorStore(scope)

    def write(txn: object) -> None:
        store.set_model(txn, model, vectors.shape[1])  # type: ignore[arg-type]
        writer = store.writer(txn, model, defer_map=True)  # type: ignore[arg-type]
        writer.store(hashes, vectors)
        writer.close()
        if identity:
            store.ensure_identity(txn)  # type: ignore[arg-type]

    kv.transact(write)
    return kv, hashes
