"""Where the client and the PostgreSQL server run: pinned to CPUs, so both sides of a ratio share one placement.

On a small machine a round trip's time depends on whether the server's backend
runs on the client's CPU: measured here, one ``SELECT`` by key is 38 µs when the
backend shares the client's CPU and 90 to 100 µs when it runs on the other one (the
wake-up crosses CPUs). Left to the scheduler, each connection lands on one or the
other and stays there, so two connections compared side by side could differ by
2.5 times for no reason of their own. Pinned, every connection of both sides sees the
same placement.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def _threads_of(pid: int) -> list[int]:
    try:
        return [int(task) for task in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _pin(pid: int, cpus: set[int]) -> None:
    for task in _threads_of(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(task, cpus)


@contextlib.contextmanager
def placed(data_dir: Path, client: set[int], server: set[int]) -> Iterator[None]:
    """Run the block with this process on ``client`` CPUs and the server (every backend, new ones too) on ``server``.

    New backends are forked by the postmaster and inherit its CPUs; those already
    running are pinned one by one. Everything is unpinned afterwards.
    """
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    everything = set(range(os.cpu_count() or 1))
    me = os.getpid()
    try:
        for pid in [postmaster, *children(postmaster)]:
            _pin(pid, server)
        _pin(me, client)
        yield
    finally:
        for pid in [postmaster, *children(postmaster)]:
            _pin(pid, everything)
        _pin(me, everything)


def placements() -> list[tuple[str, set[int], set[int]]]:
    """The placements measured: the server on a CPU of its own, and everything on one CPU."""
    if (os.cpu_count() or 1) < 2:
        return [("one CPU", {0}, {0})]
    return [("server on its own CPU", {0}, {1}), ("one CPU shared", {0}, {0})]
