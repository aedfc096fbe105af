"""A damaged embedding vector is found by its block's checksum, not ranked by silently.

Vectors are derived data that no object hash covers: a zeroed or flipped float
used to change what ``search --mode semantic`` returns while ``fsck`` said ok.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_harness import CliStore

from mnemosyne import CorruptObject, Node, Repo
from mnemosyne.recall.vectors import parse_block
from mnemosyne.store.kv.base import Space


def vector_store(path: Path) -> list[tuple[str, float]]:
    """A store of 40 notes with hash-embedder vectors; its semantic answer to a query."""
    with Repo.init(path) as repo:
        repo.store.config("embedder", "hash")
        repo.commit([Node(id=f"notes/{n}", content=f"note {n} about topic {n % 7}") for n in range(40)])
        return [(hit.id, hit.score) for hit in repo.search("topic 3", mode="semantic", k=10)]


def stored_blocks(path: Path) -> list[bytes]:
    with Repo.open(path, readonly=True) as repo, repo.kv.read() as txn:
        return [data for key, data in txn.scan(Space.VECTORS, b"") if len(data) > 1024]


def damage_vector_bytes(path: Path, at: int, bit: int) -> None:
    """Flip one bit ``at`` bytes into the vectors of the first stored block."""
    block = stored_blocks(path)[0]
    hashes, _ = parse_block(block)
    head = block[: 2 + 32 * len(hashes)]  # content hashes: found once in the file
    data = (path / "data.mdb").read_bytes()
    offset = data.find(head)
    assert offset > 0 and data.count(head) == 1
    where = offset + len(head) + at  # a value larger than a page lies whole on its overflow pages
    assert data[offset : offset + len(block)] == block
    with open(path / "data.mdb", "r+b") as handle:
        os.pwrite(handle.fileno(), bytes([data[where] ^ 1 << bit]), where)


@given(at=st.integers(0, 40 * 64 - 1), bit=st.integers(0, 7))
@settings(max_examples=8, deadline=None)
def test_a_flipped_bit_in_a_stored_vector_is_found_by_fsck_and_search(
    tmp_path_factory: pytest.TempPathFactory, at: int, bit: int
) -> None:
    path = tmp_path_factory.mktemp("v") / "s"
    vector_store(path)
    damage_vector_bytes(path, at, bit)
    with Repo.open(path, readonly=True) as repo:
        report = repo.fsck()
        assert not report.ok
        assert any("checksum" in problem.message for problem in report.problems)
        with pytest.raises(CorruptObject, match="reindex --vectors"):
            repo.search("topic 3", mode="semantic", k=10)


def test_fsck_reports_it_and_reindex_of_the_vectors_repairs_it(tmp_path: Path) -> None:
    answer = vector_store(tmp_path / "s")
    damage_vector_bytes(tmp_path / "s", 100, 6)
    store = CliStore(tmp_path / "s")
    result = store.run("fsck")
    assert result.exit_code == 1 and "checksum" in result.stdout, result.output
    store.result("reindex", "--vectors")
    store.result("fsck")
    with Repo.open(tmp_path / "s") as repo:
        assert [(hit.id, hit.score) for hit in repo.search("topic 3", mode="semantic", k=10)] == answer


def test_blocks_hold_what_was_stored_and_erasure_keeps_them_checked(tmp_path: Path) -> None:
    vector_store(tmp_path / "s")
    with Repo.open(tmp_path / "s") as repo:
        repo.forget("notes/3", "asked to")
        assert repo.fsck().ok
    for block in stored_blocks(tmp_path / "s"):
        hashes, vectors = parse_block(block)
        assert vectors.shape == (len(hashes), vectors.shape[1]) and np.isfinite(vectors).all()
