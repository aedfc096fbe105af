"""Lexical ranking that skips: the same answer as reading every postings segment, from fewer reads.

The skipping ranking (block-max MaxScore over segment summaries) must return
exactly what the exhaustive one returns: the same versions, the same scores to
the bit, in the same order (equal scores by node hash), whatever the corpus,
the query, the limit, the namespace, and whatever was deleted, erased or is
still queued. Segments are made tiny so that small corpora spread over many.
Each word's summaries must stay those of its segments, erasure included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne import Node, Repo
from mnemosyne.index.view import Stores, View
from mnemosyne.recall import postings
from mnemosyne.recall.bm25 import Blocks, lexical
from mnemosyne.recall.postings import Postings
from mnemosyne.recall.search import Filters, acceptor
from mnemosyne.store.kv.base import Space

SCOPE = b"\x00\x00\x00\x00"  # the default tenant's key scope
# Skewed: "common" is drawn far more often than the rare words, as in real text.
DRAWN = ["common"] * 8 + ["often"] * 4 + ["middle"] * 2 + ["rare", "zeta", "quill"]
WORDS = sorted(set(DRAWN))
IDS = ["a/1", "a/2", "a/3", "a/b/1", "a/b/2", "b/1", "b/2", "b/3", "c/1", "c/2", "c/3", "c/4"]
PREFIXES = [None, "a/", "b/", "a/b/", "c/"]
LATER = datetime(2030, 1, 1, tzinfo=UTC)
"""When the rankings are asked (nothing expires)."""


class Clock:
    """One second per reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@contextmanager
def segments_of(size: int) -> Iterator[None]:
    """Postings segments of ``size`` documents (the default is far more than a test writes)."""
    before = postings.SEGMENT
    postings.SEGMENT = size
    try:
        yield
    finally:
        postings.SEGMENT = before


def ranked(
    repo: Repo, query: str, limit: int, prefix: str | None, skip: bool, blocks: Blocks | None = None
) -> list[tuple[bytes, str, float]]:
    """The lexical ranking at HEAD, skipping or reading every segment."""
    with repo.kv.read() as txn:
        view = View(Stores(SCOPE), txn)
        root = view.commit(bytes.fromhex(repo.resolve("HEAD").id)).tree
        accept = acceptor(view, Filters(root=root, now=LATER, prefix=prefix), {})
        return lexical(view, Postings(SCOPE), query, accept, limit, skip=skip, blocks=blocks)


def summaries_match_segments(repo: Repo) -> None:
    """Every word's summary is that of its segments, row for row; no summary without a segment."""
    expected: dict[bytes, list[tuple[int, int, int, int]]] = {}
    found: dict[bytes, list[tuple[int, int, int, int]]] = {}
    with repo.kv.read() as txn:
        for key, value in txn.scan(Space.RECALL, SCOPE + b"t"):
            word, segment = key[len(SCOPE) + 1 : -5], key[-4:]  # word 00 segment (u32)
            rows = np.frombuffer(value, dtype="<u4").reshape(-1, 3)
            summary = (
                int.from_bytes(segment, "big"),
                len(rows),
                int(rows[:, 1].max()),
                int(rows[:, 2].min()),
            )
            expected.setdefault(word, []).append(summary)
        for key, value in txn.scan(Space.RECALL, SCOPE + b"s"):
            table = np.frombuffer(value, dtype="<u4").reshape(-1, 4)
            found[key[len(SCOPE) + 1 : -1]] = [tuple(int(x) for x in row) for row in table]  # type: ignore[misc]
    assert found == expected


def drop_summaries(repo: Repo) -> None:
    """Make the index look like layout 3's: postings without segment summaries."""

    def drop(txn) -> None:  # type: ignore[no-untyped-def]
        for key in [key for key, _ in txn.scan(Space.RECALL, SCOPE + b"s")]:
            txn.delete(Space.RECALL, key)

    repo.kv.transact(drop)


texts = st.lists(st.sampled_from(DRAWN), min_size=1, max_size=7).map(" ".join)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(st.tuples(st.sampled_from(IDS), texts), min_size=1, max_size=8)),
        st.tuples(st.just("delete"), st.sampled_from(IDS)),
        st.tuples(st.just("forget"), st.sampled_from(IDS)),
        st.tuples(st.just("search"), st.none()),
    ),
    min_size=1,
    max_size=10,
)
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*WORDS, "a", "b", "c", "zebra"]), min_size=1, max_size=4).map(" ".join),
        st.integers(1, 9),
        st.sampled_from(PREFIXES),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, asked=queries, size=st.sampled_from([1, 2, 3, 5]), layout3=st.booleans())
def test_the_skipping_ranking_returns_what_the_exhaustive_one_returns(
    steps: list[tuple[str, object]], asked: list[tuple[str, int, str | None]], size: int, layout3: bool
) -> None:
    with segments_of(size):
        repo = Repo.in_memory(clock=Clock())
        repo.config("embedder", "none")
        repo.commit([Node(id="c/9", content="common often")])
        for op, arg in steps:
            current = {node.id for node in repo.nodes()}
            if op == "put":
                batch = dict(arg)  # type: ignore[call-overload]  # one version per id a commit
                repo.commit([Node(id=i, content=text) for i, text in batch.items()])
            elif op == "delete" and arg in current:
                repo.commit(delete=[str(arg)])
            elif op == "forget" and arg in current:
                repo.forget(str(arg), reason="asked")
            elif op == "search":
                repo.search("common", mode="lexical")  # catches up: later puts stay queued
        summaries_match_segments(repo)
        if layout3:
            drop_summaries(repo)
        for query, limit, prefix in asked:
            skipping = ranked(repo, query, limit, prefix, skip=True)
            assert skipping == ranked(repo, query, limit, prefix, skip=False), (query, limit, prefix)


def test_a_query_reads_fewer_segments_than_the_exhaustive_ranking_on_a_skewed_corpus() -> None:
    with segments_of(16):
        repo = Repo.in_memory(clock=Clock())
        repo.config("embedder", "none")
        # "common" is in every memory; "zeta" in a few of the first segment's alone.
        repo.commit(
            [
                Node(
                    id=f"m/{i:03d}",
                    content="common often" if i % 7 else "common zeta" if i < 14 else "common",
                )
                for i in range(400)
            ]
        )
        repo.search("warm", mode="lexical")  # catch up
        summaries_match_segments(repo)
        skipping, exhaustive = Blocks(), Blocks()
        found = ranked(repo, "zeta common", 2, None, skip=True, blocks=skipping)
        assert found == ranked(repo, "zeta common", 2, None, skip=False, blocks=exhaustive)
        assert sorted(node_id for _, node_id, _ in found) == ["m/000", "m/007"]  # equal: by node hash
        assert exhaustive.read == 26 and exhaustive.skipped == 0  # 25 segments of "common", 1 of "zeta"
        assert skipping.read == 2 and skipping.skipped == 24  # "zeta"'s and the one of "common" beside it


def test_erasure_leaves_no_summary_of_what_it_removed() -> None:
    with segments_of(4):
        repo = Repo.in_memory(clock=Clock())
        repo.config("embedder", "none")
        repo.commit([Node(id=f"n/{i}", content=f"plain words {i}") for i in range(6)])
        repo.commit([Node(id="secret", content="unguessable unguessable unguessable")])
        repo.search("plain", mode="lexical")
        repo.forget("secret", reason="asked")
        summaries_match_segments(repo)
        with repo.kv.read() as txn:
            keys = [key for key, _ in txn.scan(Space.RECALL, SCOPE)]
        assert not any(b"unguessable" in key or b"secret" in key for key in keys)
        assert ranked(repo, "unguessable", 5, None, skip=True) == []
