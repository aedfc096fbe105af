"""Compaction keeps every promise around the file swap, not only the erased bytes.

A refused compaction must leave this process's claim on the store in place, a
failed one must leave the store as it was and usable, and a successful one must
keep what it does not know (keyspaces of a newer version), the file's mode, and
no scratch copy behind.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import lmdb
import pytest

from mnemosyne import InvalidInput, MnemoError, Node, NotFound, Repo
from mnemosyne.store.kv import lmdb_rewrite

HOLDER = """
import sys
from mnemosyne import Repo
repo = Repo.open(sys.argv[1])
print("open", flush=True)
sys.stdin.readline()
"""

COMPACTOR = """
import sys
from mnemosyne import InvalidInput, Repo
with Repo.open(sys.argv[1]) as repo:
    try:
        repo.gc(compact=True)
    except InvalidInput as exc:
        print("refused:", exc)
    else:
        print("compacted")
"""


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    store = tmp_path / "store"
    with Repo.init(store) as repo:
        repo.commit([Node(id="n", content="v")], message="1")
    yield store


def test_a_refused_compaction_keeps_this_process_s_claim_on_the_store(path: Path) -> None:
    """After another process refuses us, a third must still see us holding the store."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    with Repo.open(path) as repo:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "open\n"
            with pytest.raises(InvalidInput, match="another process has it open"):
                repo.gc(compact=True)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=30)
        other = subprocess.run(
            [sys.executable, "-c", COMPACTOR, str(path)], capture_output=True, text=True, timeout=60
        )
        assert other.stdout.startswith("refused: compaction needs the store to itself"), other
        assert repo.get("n") == Node(id="n", content="v")
        repo.commit([Node(id="m", content="w")], message="2")
    with Repo.open(path) as repo:
        assert repo.gc(compact=True).compacted
        assert [n.id for n in repo.nodes()] == ["m", "n"]


def test_a_failed_rewrite_leaves_the_store_unchanged_and_usable(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise OSError(5, "Input/output error")

    before = (path / "data.mdb").read_bytes()
    with Repo.open(path) as repo:
        with monkeypatch.context() as patched:
            patched.setattr(lmdb_rewrite, "rewrite_into", broken)
            with pytest.raises(MnemoError, match="compaction failed, the store is unchanged"):
                repo.gc(compact=True)
        assert (path / "data.mdb").read_bytes() == before
        assert not [entry for entry in os.listdir(path) if entry.startswith(".compact-")]
        assert repo.get("n") == Node(id="n", content="v")
        repo.commit([Node(id="m", content="w")], message="2")
        assert repo.gc(compact=True).compacted
        assert [n.id for n in repo.nodes()] == ["m", "n"]
        assert repo.fsck().ok


def test_compaction_keeps_keyspaces_it_does_not_know_and_the_file_mode(path: Path) -> None:
    with Repo.open(path) as repo:
        env = repo.kv.env
        future = env.open_db(b"a-newer-keyspace", create=True)
        with env.begin(write=True, db=future) as txn:
            for number in range(2000):
                txn.put(b"key-%05d" % number, b"value-%d" % number * 10)
        os.chmod(path / "data.mdb", 0o640)
        os.chown(path / "data.mdb", 4242, 4243)  # the suite runs as root (CI does)
        (path / ".compact-killed").mkdir()
        (path / ".compact-killed" / "data.mdb").write_bytes(b"left by a killed compaction")
        assert repo.gc(compact=True).compacted
        assert repo.get("n") == Node(id="n", content="v")
    after = (path / "data.mdb").stat()
    assert (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid) == (0o640, 4242, 4243)
    assert not [entry for entry in os.listdir(path) if entry.startswith(".compact-")]
    env = lmdb.open(str(path), max_dbs=64, readonly=True, lock=False)
    try:
        future = env.open_db(b"a-newer-keyspace", create=False)
        with env.begin(db=future) as txn:
            records = list(txn.cursor().iternext())
        assert len(records) == 2000
        assert records[7] == (b"key-00007", b"value-7" * 10)
    finally:
        env.close()


def test_a_refused_compaction_collects_nothing_first(path: Path) -> None:
    """gc(compact=True) is one outcome: refused before it collects, or done whole."""
    with Repo.open(path) as repo:
        first = repo.resolve("HEAD")
        second = repo.commit([Node(id="n", content="w")], message="2")
        repo.reset("main", first.id)  # the second commit is reachable from the reflog only
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with Repo.open(path) as repo:
            with pytest.raises(InvalidInput, match="another process has it open"):
                repo.gc(grace=timedelta(0), expire_reflog=timedelta(0), compact=True)
            assert repo.get("n", at=second.id) == Node(id="n", content="w")  # nothing collected
            report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
            assert report.objects_removed > 0 and report.commits_removed == 1
            with pytest.raises(NotFound):
                repo.get("n", at=second.id)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_reading_the_store_s_files_in_this_process_keeps_its_lock(path: Path) -> None:
    """Copying or reading a live store opens and closes mnemo.lock: that must release nothing."""
    with Repo.open(path) as repo:
        for file in sorted(path.iterdir()):
            if file.is_file():
                file.read_bytes()
        other = subprocess.run(
            [sys.executable, "-c", COMPACTOR, str(path)], capture_output=True, text=True, timeout=60
        )
        assert other.stdout.startswith("refused: compaction needs the store to itself"), other
        repo.commit([Node(id="m", content="w")], message="2")
    with Repo.open(path) as repo:
        assert [n.id for n in repo.nodes()] == ["m", "n"]


def test_a_forked_child_opens_the_store_again_and_holds_it_open(path: Path) -> None:
    parent = Repo.open(path)
    ready, go = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child reports through its exit status)
        status = 1
        try:
            os.read(ready, 1)  # the parent has closed its handle
            with pytest.raises(MnemoError, match="opened before a fork"):
                parent.get("n")
            with Repo.open(path) as mine:
                other = subprocess.run(
                    [sys.executable, "-c", COMPACTOR, str(path)], capture_output=True, text=True, timeout=60
                )
                if other.stdout.startswith("refused: compaction needs the store to itself"):
                    mine.commit([Node(id="from-child", content="c")], message="child")
                    status = 0
        finally:
            os._exit(status)
    parent.commit([Node(id="from-parent", content="p")], message="parent")
    parent.close()
    os.write(go, b"x")
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with Repo.open(path) as repo:
        assert [n.id for n in repo.nodes()] == ["from-child", "from-parent", "n"]
