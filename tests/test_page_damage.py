"""A damage sweep: every page of a small store zeroed in turn, and every bit of both meta pages flipped.

Damage must give a report, never a crash, and never an "ok" on a store that
lost a commit or holds wrong derived data. Each damaged copy is probed by a
process of its own (``support.damage_probe``): a probe ended by a signal is a
crash; a probe whose ``fsck`` says ok must read what the undamaged store reads
(its export, its log and a semantic search, which reads the stored vectors).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support import script, script_env

from mnemosyne import CorruptObject, Node, Repo

PAGE = 4096
META_BYTES = 152  # the page header and LMDB 0.9's meta record


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of a few dozen pages: three commits, words long enough for overflow pages, vectors."""
    path = tmp_path_factory.mktemp("sweep") / "s"
    with Repo.init(path, embedder="hash") as repo:
        for commit in range(3):
            nodes = [
                Node(id=f"n/{commit}/{n}", content="word " * (commit * n * 7) + str(n)) for n in range(15)
            ]
            repo.commit(nodes)
        assert repo.search("word 7", mode="semantic")  # the vectors are stored
    return path


def probe(path: Path, *flips: str) -> list[dict[str, Any]]:
    """The probe's verdicts on the store at ``path`` (one per flip, or one)."""
    done = subprocess.run(
        script("damage_probe", str(path), *flips),
        env=script_env(),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"the probe crashed ({done.returncode}): {done.stderr[-2000:]}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def sweep(store: Path, tmp_path: Path, damages: list[str]) -> list[dict[str, Any]]:
    """Probe each damage on a copy of ``store``, in four processes two at a time."""
    [whole] = probe(store)
    assert whole["fsck"] == "ok"
    shards = [damages[start::4] for start in range(4)]

    def run(number: int) -> list[dict[str, Any]]:
        copy = tmp_path / str(number)
        shutil.copytree(store, copy)
        return probe(copy, *shards[number])

    with ThreadPoolExecutor(2) as pool:
        verdicts = [verdict for shard in pool.map(run, range(len(shards))) for verdict in shard]
    assert len(verdicts) == len(damages)
    for verdict in verdicts:
        if verdict["fsck"] == "ok":
            for part in ("export", "log", "search"):
                assert verdict[part] == whole[part], f"{verdict['damage']}: fsck says ok, the {part} differs"
    return verdicts


@pytest.mark.slow
def test_every_page_zeroed_in_turn_gives_a_report_never_a_crash_or_a_false_ok(
    store: Path, tmp_path: Path
) -> None:
    pages = os.path.getsize(store / "data.mdb") // PAGE
    assert 20 <= pages <= 80
    verdicts = sweep(store, tmp_path, [f"zero:{page}" for page in range(pages)])
    assert sum(verdict["fsck"] != "ok" for verdict in verdicts) >= pages // 3  # damage was seen


LOCATING = [(16, 8), (40, 8), (80, 8), (92, 4), (128, 24)]
"""Byte ranges of a meta page (offset, length) that say where data lies: magic and version; the
free database's page size, flags, depth; its root; the main database's flags and depth; its root,
the last page and the transaction number. The rest (statistics, map size and address) is not read
to find anything."""


@pytest.mark.slow
def test_single_bit_flips_across_both_meta_pages_give_no_crash_and_no_false_ok(
    store: Path, tmp_path: Path
) -> None:
    data = (store / "data.mdb").read_bytes()
    txnids = [struct.unpack_from("=Q", data, page + 144)[0] for page in (0, PAGE)]
    newest = 0 if txnids[0] > txnids[1] else PAGE
    flips = []
    for page in (0, PAGE):
        # Of the older page, LMDB reads only the transaction number (to pick the newer), and
        # opening checks its last page and free list too; of the newer page, all that locates.
        ranges = LOCATING if page == newest else [(80, 8), (128, 24)]
        locating = {at for start, size in ranges for at in range(start, start + size)}
        for at in range(16, META_BYTES):
            # Every bit of what locates data; one bit (a different one each byte) of the rest.
            bits = range(8) if at in locating else [at % 8]
            flips.extend(f"flip:{page + at}:{bit}" for bit in bits)
    assert len(flips) > 700
    sweep(store, tmp_path, flips)


def leaf_pages(path: Path) -> list[int]:
    """Pages that read as B-tree leaves (LMDB's P_LEAF flag, their own number in their header)."""
    data = (path / "data.mdb").read_bytes()
    found = []
    for page in range(2, len(data) // PAGE):
        number, _, flags = struct.unpack_from("=QHH", data, page * PAGE)
        if number == page and flags == 0x02:
            found.append(page)
    return found


def test_a_zeroed_leaf_page_stops_fsck_and_export_with_a_report_not_a_crash(
    store: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "d"
    shutil.copytree(store, copy)
    stopped = []
    with open(copy / "data.mdb", "r+b") as handle:
        for page in leaf_pages(store):
            kept = os.pread(handle.fileno(), PAGE, page * PAGE)
            os.pwrite(handle.fileno(), bytes(PAGE), page * PAGE)
            try:
                with Repo.open(copy, readonly=True) as repo:
                    for read in (repo.fsck, lambda: repo.store.export(io.BytesIO())):
                        try:
                            read()
                        except CorruptObject as exc:
                            if "stopped LMDB" in str(exc):
                                stopped.append(page)
            except CorruptObject:
                pass  # refused on open: a report too
            os.pwrite(handle.fileno(), kept, page * PAGE)
    assert stopped  # LMDB would have aborted this process on these pages
    os.pwrite(os.open(copy / "data.mdb", os.O_WRONLY), bytes(PAGE), stopped[0] * PAGE)
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(copy), "fsck"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "damaged" in line and "SIGABRT" in line
