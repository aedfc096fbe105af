"""Building the approximate index: whatever it costs, it must still find what exact search finds.

The build's constants (how wide a new row's link search is, how its nearest
neighbour is measured) trade build time for the graph's reach (at a
million 384-wide vectors, 64 candidates while linking gave recall@10 0.96, 32
gave 0.83). Whatever they are, a search through the index must find nearly
every exact neighbour of a clustered question and every planted unique match (a
vector far from all the others, which a graph walk rarely reaches): these tests
build an index the way a handle does (rows linked in batches) past
:data:`SCAN_BELOW`, so every search walks the graphs, and compare it with exact
search over the same vectors.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from mnemosyne.recall.approximate import SCAN_BELOW, Approximate

WIDTH = 48
ROWS = 24_000
PLANTED = 24
BATCH = 8192
"""Rows a handle links at once (as it reads vector blocks)."""


Vectors = npt.NDArray[np.float32]


def unit(vectors: Vectors) -> Vectors:
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def planted_among(
    vectors: Vectors, rng: np.random.Generator, width: int
) -> tuple[Vectors, npt.NDArray[np.intp]]:
    """``vectors`` with :data:`PLANTED` of them replaced by directions of their own, and which."""
    planted = rng.choice(len(vectors), PLANTED, replace=False).astype(np.intp)
    vectors[planted] = rng.standard_normal((PLANTED, width)).astype(np.float32)
    return unit(vectors), planted


def built(vectors: Vectors) -> Approximate:
    index = Approximate(vectors.shape[1])
    for start in range(0, len(vectors), BATCH):
        rows = np.arange(start, min(len(vectors), start + BATCH), dtype=np.intp)
        index.add(rows, vectors[rows])
    return index


def top(index: Approximate, vectors: Vectors, question: Vectors, k: int = 10) -> set[int]:
    """The best ``k`` rows as a search ranks them: the graphs' proposals, then the isolated rows, exactly."""
    proposed, complete = index.nearest(question, 64)
    assert not complete  # the graphs were walked, not every row scanned
    scores = np.sort(vectors[proposed] @ question)
    floor = float(scores[-k]) if len(scores) >= k else -1.0
    isolated, _ = index.isolated_above(question, floor - 1e-6)
    candidates = np.concatenate([proposed, isolated])
    ranked = candidates[np.argsort(-(vectors[candidates] @ question), kind="stable")]
    return {int(row) for row in ranked[:k]}


def found_planted(index: Approximate, vectors: Vectors, planted: npt.NDArray[np.intp], noise: float) -> None:
    rng = np.random.default_rng(9)
    width = vectors.shape[1]
    for row in planted.tolist():
        question = unit(vectors[row] + noise * rng.standard_normal(width).astype(np.float32))
        assert int(np.argmax(vectors @ question)) == row  # exact search's best, by far
        assert row in top(index, vectors, question), row


@pytest.mark.slow
def test_a_built_index_finds_nearly_every_exact_neighbour_and_the_planted_matches() -> None:
    """Clustered vectors (300 centres), as embeddings of text cluster by topic."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((300, WIDTH)).astype(np.float32)
    noise = 0.45 * rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
    vectors, planted = planted_among(centres[rng.integers(0, len(centres), ROWS)] + noise, rng, WIDTH)
    index = built(vectors)
    assert len(index) == ROWS > SCAN_BELOW
    questions = unit(
        centres[rng.integers(0, len(centres), 40)]
        + 0.45 * rng.standard_normal((40, WIDTH)).astype(np.float32)
    )
    found = 0
    for question in questions:
        exact = set(np.argsort(-(vectors @ question))[:10].tolist())
        found += len(exact & top(index, vectors, question))
    assert found / (10 * len(questions)) >= 0.95
    found_planted(index, vectors, planted, 0.3 / np.sqrt(WIDTH))


@pytest.mark.slow
def test_planted_matches_among_near_duplicates_are_found() -> None:
    """Near-duplicates leave a planted vector no links in: only the isolated rows' exact pass finds it."""
    rng = np.random.default_rng(5)
    width, rows = 16, 40_000
    near = rng.standard_normal(width).astype(np.float32) + 0.05 * rng.standard_normal((rows, width)).astype(
        np.float32
    )
    vectors, planted = planted_among(near, rng, width)
    index = built(vectors)
    assert len(index) == rows > SCAN_BELOW
    found_planted(index, vectors, planted, 0.02)
