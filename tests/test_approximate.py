"""Semantic search through the approximate index (``recall.approximate_from``).

The index only proposes rows: what passes the filters is scored exactly, so
these tests compare it with exact search over the same vectors, and check that
what erasure, deletion or a new version took away never comes back.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.internals import vector_cache
from support.tiers import examples

from mnemosyne import InvalidInput, Node, Repo
from mnemosyne.recall.matrix import Matrix

DIM = 32


class Clustered:
    """Vectors near a few hundred centres, chosen by the number in a text ("item 17").

    Real embeddings cluster by topic; a uniform cloud in many dimensions has no
    near neighbours at all, which no index (and no user) meets.
    """

    model_id = "clustered-32"
    dim = DIM

    def __init__(self, centres: int = 200) -> None:
        rng = np.random.default_rng(7)
        self.centres = rng.standard_normal((centres, DIM)).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            number = int(text.rsplit(" ", 1)[-1])
            rng = np.random.default_rng(number)
            out[row] = self.centres[number % len(self.centres)] + 0.5 * rng.standard_normal(DIM)
        return out


def filled(count: int, approximate_from: str) -> Repo:
    repo = Repo.in_memory(embedder=Clustered())
    repo.config("recall.approximate_from", approximate_from)
    for start in range(0, count, 1000):
        repo.commit(
            put=[
                Node(id=f"{'a' if i % 10 else 'b'}/{i}", content=f"item {i}")
                for i in range(start, min(count, start + 1000))
            ]
        )
    return repo


def matrix_of(repo: Repo) -> Matrix:
    (found,) = vector_cache(repo).held()  # the handle's own vectors: what the search ranks
    return found


@pytest.mark.slow
def test_the_index_finds_nearly_every_exact_neighbour() -> None:
    repo = filled(6000, "1")
    queries = [f"item {n}" for n in range(100_000, 100_040)]
    approximate = [repo.search(q, k=10, mode="semantic") for q in queries]
    assert matrix_of(repo).approx is not None
    assert len(matrix_of(repo).approx) == 6000  # type: ignore[arg-type]
    repo.config("recall.approximate_from", "off")
    exact = [repo.search(q, k=10, mode="semantic") for q in queries]
    assert matrix_of(repo).approx is None
    found = sum(
        len({h.hash for h in a} & {h.hash for h in e}) for a, e in zip(approximate, exact, strict=True)
    )
    assert found / (10 * len(queries)) >= 0.9
    for a, e in zip(approximate, exact, strict=True):
        # Scores are exact: the hits both found come in the same order in both (a hit's
        # score is its rank's, so a hit the index missed moves those after it down).
        both = {h.hash for h in a} & {h.hash for h in e}
        assert [h.hash for h in a if h.hash in both] == [h.hash for h in e if h.hash in both]
        assert [h.score for h in a] == sorted((h.score for h in a), reverse=True)


def test_a_namespace_filter_stays_exact_in_what_it_passes() -> None:
    repo = filled(3000, "1")
    for prefix in ("b/", "a/"):  # 300 ids: scored whole; 2700: found through the index
        hits = repo.search("item 123456", k=10, mode="semantic", prefix=prefix)
        assert len(hits) == 10
        assert all(h.id.startswith(prefix) for h in hits)
    # The small namespace is scored whole: the same as exact search.
    small = repo.search("item 4242", k=10, mode="semantic", prefix="b/")
    repo.config("recall.approximate_from", "off")
    assert [h.hash for h in repo.search("item 4242", k=10, mode="semantic", prefix="b/")] == [
        h.hash for h in small
    ]


def test_a_filter_that_passes_almost_nothing_still_finds_what_passes() -> None:
    repo = filled(3000, "1")
    repo.commit(put=[Node(id="rare/1", content="item 99", meta={"tag": "rare"})])
    hits = repo.search("item 5", k=3, mode="semantic", meta={"tag": "rare"})
    assert [h.id for h in hits] == ["rare/1"]


def test_an_erased_vector_leaves_the_index_at_once() -> None:
    repo = filled(500, "1")
    target = repo.search("item 77", k=1, mode="semantic")[0]
    assert target.id == "a/77"
    size = len(matrix_of(repo).approx)  # type: ignore[arg-type]
    repo.forget("a/77", "asked to")
    hits = repo.search("item 77", k=50, mode="semantic")
    assert target.hash not in {h.hash for h in hits}
    assert len(matrix_of(repo).approx) == size - 1  # type: ignore[arg-type]
    # Put back with the same text: its vector comes back, under the new version.
    again = repo.commit(put=[Node(id="a/77", content="item 77")])
    assert again is not None
    best = repo.search("item 77", k=1, mode="semantic")[0]
    assert best.id == "a/77" and best.hash == repo.get("a/77").hash
    assert len(matrix_of(repo).approx) == size  # type: ignore[arg-type]


def test_crossing_the_threshold_switches_the_ranking_both_ways() -> None:
    repo = filled(100, "64")
    repo.search("item 1", k=1, mode="semantic")
    assert matrix_of(repo).approx is not None  # 4 blocks of 32: past 64
    repo.config("recall.approximate_from", "100000")
    repo.search("item 1", k=1, mode="semantic")
    assert matrix_of(repo).approx is None


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5", ""])
def test_a_threshold_that_means_nothing_is_refused(value: str) -> None:
    repo = Repo.in_memory()
    with pytest.raises(InvalidInput, match="approximate_from"):
        repo.config("recall.approximate_from", value)
    assert repo.config("recall.approximate_from") == "200000"


@settings(max_examples=examples(15), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["put", "delete", "forget"]), st.integers(0, 59)), min_size=1, max_size=30
    )
)
def test_what_went_away_never_comes_back(steps: list[tuple[str, int]]) -> None:
    """Deleted, superseded and erased versions are never returned by the approximate ranking."""
    repo = filled(200, "1")
    current = {node.id: node.hash for node in repo.nodes()}
    gone: set[str] = set()
    for turn, (action, n) in enumerate(steps):
        node_id = f"a/{n}" if n % 10 else f"b/{n}"
        if action == "put":
            if node_id in current:
                gone.add(current[node_id])
            node = Node(id=node_id, content=f"item {1000 + turn}")
            repo.commit(put=[node])
            current[node_id] = node.hash
        elif node_id in current and action == "delete":
            repo.commit(delete=[node_id])
            gone.add(current.pop(node_id))
        elif node_id in current:
            repo.forget(node_id, "asked to")
            gone.add(current.pop(node_id))
        hits = repo.search(f"item {1000 + turn}", k=30, mode="semantic")
        assert all(h.hash not in gone and current.get(h.id) == h.hash for h in hits)
    repo.close()
