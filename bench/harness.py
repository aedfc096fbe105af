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
    """Counts bytes of new objects written (wraps the LMDB transaction's put)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.puts: list[tuple[int, int]] = []
        self.spaces: list[Space] = []
        self._orig = lmdb_kv._Txn.put

    def __enter__(self) -> ByteCounter:
        counter = self
        orig = self._orig

        def put(txn: lmdb_kv._Txn, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
            done = orig(txn, space, key, value, overwrite)
            if done:
                counter.puts.append((len(key), len(value)))
                counter.spaces.append(space)
            if space is Space.OBJECTS and done:
                counter.bytes += len(value)
            return done

        lmdb_kv._Txn.put = put  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        lmdb_kv._Txn.put = self._orig  # type: ignore[method-assign]


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
