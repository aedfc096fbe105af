"""LangGraph checkpointer rows: MnemosyneSaver beside SqliteSaver, side by side in one run.

A graph with 20 channels: a growing message list, a few counters and flags, and
text fields of a few hundred bytes. Each step changes three channels and saves a
checkpoint (as LangGraph does after every super-step), then reads the thread's
latest one (as LangGraph does when it resumes a thread). Both savers are durable:
ours on LMDB with its default (sync on), SqliteSaver in WAL mode with
``synchronous=FULL``. Blocks of each take turns; the figures are medians.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import lmdb
from harness import row
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

from mnemosyne import Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver

CHANNELS = 20
CHANGED = 3


def _values(step: int) -> dict[str, Any]:
    values: dict[str, Any] = {
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "words " * 20}
            for i in range(min(step, 12) + 1)
        ],
        "step": step,
    }
    for c in range(CHANNELS - len(values)):
        values[f"field_{c:02d}"] = (f"channel {c} at step {step - step % (c + 2)} " * 6)[:240]
    return values


class Thread:
    """One thread's checkpoints, put and read back the way a running graph does."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.versions: dict[str, int] = {}
        self.step = 0

    def put(self) -> None:
        self.step += 1
        values = _values(self.step)
        names = list(values)
        changed = [*names[: CHANGED - 1], names[2 + self.step % (CHANNELS - 2)]]
        for name in values:
            if name not in self.versions or name in changed:
                self.versions[name] = self.versions.get(name, 0) + 1
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=self.step))
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(self.versions)
        new = {name: self.versions[name] for name in changed}
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        self.config = self.saver.put(self.config, checkpoint, metadata, new)

    def get(self) -> None:
        found = self.saver.get_tuple({"configurable": {"thread_id": self.config["configurable"]["thread_id"]}})
        assert found is not None and found.checkpoint["channel_values"]["step"] == self.step


def _timed(action: Any, times: int) -> list[float]:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def _raw_lmdb_floor(root: Path, rounds: int) -> float:
    """A durable LMDB transaction of five 4 KB values: the disk's floor for a put."""
    env = lmdb.open(str(root / "raw.lmdb"), map_size=1 << 30)
    payload = os.urandom(4096)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        with env.begin(write=True) as txn:
            for k in range(5):
                txn.put(f"{i:08d}/{k}".encode(), payload)
        samples.append(time.perf_counter() - start)
    env.close()
    return statistics.median(samples)


def bench_checkpointer(root: Path, rounds: int = 200, blocks: int = 5) -> None:
    repo = Repo.init(root / "saver.mnemo")
    ours = Thread(MnemosyneSaver(repo), "thread-1")
    connection = sqlite3.connect(root / "saver.sqlite", check_same_thread=False)
    theirs = Thread(SqliteSaver(connection), "thread-1")
    connection.execute("PRAGMA synchronous=FULL")
    for thread in (ours, theirs):  # warm up: a thread that has run a while
        for _ in range(50):
            thread.put()
            thread.get()
    puts: dict[str, list[float]] = {"ours": [], "theirs": []}
    gets: dict[str, list[float]] = {"ours": [], "theirs": []}
    per_block = max(rounds // blocks, 1)
    for block in range(blocks):
        order = [("ours", ours), ("theirs", theirs)]
        for name, thread in order if block % 2 == 0 else reversed(order):
            puts[name] += _timed(thread.put, per_block)
            gets[name] += _timed(thread.get, per_block * 5)
    mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    sync = connection.execute("PRAGMA synchronous").fetchone()[0]
    assert mode == "wal" and sync == 2, (mode, sync)
    floor = _raw_lmdb_floor(root, rounds)
    repo.close()
    connection.close()
    put_ours, put_theirs = (statistics.median(puts[k]) * 1e6 for k in ("ours", "theirs"))
    get_ours, get_theirs = (statistics.median(gets[k]) * 1e6 for k in ("ours", "theirs"))
    label = f"{CHANNELS} channels"
    row(
        "langgraph: put a checkpoint, MnemosyneSaver / SqliteSaver (WAL, FULL), durable, medians",
        label,
        f"{put_ours:.0f} / {put_theirs:.0f} µs = {put_ours / put_theirs:.2f}",
        "<= 2",
        put_ours / put_theirs <= 2,
    )
    row(
        "langgraph: get_tuple of the latest, MnemosyneSaver / SqliteSaver, medians",
        label,
        f"{get_ours:.1f} / {get_theirs:.1f} µs = {get_ours / get_theirs:.2f}",
        "<= 1.5",
        get_ours / get_theirs <= 1.5,
    )
    row(
        "langgraph: the floor, a durable LMDB transaction of five 4 KB values / SqliteSaver's put",
        "median",
        f"{floor * 1e6:.0f} / {put_theirs:.0f} µs = {floor * 1e6 / put_theirs:.2f}",
    )


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bench_checkpointer(Path(tmp))
