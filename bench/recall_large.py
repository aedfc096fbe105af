"""Recall at a million memories: the approximate index beside exact search at 100k.

Each size gets a store of its own (bulk import, sync off): ids under ten
namespaces of ten each (``t3/`` holds 1/10 of the memories, ``t3/u13/`` 1/100),
texts of twelve words drawn from a 5,000-word vocabulary with a Zipf-like skew
(so some words are in most memories, as in real text). Vectors are synthetic,
384 wide (MiniLM's width): each text is put near one of 1,000 centres, as
embeddings of real text cluster by topic (a uniform cloud has no near
neighbours for any index to find). They are stored through the public API
(``reindex_recall(vectors=True)``).

A fresh process per size then opens the store, runs one semantic search (at 1M
that builds the approximate index from the stored vectors: the build row), and
times hybrid top-10 searches with no filter and with the two namespace filters:
31 questions, then 31 others (a fresh handle reads the index's names one by one
at first, then the whole map: the first searches pay for it, and are shown apart).
It reports its memory after those searches, then switches the store to exact
ranking (``recall.approximate_from off``) and measures recall@10 of the
semantic ranking against it on the same vectors. 100k stays under the default
threshold (200,000): its rows are exact search, as before.

Run alone: ``python bench/recall_large.py --sizes 100000,1000000``; ``make
bench-large`` runs it as one of its groups.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import ROWS, Row, row

from mnemosyne import Node, Repo
from mnemosyne.model.defaults import APPROXIMATE_FROM

DIM = 384
CENTRES = 1000
WORDS = 5000
QUERIES = 31
THRESHOLD = [APPROXIMATE_FROM]
"""The stores' ``recall.approximate_from`` (the default; ``--quick`` lowers it)."""
NAMESPACES = {"none": None, "1/10": "t3/", "1/100": "t3/u13/"}


class Synthetic:
    """Clustered 384-wide vectors, a function of the text alone (the bench's embedder)."""

    model_id = "synthetic-384"
    dim = DIM

    def __init__(self) -> None:
        self.centres = np.random.default_rng(11).standard_normal((CENTRES, DIM)).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            rng = np.random.default_rng(seed)
            out[i] = self.centres[seed % CENTRES] + 0.45 * rng.standard_normal(DIM).astype(np.float32)
        return out


def vocabulary() -> list[str]:
    rng = np.random.default_rng(3)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=int(rng.integers(4, 10)))) for _ in range(WORDS)]


def texts(n: int, seed: int) -> list[str]:
    """``n`` texts of twelve words; word ``r`` of the vocabulary drawn with weight 1/(r+10)."""
    words = np.array(vocabulary())
    weights = 1.0 / (np.arange(WORDS) + 10.0)
    rng = np.random.default_rng(seed)
    picks = rng.choice(WORDS, size=(n, 12), p=weights / weights.sum())
    return [" ".join(words[row_]) for row_ in picks]


def memory_id(i: int) -> str:
    return f"t{i % 10}/u{i % 100:02d}/m{i:07d}"


def build(path: Path, n: int) -> tuple[float, float]:
    """The store of ``n`` memories with their vectors; (import s, vectors s)."""
    body = texts(n, seed=n)
    with Repo.init(path, sync=False) as repo:
        repo.config("embedder", "none")
        repo.config("recall.approximate_from", str(THRESHOLD[0]))
        t0 = time.perf_counter()
        repo.commit([Node(id=memory_id(i), content=body[i]) for i in range(n)], message="import")
        imported = time.perf_counter() - t0
        repo.use_embedder(Synthetic())
        t0 = time.perf_counter()
        repo.reindex_recall(vectors=True)
        return imported, time.perf_counter() - t0


def child(path: str) -> None:
    """In a fresh process: build on first search, time searches, measure memory and recall."""
    repo = Repo.open(path)
    repo.use_embedder(Synthetic())
    # A question is shorter than a memory: four words. Other questions after the first ones.
    first_ones, short = ([" ".join(q.split()[:4]) for q in texts(QUERIES, seed)] for seed in (99, 100))
    t0 = time.perf_counter()
    repo.search(first_ones[0], k=10, mode="semantic")
    first = time.perf_counter() - t0
    out: dict[str, object] = {"first": first}
    # A fresh handle first reads the index's names one by one, then the whole map once it
    # has read about as many as the map has pages: the first searches are timed apart.
    for name, prefix in NAMESPACES.items():
        out["cold " + name] = statistics.median(timed(repo, first_ones, prefix))
    for name, prefix in NAMESPACES.items():
        out[name] = statistics.median(timed(repo, short, prefix))
    semantic = {
        name: [repo.search(q, k=10, mode="semantic", prefix=p) for q in short]
        for name, p in NAMESPACES.items()
    }
    out["memory"] = {key: status(key) for key in ("VmHWM", "RssAnon", "RssFile")}
    threshold = repo.config("recall.approximate_from")
    repo.config("recall.approximate_from", "off")
    try:
        recall = {}
        for name, prefix in NAMESPACES.items():
            found = 0
            for query, approx in zip(short, semantic[name], strict=True):
                exact = repo.search(query, k=10, mode="semantic", prefix=prefix)
                found += len({h.hash for h in approx} & {h.hash for h in exact})
            recall[name] = found / (10 * len(short))
        out["recall"] = recall
    finally:
        repo.config("recall.approximate_from", threshold)
    repo.close()
    print(json.dumps(out))


def timed(repo: Repo, queries: list[str], prefix: str | None) -> list[float]:
    """Seconds each hybrid top-10 search of ``queries`` took."""
    times = []
    for query in queries:
        t0 = time.perf_counter()
        hits = repo.search(query, k=10, prefix=prefix)
        times.append(time.perf_counter() - t0)
        assert len(hits) == 10
    return times


def status(key: str) -> float:
    """A line of /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_recall(root: Path, sizes: list[int]) -> list[Row]:
    """Hybrid search, recall@10, index build and memory at each size."""
    start = len(ROWS)
    results: dict[int, dict[str, Any]] = {}
    for n in sizes:
        path = root / f"recall-{n}"
        imported, embedded = build(path, n)
        row("recall store: bulk import, sync off (nodes/s)", n, f"{n / imported:,.0f}")
        row("recall store: reindex_recall(vectors=True), synthetic (vectors/s)", n, f"{n / embedded:,.0f}")
        here = Path(__file__).resolve()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here.parent), *sys.path]))
        output = subprocess.check_output([sys.executable, str(here), "--child", str(path)], env=env)
        results[n] = json.loads(output.decode().strip().splitlines()[-1])
    for n in sizes:
        got = results[n]
        approximate = n >= THRESHOLD[0]
        how = "approximate index" if approximate else "exact"
        first = float(got["first"])
        if approximate:
            rate = n / first
            built = f"{rate:,.0f} in {first:.1f} s"
            row(
                "approximate index build: first search, fresh process (vectors/s)",
                n,
                built,
                ">= 20,000",
                rate >= 20_000,
            )
        else:
            row("first semantic search of a fresh process, exact (s)", n, f"{first:.2f}")
        for name in NAMESPACES:
            ms = float(got[name]) * 1e3
            label = "no filter" if name == "none" else f"namespace passing {name}"
            cold = float(got["cold " + name]) * 1e3
            row(
                f"hybrid top-10, {label}, {how}, first {QUERIES} searches of a fresh process, median (ms)",
                n,
                f"{cold:.1f}",
            )
            row(
                f"hybrid top-10, {label}, {how}, the next {QUERIES}, median (ms)",
                n,
                f"{ms:.1f}",
                "<= 20",
                ms <= 20,
            )
        memory = got["memory"]
        peak = float(memory["VmHWM"])
        target = "<= 1024" if approximate else ""
        row(
            "searching process: peak RSS (VmHWM) (MiB)",
            n,
            f"{peak:,.0f}",
            target,
            peak <= 1024 if approximate else None,
        )
        row("searching process: private memory (RssAnon) after (MiB)", n, f"{memory['RssAnon']:,.0f}")
        row("searching process: store pages mapped (RssFile) after (MiB)", n, f"{memory['RssFile']:,.0f}")
        for name, value in got["recall"].items():
            label = "no filter" if name == "none" else f"namespace passing {name}"
            ok = value >= 0.95 if approximate else None
            row(
                f"recall@10 of the semantic ranking vs exact, {label}",
                n,
                f"{value:.3f}",
                ">= 0.95" if approximate else "",
                ok,
            )
    return ROWS[start:]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--quick", action="store_true", help="10k exact beside 50k approximate")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, THRESHOLD[0] = "10000,50000", 20_000
    if args.child:
        child(args.child)
        return
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-recall-"))
    try:
        bench_recall(root, [int(s) for s in args.sizes.split(",")])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
