"""A full disk, on a small file system of the test's own (a tmpfs, and ext4 on a loop device).

Every write the disk cannot take is ``StorageFull`` (CLI exit 6), whatever LMDB
saw (``ENOSPC``, or ``EIO`` from a write cut short); nothing kills the process
(``SIGBUS`` from a lock file with holes); nothing half-made is left (a store,
a clone, a compaction's copy); every acknowledged commit stays readable, and
reads (a search too) go on working.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from support.small_disk import fill, mounted, small_disk  # noqa: F401  (small_disk: a fixture)

from mnemosyne import Node, Repo, StorageFull, Store

pytestmark = pytest.mark.slow  # file systems mounted and filled, test after test

WORDS = [
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "nu", "po", "ra", "si", "tu")
    for b in ("b", "d", "g", "m", "n", "r")
]


def mnemo(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``mnemo ARGS`` in a process of its own: a crash (SIGBUS) must fail the test, not end the run."""
    return subprocess.run(
        [sys.executable, "-m", "mnemo_cli", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MNEMO_EMBEDDER": "none"},
    )


def assert_full(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 6 with one ``error:`` line that says the disk is full."""
    assert done.returncode == 6, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "full" in lines[0], done.stderr


def bulk(rng: random.Random, size: int) -> str:
    """Text that does not compress: fills a disk at the speed of copying."""
    return rng.randbytes(size // 2).hex()


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def test_a_full_disk_refuses_commits_with_storage_full_and_keeps_every_acknowledged_one(
    small_disk: Path,  # noqa: F811
) -> None:
    path = small_disk / "s"
    rng = random.Random(1)
    acknowledged: dict[str, dict[str, str]] = {}
    refused = 0
    with Repo.init(path) as repo:
        for number in range(200):
            notes = {f"notes/{number}/{k}": bulk(rng, 40_000) for k in range(3)}
            try:
                made = repo.commit([Node(id=key, content=value) for key, value in notes.items()])
            except StorageFull as exc:
                assert "full" in str(exc)
                refused += 1
                if refused == 3:  # refused again and again, never another error
                    break
                continue
            acknowledged[made.id] = notes
        assert refused == 3 and len(acknowledged) > 3
        one_more = json.dumps({"content": bulk(rng, 200_000)})
        assert_full(mnemo("--repo", str(path), "commit", "-m", "one more", input=one_more))
    with Repo.open(path, readonly=True) as repo:
        assert {commit.id for commit in repo.log()} == set(acknowledged)
        for commit_id, notes in acknowledged.items():
            for key, value in notes.items():
                assert repo.get(key, at=commit_id).content == value
        assert repo.fsck().ok


def test_search_on_a_full_disk_reads_what_is_indexed_and_queued(small_disk: Path) -> None:  # noqa: F811
    path = small_disk / "s"
    rng = random.Random(2)
    with Repo.init(path) as repo:
        # Commits only queue what search indexes: the first search catches up, in a write.
        for number in range(20):
            repo.commit(
                [
                    Node(id=f"notes/{number}/{k}", content=f"{words(rng, 300)} marker{number}")
                    for k in range(5)
                ]
            )
        fill(small_disk)
        hits = repo.search("marker19", mode="lexical")
        assert {hit.id for hit in hits} == {f"notes/19/{k}" for k in range(5)}
    found = mnemo("--repo", str(path), "--json", "search", "--mode", "lexical", "marker7")
    assert found.returncode == 0, found.stderr
    assert {json.loads(line)["id"] for line in found.stdout.splitlines()} == {
        f"notes/7/{k}" for k in range(5)
    }


def test_init_on_a_full_disk_is_storage_full_and_leaves_nothing(small_disk: Path) -> None:  # noqa: F811
    (small_disk / "empty").mkdir()  # a directory made beforehand stays, empty
    fill(small_disk)
    assert_full(mnemo("init", str(small_disk / "new")))
    assert not (small_disk / "new").exists()
    assert_full(mnemo("init", str(small_disk / "empty")))
    assert list((small_disk / "empty").iterdir()) == []
    with pytest.raises(StorageFull):
        Repo.init(small_disk / "again")
    assert not (small_disk / "again").exists()


def test_clone_onto_a_full_disk_is_storage_full_and_leaves_nothing(small_disk: Path, tmp_path: Path) -> None:  # noqa: F811
    source = tmp_path / "source"
    rng = random.Random(3)
    with Repo.init(source) as repo:
        for number in range(4):
            repo.commit([Node(id=f"notes/{number}/{k}", content=bulk(rng, 100_000)) for k in range(4)])
    filler = fill(small_disk)
    assert_full(mnemo("clone", str(source), str(small_disk / "c")))  # no room for a store at all
    assert not (small_disk / "c").exists()
    filler.unlink()
    fill(small_disk, leave=256 << 10)  # room for a store, not for the history
    assert_full(mnemo("clone", str(source), str(small_disk / "c")))
    assert not (small_disk / "c").exists()


@pytest.mark.parametrize("room", ["none", "some"])
def test_compaction_on_a_full_disk_is_storage_full_and_leaves_the_store_and_no_copy(
    tmp_path: Path, room: str
) -> None:
    # "none": refused before copying; "some": room enough to start, not to finish.
    with mounted("tmpfs", tmp_path, 4) as disk:
        path = disk / "s"
        rng = random.Random(4)
        with Repo.init(path) as repo:
            made = [
                repo.commit([Node(id=f"notes/{n}/{k}", content=words(rng, 20)) for k in range(60)]).id
                for n in range(20)
            ]
        with Store.open(path) as store:
            live = store.compact().file_bytes_after  # what a new copy needs
        fill(disk, leave=0 if room == "none" else live // 2)
        refused = mnemo("--repo", str(path), "gc", "--now", "--compact")
        assert_full(refused)
        assert ("needs at least" in refused.stderr) == (room == "none"), refused.stderr
        assert sorted(entry.name for entry in path.iterdir()) == ["data.mdb", "lock.mdb", "mnemo.lock"]
        with Repo.open(path, readonly=True) as repo:
            assert [commit.id for commit in repo.log()] == made[::-1]
            assert repo.fsck().ok


def test_export_onto_a_full_disk_is_storage_full_and_leaves_no_file(small_disk: Path, tmp_path: Path) -> None:  # noqa: F811
    source = tmp_path / "source"
    rng = random.Random(5)
    with Repo.init(source) as repo:
        for number in range(3):
            repo.commit([Node(id=f"notes/{number}/{k}", content=bulk(rng, 200_000)) for k in range(4)])
    fill(small_disk, leave=512 << 10)  # room to start, not for the ~2.4 MB of the export
    assert_full(mnemo("--repo", str(source), "export", str(small_disk / "backup.mnemo")))
    assert not [entry for entry in small_disk.iterdir() if "backup" in entry.name]  # no partial file
    with open(small_disk / "piped.mnemo", "wb") as out:  # to standard output, which the shell sent there
        refused = subprocess.run(
            [sys.executable, "-m", "mnemo_cli", "--repo", str(source), "export", "-"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "MNEMO_EMBEDDER": "none"},
        )
    assert_full(refused)
