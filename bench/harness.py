"""The bench harness: rows of the results table and the synthetic memory workload."""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mnemosyne import Node, Provenance, Repo
from mnemosyne.store.kv import lmdb_kv
from mnemosyne.store.kv.base import Space


@dataclass
class Row:
    metric: str
    n: str
    value: str
    target: str
    ok: bool | None


ROWS: list[Row] = []


def row(metric: str, n: object, value: str, target: str = "", ok: bool | None = None) -> None:
    ROWS.append(Row(metric, str(n), value, target, ok))
    mark = "" if ok is None else ("ok" if ok else "MISSED")
    print(f"{metric:<58} {n!s:>8} {value:>16} {target:>14} {mark}", flush=True)


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def node_id(i: int) -> str:
    # ~36 characters, namespaced like real agent memory ids.
    return f"agents/a{i % 97:02d}/mem/{i:08d}-{(i * 2654435761) % 16**8:08x}"


def content(i: int, version: int = 0) -> str:
    text = f"memory {i} v{version}: the user said something worth keeping about topic {i % 113}. "
    return (text * 4)[:200]


def make_node(i: int, version: int = 0) -> Node:
    return Node(
        id=node_id(i),
        content=content(i, version),
        provenance=Provenance(agent_step=version, observation=f"obs-{i}-{version}", source="bench"),
    )


class ByteCounter:
    """Records every key a write transaction adds or overwrites, and the bytes of new objects.

    Wraps both ways into the LMDB transaction, ``put`` and ``put_many`` (``put_absent``,
    which content-addressed objects go in by, calls one of them), so a raw transaction
    "of the same keys and sizes" writes what the commit wrote: nodes, tree chunks, the
    commit, change-index and graph entries, refs, reflog and the recall queue. A key
    already present that a ``put_many`` without overwrite leaves alone is not counted:
    it writes nothing.
    """

    def __init__(self) -> None:
        self.bytes = 0
        self.puts: list[tuple[int, int]] = []
        self.spaces: list[Space] = []
        self._orig = lmdb_kv._Txn.put
        self._orig_many = lmdb_kv._Txn.put_many

    def _record(self, space: Space, key: bytes, value: bytes) -> None:
        self.puts.append((len(key), len(value)))
        self.spaces.append(space)
        if space is Space.OBJECTS:
            self.bytes += len(value)

    def __enter__(self) -> ByteCounter:
        counter = self
        orig, orig_many = self._orig, self._orig_many

        def put(txn: lmdb_kv._Txn, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
            done = orig(txn, space, key, value, overwrite)
            if done:
                counter._record(space, key, value)
            return done

        def put_many(
            txn: lmdb_kv._Txn, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True
        ) -> int:
            # Which keys a no-overwrite put_many adds is only known beforehand.
            fresh = items if overwrite else [item for item in items if txn.get(space, item[0]) is None]
            added = orig_many(txn, space, items, overwrite)
            for key, value in fresh:
                counter._record(space, key, value)
            return added

        lmdb_kv._Txn.put = put  # type: ignore[method-assign]
        lmdb_kv._Txn.put_many = put_many  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        lmdb_kv._Txn.put = self._orig  # type: ignore[method-assign]
        lmdb_kv._Txn.put_many = self._orig_many  # type: ignore[method-assign]


def used_bytes(repo: Repo) -> int:
    env = repo.kv.env  # type: ignore[attr-defined]
    return int((env.info()["last_pgno"] + 1) * env.stat()["psize"])




def write_table(out: Path, started: float) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Run on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, {platform.machine()}; {time.perf_counter() - started:.0f} s in all. "
        "Rows that say median are medians of repeated runs in one process (the sync-off commits: "
        "of runs in fresh processes, the sizes taking turns); other rows time one run. Ratios are "
        "of medians measured interleaved unless the row says one run each.",
        "",
        "| metric | n | value | target | |",
        "|---|---:|---:|---|---|",
    ]
    for r in ROWS:
        mark = "" if r.ok is None else ("ok" if r.ok else "**missed**")
        lines.append(f"| {r.metric} | {r.n} | {r.value} | {r.target} | {mark} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"\nwrote {out}")
