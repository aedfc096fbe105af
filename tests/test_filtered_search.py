"""Searches filtered to a namespace answer as an exhaustive reference does.

A namespace filter is applied early (a batch of candidates screened by id
prefix before any is looked up, the candidate lists of several words merged
before scoring); whatever shortcut it takes, the answer must be the filtered
set's exact top k: for the lexical and semantic rankings, the unfiltered
ranking of every memory with the others left out afterwards; for hybrid, those
two fused by scaled score, with neighbours. The approximate index is forced (every store is
past ``recall.approximate_from``), the names are read whole at the first lookup
(so the vectorised screens run), a namespace is never scored whole (so the
approximate walk screens its candidates), and postings segments are tiny (so the
lexical ranking skips and merges over many).
"""

from __future__ import annotations

import hashlib
import itertools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.name_arrays import no_arrays
from support.tiers import examples

from mnemosyne import Node, Repo
from mnemosyne.recall import names, postings, ranker, semantic
from mnemosyne.recall.fusion import Scaled
from mnemosyne.recall.names import NameMemory
from mnemosyne.recall.postings import Postings

SCOPE = bytes(4)  # the default tenant's key scope
DIM = 16
WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "frost", "quill"]
# Skewed, as real text: a few words are in most memories.
DRAWN = ["apple"] * 6 + ["river"] * 4 + ["stone"] * 2 + WORDS
IDS = [f"{top}/{sub}{n}" for top in ("a", "b", "é") for sub in ("", "x/", "xy/") for n in range(4)]
PREFIXES = ["a/", "b/", "a/x/", "a/xy/", "é/", "é/x", "b/xy/3", "b/xy/30", "z/"]


class Words:
    """Each word a fixed direction; a text, the sum of its words' (so rankings have ties and near-ties)."""

    model_id = "words-16"
    dim = DIM

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                out[row] += np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        return out


@contextmanager
def forced() -> Iterator[None]:
    """Names read whole at once, namespaces found through the walk, segments of two documents."""
    before = names.PER_PAGE, semantic.NAMESPACE_WHOLE, postings.SEGMENT
    names.PER_PAGE, semantic.NAMESPACE_WHOLE, postings.SEGMENT = 10**9, 0, 2
    try:
        yield
    finally:
        names.PER_PAGE, semantic.NAMESPACE_WHOLE, postings.SEGMENT = before


def ranking(repo: Repo, query: str, k: int, prefix: str | None, mode: Any) -> list[tuple[str, str]]:
    """The versions a search ranks, in order."""
    return [(h.id, h.hash) for h in repo.search(query, k=k, prefix=prefix, mode=mode)]


def scored(repo: Repo, query: str, prefix: str, mode: Any) -> list[tuple[str, str, float]]:
    """Every version one ranking gives, with its score, those outside ``prefix`` left out afterwards."""
    return [(h.id, h.hash, h.score) for h in repo.search(query, k=1000, mode=mode) if h.id.startswith(prefix)]


def reference_hybrid(
    repo: Repo,
    query: str,
    lexical: list[tuple[str, str, float]],
    semantic_: list[tuple[str, str, float]],
    k: int,
) -> list[tuple[str, str, float, int | None, int | None]]:
    """Two filtered rankings, each cut to the depth a search walks, scaled, then weighed by the ranker.

    Lexical scores scaled by the best, cosines between the deepest and the best (a span
    of 0.1 at least); equal shares. The ranker's features of a candidate depend on the
    other candidates (its neighbours, its session), so the filtered search must hand it
    exactly these.
    """
    depth = max(4 * k, 50)
    lexical, semantic_ = lexical[:depth], semantic_[:depth]
    entries: dict[str, list[Any]] = {}
    if lexical:
        best = max(s for _, _, s in lexical) or 1.0
        for rank, (node_id, node_hash, score) in enumerate(lexical, 1):
            entry = entries.setdefault(node_hash, [node_id, 0.0, 0.0, None, None])
            entry[1], entry[3] = score / best, rank
    if semantic_:
        top, floor = max(s for _, _, s in semantic_), min(s for _, _, s in semantic_)
        for rank, (node_id, node_hash, score) in enumerate(semantic_, 1):
            entry = entries.setdefault(node_hash, [node_id, 0.0, 0.0, None, None])
            entry[2], entry[4] = 1.0 - (top - score) / max(top - floor, 0.1), rank
    share = 0.5 if lexical and semantic_ else 1.0
    candidates = [
        Scaled(bytes.fromhex(h), e[0], e[1], e[2], e[3], e[4], share * e[1] + share * e[2])
        for h, e in entries.items()
    ]
    nodes = {bytes.fromhex(h): repo.get(e[0]) for h, e in entries.items()}
    order = ranker.rank(candidates, depth, nodes.get, query, k)
    return [(f.id, f.oid.hex(), f.score, f.lexical_rank, f.semantic_rank) for f in order]


NEAR = 1e-5
"""Cosines of a namespace scored directly and of the whole ranking differ in float32's last
bits (the batch's shape), and scaling by a small span magnifies that: fused scores closer
than this may come in either order, and either may be the k-th."""


def same_as_reference(hybrid: list[Any], reference: list[Any], k: int, case: object) -> None:
    """``hybrid`` (the top k) is the reference's top k, near-ties aside."""
    by_hash = {r[1]: r for r in reference}
    assert len(hybrid) == min(k, len(reference)), case
    for got in hybrid:
        want = by_hash[got[1]]
        assert (got[0], got[3], got[4]) == (want[0], want[3], want[4]), case
        assert got[2] == pytest.approx(want[2], rel=1e-6, abs=NEAR), case
    scores = [want[2] for want in (by_hash[got[1]] for got in hybrid)]
    assert all(a >= b - NEAR for a, b in itertools.pairwise(scores)), case
    if len(reference) > k:
        kth = reference[k - 1][2]
        must = {r[1] for r in reference[:k] if r[2] > kth + NEAR}
        may = {r[1] for r in reference if r[2] >= kth - NEAR}
        assert must <= {h[1] for h in hybrid} <= may, case


def cosines(query: str, texts: dict[str, str]) -> dict[str, float]:
    """Each id's cosine with ``query`` under :class:`Words`, in float64."""
    vectors = Words()([query, *texts.values()]).astype(np.float64)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return {node_id: float(unit[0] @ row) for node_id, row in zip(texts, unit[1:], strict=True)}


def near_ties(ranked: list[tuple[str, str]], near: dict[str, float]) -> bool:
    """Whether two hits of ``ranked`` score alike to 1e-5 though their texts differ."""
    scores = sorted(round(near[node_id], 5) for node_id, _ in ranked)
    return any(a == b for a, b in itertools.pairwise(scores))


memories = st.lists(
    st.tuples(st.sampled_from(IDS), st.lists(st.sampled_from(DRAWN), min_size=1, max_size=5).map(" ".join)),
    min_size=1,
    max_size=30,
)
questions = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*WORDS, "zebra"]), min_size=1, max_size=4).map(" ".join),
        st.integers(1, 8),
        st.sampled_from(PREFIXES),
    ),
    min_size=1,
    max_size=3,
)


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=memories, deleted=st.lists(st.sampled_from(IDS), max_size=3), asked=questions)
def test_a_namespace_filter_answers_as_the_unfiltered_ranking_filtered_afterwards(
    written: list[tuple[str, str]], deleted: list[str], asked: list[tuple[str, int, str]]
) -> None:
    with forced():
        repo = Repo.in_memory(embedder=Words())  # type: ignore[arg-type]
        repo.config("recall.approximate_from", "1")
        repo.commit([Node(id=node_id, content=text) for node_id, text in dict(written).items()])
        gone = sorted(set(deleted) & set(dict(written)))
        if gone:
            repo.commit(delete=gone)
        for query, k, prefix in asked:
            whole = {
                mode: [hit for hit in ranking(repo, query, 1000, None, mode) if hit[0].startswith(prefix)]
                for mode in ("lexical", "semantic")
            }
            assert ranking(repo, query, k, prefix, "lexical") == whole["lexical"][:k], (query, k, prefix)
            semantic_ = ranking(repo, query, k, prefix, "semantic")
            near = cosines(query, dict(written))
            if near_ties(whole["semantic"], near):
                # Texts whose vectors are multiples of each other (``apple``, ``apple apple``) score
                # equal but for float32's last bit, and which comes first may differ with the shape
                # of the batch the scores were computed in: compare by score, not by place.
                event("semantic near-ties")
                assert [round(near[h[0]], 5) for h in semantic_] == [
                    round(near[h[0]], 5) for h in whole["semantic"][:k]
                ], (query, k, prefix)
                assert set(semantic_) <= set(whole["semantic"]), (query, k, prefix)
                continue
            assert semantic_ == whole["semantic"][:k], (query, k, prefix)
            hybrid = [
                (h.id, h.hash, h.score, h.lexical_rank, h.semantic_rank)
                for h in repo.search(query, k=k, prefix=prefix, mode="hybrid")
            ]
            reference = reference_hybrid(
                repo,
                query,
                scored(repo, query, prefix, "lexical"),
                scored(repo, query, prefix, "semantic"),
                k,
            )
            same_as_reference(hybrid, reference, k, (query, k, prefix))


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
@given(
    written=st.lists(st.sampled_from(IDS), min_size=1, max_size=20, unique=True),
    prefix=st.sampled_from(PREFIXES),
)
def test_the_namespace_screen_flags_exactly_the_documents_under_the_prefix(
    written: list[str], prefix: str
) -> None:
    # The maps are read whole at the first lookup, so the screen answers from its arrays.
    repo = Repo.in_memory()
    repo.config("embedder", "none")
    repo.commit([Node(id=node_id, content=f"apple {node_id}") for node_id in written])
    repo.search("apple", k=1, mode="lexical")  # indexes what was committed
    index = Postings(SCOPE)
    with forced(), repo.kv.read() as txn:
        memory = NameMemory()
        lookups = memory.names(txn, index)
        first = lookups.number(0)
        assert first is not None  # read from the store: the maps are now held whole
        lookups = memory.names(txn, index)
        docs = np.arange(-1, len(written) + 2, dtype=np.int64)
        found = [lookups.number(int(doc)) if doc >= 0 else None for doc in docs.tolist()]
        screened = lookups.under(docs, prefix)
    for flag, version in zip(screened.tolist(), found, strict=True):
        # Unknown documents may be under it (True); known ones are flagged by their id exactly.
        assert flag == (version is None or version[1].startswith(prefix)), (version, prefix)


@pytest.mark.slow
@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), asked=questions)
def test_a_walk_over_many_candidates_screened_at_once_answers_as_one_that_screens_none(
    seed: int, asked: list[tuple[str, int, str]]
) -> None:
    # Enough memories (distinct texts) that the approximate walk judges its candidates in
    # several batches and, most being turned away, screens the rest before judging them.
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as scratch, forced():
        path = Path(scratch) / "store"
        with Repo.init(path, embedder=Words(), sync=False) as repo:  # type: ignore[arg-type]
            repo.config("recall.approximate_from", "1")
            words = rng.choice(DRAWN, size=(240, 2))
            repo.commit(
                [
                    Node(id=f"{IDS[int(rng.integers(len(IDS)))]}/{n}", content=f"{a} {b} item{n}")
                    for n, (a, b) in enumerate(words.tolist())
                ]
            )
            repo.search("apple", k=1)  # indexes, embeds and links them
        answers: list[list[object]] = []
        for context in (no_arrays, forced):
            with context(), Repo.open(path, embedder=Words()) as repo:  # type: ignore[arg-type]
                answers.append(
                    [
                        [
                            (h.id, h.hash, h.score, h.lexical_rank, h.semantic_rank)
                            for h in repo.search(query, k=k, prefix=prefix, mode=mode)
                        ]
                        for query, k, prefix in asked * 2  # the second time, from the arrays
                        for mode in ("lexical", "semantic", "hybrid")
                    ]
                )
        assert answers[0] == answers[1]
