"""Recall at a million memories: the approximate index beside exact search at 100k.

Each size gets a store of its own (bulk import, sync off): ids under ten
namespaces of ten each (``t3/`` holds 1/10 of the memories, ``t3/u13/`` 1/100),
texts of twelve words drawn from a 5,000-word vocabulary with a Zipf-like skew
(so some words are in most memories, as in real text), and 100 planted unique
matches (``n/K``: a text whose vector points in a direction of its own, far from
everything else). Vectors are synthetic, 384 wide (MiniLM's width; see
synthetic.py): each text is put near one of 1,000 centres, as embeddings of real
text cluster by topic. They are stored through the public API
(``reindex_recall(vectors=True)``).

A fresh process per size then opens the store and runs one semantic search (at
1M that builds the approximate index from the stored vectors and saves it beside
the store: the build row). Another fresh process maps the saved index at its
first search, and times hybrid top-10 searches with no filter and with the two
namespace filters: 31 questions, then 31 others (a fresh handle reads the index's
names one by one at first, then the whole map: the first searches pay for it,
and are shown apart), then the lexical ranking alone on the others. It reports
its memory after those searches, times the lexical ranking skipping segments
beside the same ranking reading every segment (blocks taking turns, the answers
compared), measures how often the planted match is in the semantic top 10 for
a question about it, then switches the store to exact ranking
(``recall.approximate_from off``) and measures recall@10 of the semantic ranking
against it on the same vectors. 100k stays under the default threshold
(200,000): its rows are exact search, as before.

Then ``mnemo search`` and ``mnemo context`` run as whole processes (Python
start, imports, opening the store, mapping the saved index, the query, the
output), the sizes taking turns; then 10,000 new memories are committed and a
fresh process's first search catches up (indexes, embeds and links them, and
saves the index again), and ``mnemo search`` runs once more.

Run alone: ``python bench/recall_large.py --sizes 100000,1000000``; ``make
bench-large`` runs it as one of its groups.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from harness import ROWS, Row, row
from synthetic import Synthetic

from mnemosyne import Node, Repo
from mnemosyne.index.view import Stores, View
from mnemosyne.model.choices import SearchMode
from mnemosyne.model.defaults import APPROXIMATE_FROM
from mnemosyne.recall.bm25 import Blocks, lexical
from mnemosyne.recall.matrix import VectorCache
from mnemosyne.recall.names import Arrays
from mnemosyne.recall.postings import Postings
from mnemosyne.recall.search import Filters, acceptor

WORDS = 5000
QUERIES = 31
NEEDLES = 100
"""Planted unique matches per store."""
ADDED = 10_000
"""Memories committed after the index is saved, for the catch-up row."""
CLI_RUNS = 5
"""Fresh ``mnemo`` processes per size and command (the median is reported)."""
THRESHOLD = [APPROXIMATE_FROM]
"""The stores' ``recall.approximate_from`` (the default; ``--quick`` lowers it)."""
NAMESPACES = {"none": None, "1/10": "t3/", "1/100": "t3/u13/"}
HERE = Path(__file__).resolve().parent
DEFAULT_SCOPE = bytes(4)
"""The default tenant's key scope (the lexical side-by-side reads the index directly)."""


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


def needle_text(k: int) -> str:
    """Planted unique match ``k``: ``needle K`` and ten words (see synthetic.py)."""
    return f"needle {k} " + " ".join(texts(1, seed=10_000 + k)[0].split()[:10])


def needle_question(k: int) -> str:
    """A question about planted match ``k``: its first two words and two others."""
    return f"needle {k} " + " ".join(texts(1, seed=20_000 + k)[0].split()[:2])


def build(path: Path, n: int) -> tuple[float, float]:
    """The store of ``n`` memories (and the planted matches) with their vectors; (import s, vectors s)."""
    body = texts(n, seed=n)
    with Repo.init(path, sync=False) as repo:
        repo.config("embedder", "none")
        repo.config("recall.approximate_from", str(THRESHOLD[0]))
        nodes = [Node(id=memory_id(i), content=body[i]) for i in range(n)]
        nodes += [Node(id=f"n/{k}", content=needle_text(k)) for k in range(NEEDLES)]
        t0 = time.perf_counter()
        repo.commit(nodes, message="import")
        imported = time.perf_counter() - t0
        repo.use_embedder(Synthetic())
        t0 = time.perf_counter()
        repo.reindex_recall(vectors=True)
        return imported, time.perf_counter() - t0


def build_child(path: str) -> None:
    """In a fresh process: the first semantic search (past the threshold: build and save the index)."""
    repo = Repo.open(path)
    repo.use_embedder(Synthetic())
    t0 = time.perf_counter()
    repo.search("the first question", k=10, mode="semantic")
    first = time.perf_counter() - t0
    memory = {key: status(key) for key in ("VmHWM", "RssAnon", "RssFile")}
    repo.close()
    print(json.dumps({"first": first, "build memory": memory}))


def child(path: str) -> None:
    """In another fresh process: time searches (through the saved index), measure memory and recall."""
    repo = Repo.open(path)
    repo.use_embedder(Synthetic())
    # A question is shorter than a memory: four words. Other questions after the first ones.
    first_ones, short = ([" ".join(q.split()[:4]) for q in texts(QUERIES, seed)] for seed in (99, 100))
    t0 = time.perf_counter()
    repo.search(first_ones[0], k=10, mode="semantic")
    out: dict[str, object] = {"mapped": time.perf_counter() - t0}
    # A fresh handle first reads the index's names one by one, then the whole map once it
    # has read about as many as the map has pages: the first searches are timed apart.
    for name, prefix in NAMESPACES.items():
        out["cold " + name] = statistics.median(timed(repo, first_ones, prefix))
    for name, prefix in NAMESPACES.items():
        out[name] = statistics.median(timed(repo, short, prefix))
    for name, prefix in NAMESPACES.items():  # the lexical part of those, alone
        out["lexical " + name] = statistics.median(timed(repo, short, prefix, "lexical"))
    semantic = {
        name: [repo.search(q, k=10, mode="semantic", prefix=p) for q in short]
        for name, p in NAMESPACES.items()
    }
    out["memory"] = {key: status(key) for key in ("VmHWM", "RssAnon", "RssFile")}
    out["names"] = names_memory(repo)
    out["lexical side by side"] = lexical_side_by_side(repo, short)
    found = 0
    for k in range(NEEDLES):
        hits = repo.search(needle_question(k), k=10, mode="semantic")
        found += f"n/{k}" in {h.id for h in hits}
    out["needles"] = found / NEEDLES
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
        # The planted match is exact search's best for its question: that is what "unique" means here.
        out["needles exact"] = (
            sum(
                repo.search(needle_question(k), k=1, mode="semantic")[0].id == f"n/{k}"
                for k in range(NEEDLES)
            )
            / NEEDLES
        )
    finally:
        repo.config("recall.approximate_from", threshold)
    repo.close()
    print(json.dumps(out))


def catch_up_child(path: str) -> None:
    """In a fresh process: the first search after new memories (index, embed, link, save)."""
    repo = Repo.open(path)
    repo.use_embedder(Synthetic())
    t0 = time.perf_counter()
    repo.search("catch up now", k=10)
    elapsed = time.perf_counter() - t0
    repo.close()
    print(json.dumps({"catch_up": elapsed}))


def lexical_side_by_side(repo: Repo, queries: list[str]) -> dict[str, list[float]]:
    """The lexical ranking skipping segments and reading every one, side by side, blocks taking turns.

    Per namespace: median ms skipping, median ms reading every segment, and the
    segments each read per query, for the 50 candidates a hybrid top 10 asks of
    it; the answers must be the same.
    """
    cache = VectorCache()
    found: dict[str, list[float]] = {}
    with repo.kv.read() as txn:
        view = View(Stores(DEFAULT_SCOPE), txn)
        root = view.commit(bytes.fromhex(repo.resolve("HEAD").id)).tree
        postings = Postings(DEFAULT_SCOPE)
        names = cache.names(txn, postings)
        for name, prefix in NAMESPACES.items():
            # As a search screens a batch of candidates for the namespace (see names.py).
            screen = (lambda docs, p=prefix: names.under(docs, p)) if prefix else None
            times: dict[bool, list[float]] = {True: [], False: []}
            counts = {True: Blocks(), False: Blocks()}
            answers: dict[bool, list[object]] = {True: [], False: []}
            for skip in (True, False, False, True):
                for query in queries:
                    accept = acceptor(view, Filters(root=root, now=datetime.now(UTC), prefix=prefix), {})
                    t0 = time.perf_counter()
                    hits = lexical(
                        view,
                        postings,
                        query,
                        accept,
                        50,
                        names.number,
                        skip=skip,
                        blocks=counts[skip],
                        screen=screen,
                    )
                    times[skip].append(time.perf_counter() - t0)
                    answers[skip].append(hits)
            assert answers[True] == answers[False], "the skipping ranking answered otherwise"
            runs = 2 * len(queries)
            found[name] = [
                statistics.median(times[True]) * 1e3,
                statistics.median(times[False]) * 1e3,
                counts[True].read / runs,
                counts[False].read / runs,
            ]
    return found


def names_memory(repo: Repo) -> list[float]:
    """A handle's memory of names, both maps read whole (as a searching handle does): MB held, MB at
    the peak of reading them, seconds (tracemalloc sees numpy's buffers too)."""
    with repo.kv.read() as txn:
        tracemalloc.start()
        t0 = time.perf_counter()
        arrays = Arrays(txn, Postings(DEFAULT_SCOPE))
        took = time.perf_counter() - t0
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert arrays.count > 0
    return [held / 1e6, peak / 1e6, took]


def timed(repo: Repo, queries: list[str], prefix: str | None, mode: SearchMode = "hybrid") -> list[float]:
    """Seconds each top-10 search of ``queries`` took (hybrid unless told)."""
    times = []
    for query in queries:
        t0 = time.perf_counter()
        hits = repo.search(query, k=10, prefix=prefix, mode=mode)
        times.append(time.perf_counter() - t0)
        assert len(hits) == 10 or mode == "lexical"  # few memories of a namespace may share a word
    return times


def status(key: str) -> float:
    """A line of /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _env() -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]),
        MNEMO_EMBEDDER=Synthetic.model_id,
    )


def _in_child(*args: str) -> dict[str, Any]:
    output = subprocess.check_output([sys.executable, str(Path(__file__).resolve()), *args], env=_env())
    found: dict[str, Any] = json.loads(output.decode().strip().splitlines()[-1])
    return found


def fresh_cli(paths: dict[int, Path], command: list[str], runs: int = CLI_RUNS) -> dict[int, list[float]]:
    """Wall seconds of ``mnemo COMMAND`` as a whole process per size, the sizes taking turns."""
    times: dict[int, list[float]] = {n: [] for n in paths}
    sizes = sorted(paths)
    for r in range(runs):
        for n in sizes if r % 2 == 0 else sizes[::-1]:
            args = [sys.executable, str(HERE / "synthetic_mnemo.py"), "--repo", str(paths[n]), *command]
            t0 = time.perf_counter()
            subprocess.run(args, env=_env(), check=True, stdout=subprocess.DEVNULL)
            times[n].append(time.perf_counter() - t0)
    return times


def add_memories(path: Path, n: int) -> None:
    """Commit :data:`ADDED` new memories (sync off), without searching."""
    body = texts(ADDED, seed=n + 1)
    with Repo.open(path, sync=False) as repo:
        repo.commit([Node(id=f"added/{i}", content=body[i]) for i in range(ADDED)], message="more")


def bench_recall(root: Path, sizes: list[int]) -> list[Row]:
    """Hybrid search, recall@10, index build, fresh ``mnemo`` processes and memory at each size."""
    start = len(ROWS)
    results: dict[int, dict[str, Any]] = {}
    paths = {n: root / f"recall-{n}" for n in sizes}
    rates: dict[int, float] = {}
    for n in sizes:
        imported, embedded = build(paths[n], n)
        rates[n] = n / embedded
        row("recall store: bulk import, sync off (nodes/s)", n, f"{n / imported:,.0f}")
        row("recall store: reindex_recall(vectors=True), synthetic (vectors/s)", n, f"{rates[n]:,.0f}")
        results[n] = _in_child("--build-child", str(paths[n]))
        results[n].update(_in_child("--child", str(paths[n])))
    lo, hi = min(sizes), max(sizes)
    if hi != lo:
        ratio = rates[hi] / rates[lo]
        row(
            f"recall store: reindex_recall(vectors=True) rate, n={hi} / n={lo}",
            f"{hi}/{lo}",
            f"{ratio:.2f}",
            ">= 0.8",
            ratio >= 0.8,
        )
    question = " ".join(texts(1, seed=7)[0].split()[:4])
    searches = fresh_cli(paths, ["search", question, "-k", "10"])
    contexts = fresh_cli(paths, ["context", question, "-k", "10"])
    for n in sizes:
        add_memories(paths[n], n)
        results[n].update(_in_child("--catch-up", str(paths[n])))
    after = fresh_cli(paths, ["search", question, "-k", "10"], runs=3)
    for n in sizes:
        _rows(n, results[n], searches[n], contexts[n], after[n])
    return ROWS[start:]


def _rows(
    n: int, got: dict[str, Any], searches: list[float], contexts: list[float], after: list[float]
) -> None:
    approximate = n >= THRESHOLD[0]
    how = "approximate index" if approximate else "exact"
    first = float(got["first"])
    built = got["build memory"]
    if approximate:
        rate = n / first
        row(
            "approximate index build and save: first search, fresh process (vectors/s)",
            n,
            f"{rate:,.0f} in {first:.1f} s",
            ">= 20,000",
            rate >= 20_000,
        )
        peak = float(built["VmHWM"])
        row(
            "that building process: peak RSS (VmHWM), private memory (RssAnon) after (MiB)",
            n,
            f"{peak:,.0f}, {built['RssAnon']:,.0f}",
            "<= 1,536 (peak)",
            peak <= 1536,
        )
        row(
            "first semantic search of the next fresh process: saved index mapped, caught up (s)",
            n,
            f"{float(got['mapped']):.2f}",
        )
    else:
        row("first semantic search of a fresh process, exact (s)", n, f"{first:.2f}")
    # Below the threshold a process reads every vector to rank exactly: the target is the
    # approximate index's (saved, mapped).
    for label, times in (("search", searches), ("context", contexts)):
        ms = statistics.median(times) * 1e3
        row(
            f"fresh process: mnemo {label} (hybrid, top 10), whole process, {how}, median of {len(times)} (ms)",
            n,
            f"{ms:,.0f}",
            "<= 1000" if approximate else "",
            ms <= 1000 if approximate else None,
        )
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
        # The lexical ranking alone (segment summaries let it skip what cannot matter: ADR 37).
        row(
            f"lexical top-10 alone, {label}, the same {QUERIES}, median (ms)",
            n,
            f"{float(got['lexical ' + name]) * 1e3:.1f}",
        )
        skipping, every, read, all_read = got["lexical side by side"][name]
        row(
            f"lexical top 50 (hybrid's share), {label}: skipping vs reading every segment, "
            f"taking turns (ms, ratio; segments read a query)",
            n,
            f"{skipping:.1f} vs {every:.1f} ({every / skipping:.1f}x); {read:,.0f} vs {all_read:,.0f}",
        )
    memory = got["memory"]
    peak = float(memory["VmHWM"])
    row(
        "searching process (saved index mapped past the threshold): peak RSS (VmHWM) (MiB)",
        n,
        f"{peak:,.0f}",
    )
    private = float(memory["RssAnon"])
    row(
        "searching process: private memory (RssAnon) after (MiB)",
        n,
        f"{private:,.0f}",
        "<= 1024" if approximate else "",
        private <= 1024 if approximate else None,
    )
    row("searching process: store pages mapped (RssFile) after (MiB)", n, f"{memory['RssFile']:,.0f}")
    held, peak, took = got["names"]
    row(
        "memory of names: both maps read whole into arrays, held (MB; peak while reading, seconds)",
        n,
        f"{held:,.1f} ({peak:,.0f} peak, {took:.1f} s)",
        "<= 100" if approximate else "",
        held <= 100 if approximate else None,
    )
    for name, value in got["recall"].items():
        label = "no filter" if name == "none" else f"namespace passing {name}"
        row(
            f"recall@10 of the semantic ranking vs exact, clustered questions, {label}",
            n,
            f"{value:.3f}",
            ">= 0.95" if approximate else "",
            value >= 0.95 if approximate else None,
        )
    needles = float(got["needles"])
    row(
        f"planted unique matches in the semantic top 10 ({NEEDLES} questions; exact's best for "
        f"{float(got['needles exact']):.0%} of them)",
        n,
        f"{needles:.3f}",
        ">= 0.99" if approximate else "",
        needles >= 0.99 if approximate else None,
    )
    caught = float(got["catch_up"])
    row(
        f"first search of a fresh process after {ADDED:,} new memories: index, embed, link, save (s)",
        n,
        f"{caught:.1f} ({ADDED / caught:,.0f} memories/s)",
    )
    ms = statistics.median(after) * 1e3
    row(
        f"fresh process: mnemo search after those {ADDED:,}, whole process, median of {len(after)} (ms)",
        n,
        f"{ms:,.0f}",
        "<= 1000" if approximate else "",
        ms <= 1000 if approximate else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--quick", action="store_true", help="10k exact beside 50k approximate")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--build-child", help=argparse.SUPPRESS)
    parser.add_argument("--catch-up", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, THRESHOLD[0] = "10000,50000", 20_000
    if args.child:
        child(args.child)
        return
    if args.build_child:
        build_child(args.build_child)
        return
    if args.catch_up:
        catch_up_child(args.catch_up)
        return
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-recall-"))
    try:
        bench_recall(root, [int(s) for s in args.sizes.split(",")])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
