"""A damaged saved index file is found by its checksum: not mapped, rebuilt, and reported by fsck.

usearch follows a saved graph's links through the mapping unchecked: one flipped
bit in ``recall-index/*.graph`` used to crash ``mnemo search`` (SIGSEGV) while
``fsck`` said ok.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mnemosyne import Node, Repo

QUERY = "topic 3 of the notes"
SEARCH = """
import json, sys
from mnemosyne import Repo
with Repo.open(sys.argv[1], readonly=sys.argv[2] == "ro") as repo:
    hits = repo.search(sys.argv[3], k=10, mode="semantic")
    print(json.dumps([[hit.id, round(hit.score, 6)] for hit in hits]))
"""


def searched(path: Path, readonly: bool = True) -> list[list[object]]:
    """A semantic search by a process of its own (a crash there is the test's to see)."""
    done = subprocess.run(
        [sys.executable, "-c", SEARCH, str(path), "ro" if readonly else "rw", QUERY],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-1500:])
    answer: list[list[object]] = json.loads(done.stdout)
    return answer


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ix") / "s"
    with Repo.init(path, sync=False) as repo:
        repo.store.config("embedder", "hash")
        repo.store.config("recall.approximate_from", "1")
        repo.commit(
            [Node(id=f"n/{i}", content=f"note {i} on topic {i % 11} of the notes") for i in range(400)]
        )
        repo.search(QUERY, k=1, mode="semantic")  # builds the index and saves it
    assert list((path / "recall-index").glob("*.graph"))
    return path


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_a_flipped_bit_in_a_saved_graph_is_reported_and_the_index_rebuilt(
    indexed: Path, tmp_path: Path, where: float
) -> None:
    answer = searched(indexed)
    path = tmp_path / "s"
    shutil.copytree(indexed, path)
    [graph] = (path / "recall-index").glob("*.graph")
    before = graph.stat()
    at = int(before.st_size * where)
    with open(graph, "r+b") as handle:
        byte = os.pread(handle.fileno(), 1, at)
        os.pwrite(handle.fileno(), bytes([byte[0] ^ 0x40]), at)
    os.utime(graph, ns=(before.st_atime_ns, before.st_mtime_ns))  # its change time still tells
    with Repo.open(path, readonly=True) as repo:
        report = repo.fsck()
    assert not report.ok
    assert [p.kind for p in report.problems] == ["index", "index"][: len(report.problems)]
    assert any("saved search index file" in p.message for p in report.problems)
    assert searched(path) == answer  # not mapped: built again in memory, no crash
    repaired = tmp_path / "r"
    shutil.copytree(path, repaired)
    with Repo.open(repaired) as repo:
        assert repo.fsck(repair=True).ok  # the damaged files go; the next search rebuilds them
    assert searched(path, readonly=False) == answer  # built again and saved
    with Repo.open(path, readonly=True) as repo:
        assert repo.fsck().ok
    assert not graph.exists()  # the damaged file went with the save that replaced it


def test_an_unchanged_file_is_trusted_by_its_stamp_and_fsck_checks_it_in_full(indexed: Path) -> None:
    from mnemosyne.recall import index_files
    from mnemosyne.recall.index_location import IndexLocation

    [manifest] = (indexed / "recall-index").glob("*.rows")
    [(_, _, header)] = list(index_files.saved_indexes(IndexLocation.inside(indexed, writable=False)))
    assert header is not None and header.graph_crc >= 0 and header.codes_crc >= 0
    assert len(header.graph_stamp) == 4 and manifest.is_file()
