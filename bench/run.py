"""Benchmarks for the core store; writes a markdown table of medians and ratios.

A row that says median is the median of repeated runs in this one process (the
sync-off commits: of runs in fresh processes, the sizes taking turns; see
commit_cpu.py); a ratio is of two medians measured interleaved unless the row says
one run each; other rows (bulk imports, gc, forget, the first recall catch-up) time
one run, as they change the store they measure. Usage:

    python bench/run.py [--out bench/results.md] [--sizes 1000,10000,100000] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from checkpointer import (
    bench_checkpointer,
    bench_checkpointer_cost,
    bench_checkpointer_postgres,
    bench_checkpointer_served,
)
from commit_cpu import bench_commit_cpu
from core_runs import bench_history, bench_merge, bench_size
from feature_runs import bench_claims, bench_integrity, bench_recall
from graph_step import bench_graph_step, bench_graph_step_postgres
from harness import write_table
from postgres import bench_postgres
from serve_load import bench_serve
from serve_several import bench_serve_several
from staleness import bench_staleness
from startup import bench_startup
from sync import bench_sync
from viewer import bench_viewer

from mnemosyne.store import settings

# The bench picks its embedders itself (HashEmbedder, MiniLM); a store it opens
# without one searches lexically, as the rows measured before `auto` existed.
settings.KEYS["embedder"] = "none"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results.md"))
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--runs", type=int, default=5, help="processes per size for the sync-off commit")
    parser.add_argument("--history", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="small sizes, for checking the script")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes, args.rounds, args.runs, args.history, args.claims = [1000, 5000], 5, 1, 300, 5000
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    try:
        for n in sizes:
            bench_size(n, root, args.rounds)
        bench_commit_cpu(root, sizes, args.runs)
        bench_history(root, args.history)
        bench_merge(root, max(sizes), args.history)
        bench_integrity(root, max(sizes), args.history)
        bench_claims(root, args.claims, min(10_000, args.claims // 2))
        bench_recall(root, max(sizes), args.rounds)
        bench_startup(root, 7 if args.quick else 21)
        bench_checkpointer(root, 40 if args.quick else 300)
        bench_checkpointer_cost(root, 100 if args.quick else 1000)
        bench_checkpointer_served(root, 40 if args.quick else 300)
        bench_graph_step(root, 3 if args.quick else 12)
        bench_checkpointer_postgres(40 if args.quick else 300)
        bench_graph_step_postgres(3 if args.quick else 12)
        bench_postgres(root, [1_000, 5_000] if args.quick else [10_000, 100_000], args.rounds)
        bench_sync(root, 300 if args.quick else 10_000, (300, 1_000) if args.quick else (1_000, 100_000))
        bench_viewer(root, 300 if args.quick else 10_000, 3_000 if args.quick else 100_000, 5 if args.quick else 30)
        # mnemo serve: 32 clients for 60 s on 100k memories, and get and search against the HTTP floor.
        bench_serve(root, 3_000 if args.quick else 100_000, 8 if args.quick else 32, 5.0 if args.quick else 60.0)
        # 1, 2 and 3 servers over one PostgreSQL store: commits/s, reads/s, and where the CPU went.
        bench_serve_several(root, 2_000 if args.quick else 10_000, 3.0 if args.quick else 10.0)
        # The staleness table prints itself (docs/recall.md, "Does it return stale facts?").
        bench_staleness(root, 60 if args.quick else 300, minilm_subjects=30 if args.quick else 100)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_table(args.out, started)


if __name__ == "__main__":
    main()
