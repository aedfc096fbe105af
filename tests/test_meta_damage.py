"""A damaged LMDB meta page is reported when the store opens, not read as an older commit.

LMDB keeps two meta pages (where it records the latest commit) and trusts the
one with the larger transaction number; they carry no checksum, so one flipped
bit in a transaction number used to make it read the commit before the last
as the latest: ``log`` one commit short, ``fsck`` "ok". Every bit of either
page's transaction number is flipped here, in stores whose latest transaction
number is even and odd; healthy stores (new, written, crashed mid-commit,
written while they are opened) must still open.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import script, script_env
from support.cli_harness import CliStore, assert_error
from support.components import unavailable

from mnemosyne import CorruptObject, InvalidInput, Node, Repo, Store

PAGE_HEADER = 16
PSIZE_AT = PAGE_HEADER + 24  # LMDB 0.9: the free database's md_pad holds the page size
FREE_ROOT_AT = PAGE_HEADER + 64
TXNID_AT = PAGE_HEADER + 128


def meta_offsets(data: bytes) -> tuple[int, int]:
    """Where the two meta pages start."""
    psize = struct.unpack_from("=I", data, PSIZE_AT)[0]
    return 0, psize


def txnids(data: bytes) -> list[int]:
    return [struct.unpack_from("=Q", data, at + TXNID_AT)[0] for at in meta_offsets(data)]


def current_meta(data: bytes) -> int:
    """The start of the meta page LMDB reads: the one with the larger transaction number."""
    first, second = txnids(data)
    return meta_offsets(data)[0 if first > second else 1]


def store_with_commits(path: Path, commits: int) -> list[str]:
    with Repo.init(path) as repo:
        return [repo.commit([Node(id=f"notes/{n}", content=f"note {n}")]).id for n in range(commits)]


def damaged_copy(source: Path, target: Path, offset: int, bit: int) -> Path:
    """A copy of the store at ``source`` with one bit of its data file flipped."""
    shutil.copytree(source, target)
    data = bytearray((target / "data.mdb").read_bytes())
    data[offset + bit // 8] ^= 1 << (bit % 8)
    (target / "data.mdb").write_bytes(bytes(data))
    return target


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four stores whose latest transaction numbers end in each of 00, 01, 10 and 11."""
    made = []
    for commits in (3, 4, 5, 6):
        path = tmp_path_factory.mktemp("meta") / "s"
        store_with_commits(path, commits)
        made.append(path)
    assert {max(txnids((path / "data.mdb").read_bytes())) % 4 for path in made} == {0, 1, 2, 3}
    return made


@pytest.mark.parametrize("page", ["current", "older"])
def test_every_bit_flipped_in_a_transaction_number_is_reported(
    stores: list[Path], tmp_path: Path, page: str
) -> None:
    for number, source in enumerate(stores):
        copy = tmp_path / str(number)
        shutil.copytree(source, copy)
        data = (copy / "data.mdb").read_bytes()
        current = current_meta(data)
        start = current if page == "current" else sum(meta_offsets(data)) - current
        with open(copy / "data.mdb", "r+b") as handle:
            for bit in range(64):
                at = start + TXNID_AT + bit // 8
                os.pwrite(handle.fileno(), bytes([data[at] ^ 1 << (bit % 8)]), at)
                with pytest.raises(CorruptObject, match="meta pages"):
                    Store.open(copy, readonly=True).close()
                os.pwrite(handle.fileno(), data[at : at + 1], at)
        Store.open(copy, readonly=True).close()  # whole again


def test_the_cli_reports_a_lost_last_commit_as_damage_exit_5(tmp_path: Path) -> None:
    made = []
    with Repo.init(tmp_path / "s") as repo:
        # Up to a latest transaction number with bit 1 set: flipping it gives n - 2, next to
        # the older page's n - 1, so the pages still look consecutive and LMDB reads commit n - 1.
        while len(made) < 3 or not max(txnids((tmp_path / "s" / "data.mdb").read_bytes())) & 2:
            made.append(repo.commit([Node(id=f"notes/{len(made)}", content="note")]).id)
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    copy = damaged_copy(tmp_path / "s", tmp_path / "d", current_meta(data) + TXNID_AT, 1)
    store = CliStore(copy)
    for command in (["log"], ["show", f"notes/{len(made) - 1}"], ["fsck"], ["export", "-"]):
        result = store.run(*command)
        assert_error(result, 5, "damaged")
        assert "meta pages" in result.stderr and "backup" in result.stderr
    with Repo.open(tmp_path / "s", readonly=True) as healthy:
        assert [commit.id for commit in healthy.log()] == made[::-1]
    # Said so: the commit before the last, as LMDB reads it, exported all the same.
    store.result("export", "--salvage", str(tmp_path / "salvaged"))
    CliStore(tmp_path / "restored").result("import", str(tmp_path / "salvaged"))
    with Repo.open(tmp_path / "restored") as restored:
        assert [commit.id for commit in restored.log()] == made[-2::-1]


def test_a_free_page_list_outside_the_file_is_reported(tmp_path: Path) -> None:
    store_with_commits(tmp_path / "s", 2)
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    copy = damaged_copy(tmp_path / "s", tmp_path / "d", current_meta(data) + FREE_ROOT_AT, 40)
    with pytest.raises(CorruptObject, match="free pages"):
        Store.open(copy).close()


def test_healthy_stores_open(tmp_path: Path) -> None:
    Repo.init(tmp_path / "new").close()
    Store.open(tmp_path / "new").close()
    for commits in (1, 2, 5):
        path = tmp_path / f"s{commits}"
        made = store_with_commits(path, commits)
        with Repo.open(path) as repo:
            assert [commit.id for commit in repo.log()] == made[::-1]
    with Store.open(tmp_path / "s5") as store:
        store.compact()
    Store.open(tmp_path / "s5", readonly=True).close()


@pytest.mark.slow
def test_a_store_crashed_mid_commit_or_written_while_opened_is_not_reported(tmp_path: Path) -> None:
    if not hasattr(signal, "SIGKILL"):
        unavailable("this platform has no SIGKILL")
    path = tmp_path / "s"
    Repo.init(path).close()
    for trial in range(3):
        writer = subprocess.Popen(
            script("crash_writer", str(path), str(trial), str(trial)),
            env=script_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert writer.stdout is not None and writer.stdin is not None
            assert writer.stdout.readline() == "ready\n"
            writer.stdin.write("go\n")
            writer.stdin.flush()
            assert writer.stdout.readline().startswith("commit ")
            # Opened again and again while another process commits: never taken for damage.
            deadline = time.monotonic() + 0.3 + trial * 0.1
            while time.monotonic() < deadline:
                Store.open(path, readonly=True).close()
            writer.kill()  # SIGKILL, wherever the writer is in its commit
        finally:
            writer.kill()
            writer.wait(timeout=30)
            for stream in (writer.stdin, writer.stdout):
                if stream is not None:
                    stream.close()
        with Repo.open(path) as repo:
            assert len(list(repo.log())) > trial


MAIN_DBS_AT = PAGE_HEADER + 24  # mm_dbs: the free database's record, then the main database's
MAIN_ROOT_AT = PAGE_HEADER + 112  # mm_dbs[MAIN_DBI].md_root
DB_RECORDS = 96


def main_root(data: bytes, at: int) -> int:
    return int(struct.unpack_from("=Q", data, at + MAIN_ROOT_AT)[0])


def test_a_root_pointer_leading_to_the_older_tree_is_reported_not_read(tmp_path: Path) -> None:
    made = store_with_commits(tmp_path / "s", 2)
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    newest = current_meta(data)
    older = sum(meta_offsets(data)) - newest
    moved = bytearray(data)
    # The newest page's main root pointed at the older page's: one flipped bit when they
    # differ in one, else the older page's database records copied in (its txnid kept).
    struct.pack_into("=Q", moved, newest + MAIN_ROOT_AT, main_root(data, older))
    copied = bytearray(data)
    copied[newest + MAIN_DBS_AT : newest + MAIN_DBS_AT + DB_RECORDS] = data[
        older + MAIN_DBS_AT : older + MAIN_DBS_AT + DB_RECORDS
    ]
    for number, damaged_data in enumerate((moved, copied)):
        copy = tmp_path / f"d{number}"
        shutil.copytree(tmp_path / "s", copy)
        (copy / "data.mdb").write_bytes(bytes(damaged_data))
        for readonly in (True, False):
            with pytest.raises(CorruptObject, match="meta page names transaction"):
                Store.open(copy, readonly=readonly).close()
        assert (copy / "data.mdb").read_bytes() == damaged_data  # nothing written
    result = CliStore(tmp_path / "d0").run("fsck")
    assert_error(result, 5, "damaged")
    with Repo.open(tmp_path / "s") as healthy:
        assert [commit.id for commit in healthy.log()] == made[::-1]


def test_every_bit_of_the_main_root_flipped_is_reported_and_nothing_is_written(tmp_path: Path) -> None:
    store_with_commits(tmp_path / "s", 3)
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    at = current_meta(data) + MAIN_ROOT_AT
    copy = tmp_path / "d"
    shutil.copytree(tmp_path / "s", copy)
    with open(copy / "data.mdb", "r+b") as handle:
        for bit in range(64):
            flipped = bytearray(data)
            flipped[at + bit // 8] ^= 1 << (bit % 8)
            os.pwrite(handle.fileno(), bytes(flipped[:8192]), 0)
            with pytest.raises(CorruptObject, match="damaged"):
                Repo.open(copy).close()  # for writing: refused before anything is written
            assert (copy / "data.mdb").read_bytes() == flipped, bit
        os.pwrite(handle.fileno(), data[:8192], 0)
    Repo.open(copy).close()  # whole again


def test_a_commit_to_a_damaged_store_is_refused_and_leaves_it_recoverable(tmp_path: Path) -> None:
    made = store_with_commits(tmp_path / "s", 2)
    data = (tmp_path / "s" / "data.mdb").read_bytes()
    at = current_meta(data) + MAIN_ROOT_AT
    with open(tmp_path / "s" / "data.mdb", "r+b") as handle:
        os.pwrite(handle.fileno(), bytes([data[at] ^ 1]), at)
    damaged_bytes = (tmp_path / "s" / "data.mdb").read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(tmp_path / "s"), "commit", "-m", "more", "-"],
        input='{"id": "notes/new", "content": "x"}',
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 5, result.stderr
    assert result.stderr.startswith("error: ") and "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "s" / "data.mdb").read_bytes() == damaged_bytes
    # Said so, salvage reads what it can, read-only: here the root leads to no keyspaces.
    with pytest.raises(InvalidInput, match="read-only"):
        Store.open(tmp_path / "s", readonly=False, salvage=True)
    salvaged = CliStore(tmp_path / "s").run("export", "--salvage", str(tmp_path / "salvaged"))
    assert_error(salvaged, 5, "leads to no keyspaces")
    assert (tmp_path / "s" / "data.mdb").read_bytes() == damaged_bytes
    with open(tmp_path / "s" / "data.mdb", "r+b") as handle:
        os.pwrite(handle.fileno(), data[at : at + 1], at)  # the bit flipped back: all is there
    with Repo.open(tmp_path / "s") as repo:
        assert [commit.id for commit in repo.log()] == made[::-1]
