"""bench-large's claim rows: ``forget`` of one claim among 20,000, ``search(valid_at=)`` among 10,000.

Stores of their own, built here; the sizes ``bench/large.py`` measures do not
change them (see :func:`bench_claims`).
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
from harness import ROWS, Row, median_us, row

from mnemosyne import Claim, Node, Repo

CLAIMS_FORGET = 20_000
"""Claims in the store ``forget`` of one claim is timed on, written 100 to a commit."""
CLAIMS_SEARCH = 10_000
"""Claims in the store ``search(valid_at=)`` is timed on: timelines of 10 versions."""


def bench_claims(root: Path, sizes: list[int]) -> list[Row]:
    """forget of one claim at 20,000 claims, search(valid_at=) at 10,000 (stores of their own).

    ``forget`` updates the claim tree of each commit whose snapshot held the claim:
    timed for a claim of the last commit (held by one) and of the first (held by
    all 200), beside ``reindex``, the rebuild from every commit forget ran before.
    A valid-time search is timed beside the same search unfiltered.
    """
    start = len(ROWS)
    day0 = datetime(2020, 1, 1, tzinfo=UTC)
    path = root / "claims-forget"
    per_commit = 100
    commits = CLAIMS_FORGET // per_commit

    def claim(i: int) -> Node:
        return Node(
            id=f"people/p{i // 10:05d}/attr{i % 10}",
            kind="claim",
            content=Claim(
                f"person{i // 10:05d}", f"attr{i % 10}", f"value {i}", day0 + timedelta(days=i % 7)
            ),
        )

    with Repo.init(path, sync=False) as repo:
        for c in range(commits):
            repo.commit([claim(i) for i in range(c * per_commit, (c + 1) * per_commit)], message=f"c{c}")
        repo.commit([Node(id="warm-up", content="erasure loads its modules")], message="warm-up")
    samples: dict[str, list[float]] = {"last": [], "first": [], "reindex": []}
    runs = 5
    with Repo.open(path) as repo:  # durable, as a user's store
        repo.forget("warm-up", "bench")
        for r in range(runs):
            for kind in ("last", "first", "reindex") if r % 2 == 0 else ("reindex", "first", "last"):
                t0 = time.perf_counter()
                if kind == "reindex":
                    repo.reindex()
                else:
                    i = r if kind == "first" else CLAIMS_FORGET - 1 - r
                    repo.forget(claim(i).id, "bench")
                samples[kind].append(time.perf_counter() - t0)
        assert repo.fsck().ok
        # The first commit's claims erased above, committed again byte for byte: each goes back
        # in the claim tree of every commit that held it (all of them), beside a commit of a
        # claim never erased, in turns.
        for r in range(runs):
            for kind in ("again", "plain") if r % 2 == 0 else ("plain", "again"):
                node = claim(r) if kind == "again" else claim(runs + r)
                t0 = time.perf_counter()
                repo.commit([node if kind == "again" else msgspec.structs.replace(node, id=f"new/{r}")])
                samples.setdefault(kind, []).append(time.perf_counter() - t0)
        assert repo.fsck().ok
    median = {kind: statistics.median(found) * 1000 for kind, found in samples.items()}
    for kind, held in (("last", "the newest commit's"), ("first", f"the first commit's, in all {commits}")):
        row(
            f"forget of one claim ({held}), {commits} commits, median of {runs} (ms)",
            CLAIMS_FORGET,
            f"{median[kind]:.1f}",
            "<= 50",
            median[kind] <= 50,
        )
    row(
        f"reindex, the rebuild forget of a claim ran before, median of {runs} (ms)",
        CLAIMS_FORGET,
        f"{median['reindex']:.0f} ({median['reindex'] / median['first']:.0f}x the forget above)",
    )
    row(
        f"commit of an erased claim again (held by all {commits} commits), median of {runs} (ms)",
        CLAIMS_FORGET,
        f"{median['again']:.1f} (a new claim's: {median['plain']:.1f}; reindex: "
        f"{median['reindex'] / median['again']:.0f}x)",
    )
    shutil.rmtree(path)

    path = root / "claims-search"
    versions = 10
    people = CLAIMS_SEARCH // versions // 10
    with Repo.init(path, sync=False) as repo:
        nodes = [
            Node(
                id=f"people/p{a // 10:04d}/attr{a % 10}/v{v:02d}",
                kind="claim",
                content=Claim(
                    f"person{a // 10:04d}",
                    f"attribute{a % 10}",
                    f"city {(a + v) % 50}",
                    day0 + timedelta(days=30 * v),
                ),
            )
            for v in range(versions)
            for a in range(people * 10)
        ]
        for c in range(0, len(nodes), 500):
            repo.commit(nodes[c : c + 500], message=f"c{c}")
        repo.search("warm up")  # the recall index catches up with the commits
        rng = random.Random(24)
        questions = [
            (
                f"person{rng.randrange(people):04d} attribute{rng.randrange(10)}",
                day0 + timedelta(days=rng.randrange(30 * versions)),
            )
            for _ in range(200)
        ]
        filtered: list[float] = []
        plain: list[float] = []
        for q, (text, when) in enumerate(questions):  # the two take turns
            for which in (0, 1) if q % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                if which == 0:
                    hits = repo.search(text, k=10, valid_at=when)
                    filtered.append(time.perf_counter() - t0)
                    assert hits and all(h.node.content.valid_from <= when for h in hits)
                else:
                    repo.search(text, k=10)
                    plain.append(time.perf_counter() - t0)
    ms = median_us(filtered) / 1000
    row(
        f"search(valid_at=), k=10, timelines of {versions} versions, median (ms)",
        CLAIMS_SEARCH,
        f"{ms:.1f}",
        "<= 20",
        ms <= 20,
    )
    row(
        "search, k=10, the same questions without valid_at, median (ms)",
        CLAIMS_SEARCH,
        f"{median_us(plain) / 1000:.1f} (valid_at: {median_us(filtered) / median_us(plain):.1f}x)",
    )
    shutil.rmtree(path)
    return ROWS[start:]
