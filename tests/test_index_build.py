"""Building the approximate index: what it finds, and what it holds while it builds.

The index only proposes rows; these tests compare what the whole semantic path
returns through it with exact search over the same generated vectors (clustered,
as embeddings of real text are, with planted rows far from everything: unique
matches a graph walk rarely reaches), and check the memory a build lets go of:
the store pages it read, the graph in memory once the saved one is mapped, and
a save whose files cannot be mapped (the index is built again, never lost).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.components import unavailable
from support.tiers import examples
from support.vector_blocks import stored_vectors

from mnemosyne.index.view import Stores, View
from mnemosyne.recall import approximate, index_files, matrix, semantic
from mnemosyne.recall.index_location import IndexLocation
from mnemosyne.recall.matrix import VectorCache
from mnemosyne.recall.postings import NEVER, Postings
from mnemosyne.recall.vectors import BLOCK_ROWS
from mnemosyne.store.kv.base import Space
from mnemosyne.store.kv.lmdb_kv import LmdbKV
from mnemosyne.store.kv.memory import MemoryKV

SCOPE = b"\x00\x00\x00\x00"
WIDTH = 24


def clustered(seed: int, count: int, planted: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors near 60 centres; ``planted`` of them (their rows returned) point elsewhere."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, WIDTH)).astype(np.float32)
    vectors = centres[rng.integers(0, 60, count)] + 0.35 * rng.standard_normal((count, WIDTH)).astype(
        np.float32
    )
    needles = rng.choice(count, planted, replace=False)
    vectors[needles] = rng.standard_normal((planted, WIDTH)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, needles


class Fixed:
    """An embedder answering each question with the vector it was built for (by its text, a number)."""

    model_id, dim = "m", WIDTH

    def __init__(self, questions: np.ndarray) -> None:
        self.questions = questions

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.questions[int(texts[0])][None, :]


def stored(vectors: np.ndarray) -> tuple[MemoryKV, list[bytes]]:
    return stored_vectors(vectors, SCOPE, identity=True)


def top(kv: MemoryKV, cache: VectorCache, questions: np.ndarray, number: int, k: int) -> list[bytes]:
    with kv.read() as txn:
        found = semantic.semantic(
            View(Stores(SCOPE), txn),
            Postings(SCOPE),
            cache,
            Fixed(questions),
            str(number),
            lambda node_id, oid, expires: True,
            k,
            versions=lambda chash: ((chash, chash.hex(), NEVER),),
            approximate_from=1,
        )
    return [oid for oid, _, _ in found]


@settings(max_examples=examples(3), deadline=None)
@given(seed=st.integers(0, 2**16))
def test_the_approximate_path_finds_the_exact_top_10_and_every_planted_row(seed: int) -> None:
    """Recall@10 against exact search, and each planted row first for a question near it."""
    vectors, needles = clustered(seed, 9000, 12)  # past the rows under which every search scans
    kv, hashes = stored(vectors)
    rng = np.random.default_rng(seed + 1)
    near = vectors[needles] + 0.05 * rng.standard_normal((len(needles), WIDTH)).astype(np.float32)
    clustered_questions = vectors[rng.choice(len(vectors), 30)] + 0.3 * rng.standard_normal(
        (30, WIDTH)
    ).astype(np.float32)
    questions = np.vstack([clustered_questions, near])
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    cache = VectorCache()
    found = 0
    with pytest.MonkeyPatch.context() as patch:
        # One thread links the rows: a build of several threads links them in the order the
        # threads happen to run, so a seed's graph (and a rare miss) would differ run to run.
        patch.setattr(approximate, "THREADS", 1)
        for number in range(len(clustered_questions)):
            exact = {hashes[row] for row in np.argsort(-(vectors @ questions[number]), kind="stable")[:10]}
            found += len(exact & set(top(kv, cache, questions, number, 10)))
    assert found / (10 * len(clustered_questions)) >= 0.95
    (matrix,) = cache.held()
    assert matrix.approx is not None and len(matrix.approx) == len(vectors)
    # The build knew how many rows it would read: nothing grew past the blocks' capacity.
    assert len(matrix.alive) == -(-len(vectors) // BLOCK_ROWS) * BLOCK_ROWS
    for offset, row in enumerate(needles.tolist()):
        assert int(np.argmax(vectors @ questions[len(clustered_questions) + offset])) == row
        assert top(kv, cache, questions, len(clustered_questions) + offset, 10)[0] == hashes[row]


def test_a_saved_index_is_mapped_instead_of_the_graph_built_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first save the index proposes from the mapped file; one not mapped is built again."""
    vectors, _ = clustered(3, 6000, 4)
    kv, hashes = stored(vectors)
    questions = vectors[:20]
    exact = [{hashes[row] for row in np.argsort(-(vectors @ q), kind="stable")[:10]} for q in questions]

    def recall(cache: VectorCache) -> float:
        found = sum(len(set(top(kv, cache, questions, n, 10)) & exact[n]) for n in range(20))
        return found / 200

    cache = VectorCache(IndexLocation(str(tmp_path), writable=True))
    assert recall(cache) >= 0.9
    (matrix_,) = cache.held()
    assert matrix_.approx is not None and matrix_.approx.saved and matrix_.approx.linked_since == 0
    assert recall(cache) >= 0.9  # through the mapped files

    # The files are written, but mapping them fails: the rows are linked again in memory.
    monkeypatch.setattr(index_files, "view", lambda graph, dim: None)
    again = VectorCache(IndexLocation(str(tmp_path / "other"), writable=True))
    assert recall(again) >= 0.9
    (rebuilt,) = again.held()
    assert rebuilt.approx is not None and not rebuilt.approx.lost and len(rebuilt.approx) == len(vectors)
    assert rebuilt.save_failed  # not written again on every search


def mapped() -> int:
    """This process's resident file pages, in kB (a file on tmpfs counts as shared memory)."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        found[key] = value
    return sum(int(found[key].split()[0]) for key in ("RssFile", "RssShmem"))


def test_letting_go_of_the_store_pages_read_keeps_every_read(tmp_path: Path) -> None:
    """A pass over the store lets its pages leave resident memory; reads after it are unchanged."""
    if not sys.platform.startswith("linux"):
        unavailable("/proc/self/status, which tells the resident pages, is Linux's")
    kv = LmdbKV(tmp_path / "store", create=True, sync=False)
    values = {i.to_bytes(4, "big"): os.urandom(3000) for i in range(8000)}  # 24 MB of pages
    kv.transact(lambda txn: txn.put_many(Space.VECTORS, list(values.items())))
    try:
        with kv.read() as txn:
            txn.let_go()  # what writing them left mapped
            before = mapped()
            assert all(txn.get(Space.VECTORS, key) == value for key, value in values.items())
            read = mapped()
            txn.let_go()
            after = mapped()
            assert read - before > 16_000  # kB: the pages read are resident
            assert read - after > 16_000  # and gone
            assert all(txn.get(Space.VECTORS, key) == value for key, value in values.items())
    finally:
        kv.close()


def test_a_build_lets_go_of_the_store_pages_as_it_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building an approximate index asks the store to let go of its pages every few blocks, exact never."""
    calls: list[int] = []
    monkeypatch.setattr(matrix, "LET_GO_AFTER", 16)  # blocks (of 32 rows)
    monkeypatch.setattr(matrix, "BLOCKS_READ", 8)  # change-log entries applied at a time
    vectors, _ = clustered(5, 5000, 2)  # 157 blocks
    kv, _ = stored(vectors)
    with kv.read() as txn:
        monkeypatch.setattr(type(txn), "let_go", lambda self: calls.append(1))
    assert len(top(kv, VectorCache(), vectors[:1], 0, 10)) == 10
    assert len(calls) >= 157 // 16
    calls.clear()
    with kv.read() as txn:
        exact = semantic.semantic(
            View(Stores(SCOPE), txn),
            Postings(SCOPE),
            VectorCache(),
            Fixed(vectors[:1]),
            "0",
            lambda node_id, oid, expires: True,
            10,
            versions=lambda chash: ((chash, chash.hex(), NEVER),),
        )
    assert len(exact) == 10 and calls == []  # the exact matrix holds the float32 vectors itself
