"""One hybrid ranking from the lexical and the semantic ones, and from neighbouring memories.

Each ranking is read to a depth (its best accepted versions); a candidate's fused
score is a weighted sum of its two scores, each scaled to [0, 1] over the
candidates: BM25 by the best BM25 score, cosine between the deepest and the best
cosine read. Unlike reciprocal-rank fusion, a ranking that is sure (one candidate
far ahead) counts for more than one that is not, and a weak ranking's order among
near-equal candidates does not drag a strong one's down (ADR 44).

Then a memory gains from its neighbours: the memories written beside it in its
namespace, by the number its id ends in (``chat/s3/t7`` beside ``chat/s3/t6`` and
``chat/s3/t8``). A conversation's answer often sits in the turn after the question
that names the topic, or spreads over two turns; a candidate whose neighbour scores
well gains a share of that neighbour's score. Only candidates count as neighbours:
no memory outside the two rankings is read, and none is returned that the filters
did not accept.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

LEXICAL_WEIGHT = 0.5
"""The lexical ranking's share of a fused score (the semantic one has the rest)."""
NEIGHBOURS = 2
"""How far apart (in the number an id ends in) two memories still count as neighbours."""
NEIGHBOUR_WEIGHT = 0.5
"""The share of its best neighbour's score a candidate gains."""
MIN_SPAN = 0.1
"""The least cosine span scaled to [0, 1]: among a few candidates whose cosines all but tie
(a small store, a narrow filter), float noise must not stretch into a whole share."""

Ranked = list[tuple[bytes, str, float]]
"""``(node hash, node id, score)``, best first: what each ranking gives."""

_NUMBERED = re.compile(r"^(.*?)(\d{1,18})$", re.DOTALL)


class Fused(msgspec.Struct, frozen=True):
    """One candidate of a hybrid ranking, with where each ranking placed it (1-based, or None)."""

    oid: bytes
    id: str
    score: float
    lexical_rank: int | None
    semantic_rank: int | None


def numbered(node_id: str) -> tuple[str, int] | None:
    """The id's namespace-and-stem and the number it ends in, or None when it ends in none."""
    found = _NUMBERED.match(node_id)
    return (found.group(1), int(found.group(2))) if found is not None else None


def beside(node_id: str, step: int) -> list[str]:
    """The ids ``step`` places from ``node_id`` by the number it ends in, zero-padded as it is and not.

    ``t09`` for ``t10`` and ``t9``: which one a store holds depends on how its ids were
    padded. Empty when the id ends in no number or the number would be negative.
    """
    found = _NUMBERED.match(node_id)
    if found is None:
        return []
    digits = found.group(2)
    number = int(digits) + step
    if number < 0:
        return []
    padded = f"{found.group(1)}{number:0{len(digits)}d}"
    plain = f"{found.group(1)}{number}"
    return [padded] if padded == plain else [padded, plain]


def fuse(
    lexical: Ranked,
    semantic: Ranked,
    *,
    lexical_weight: float = LEXICAL_WEIGHT,
    neighbours: int = NEIGHBOURS,
    neighbour_weight: float = NEIGHBOUR_WEIGHT,
    lifted: Callable[[bytes], bool] | None = None,
    lift: float = 0.0,
) -> list[Fused]:
    """The candidates of both rankings, best first.

    Equal scores stay in the order the lexical, then the semantic ranking gave them.
    Candidates for which ``lifted(node hash)`` is true gain ``lift`` after their
    neighbours' share (a question that asks when lifts the memories that name a
    time, :mod:`mnemosyne.recall.timing`); ``lifted`` is asked of candidates only.

    A ranking that is empty gives no share: one ranking alone keeps its order
    (neighbours aside).
    """
    found: dict[bytes, _Candidate] = {}
    if lexical:
        best = max(score for _, _, score in lexical) or 1.0
        for rank, (oid, node_id, score) in enumerate(lexical, 1):
            entry = found.setdefault(oid, _Candidate(node_id))
            entry.lexical, entry.lexical_rank = score / best, rank
    if semantic:
        top = max(score for _, _, score in semantic)
        floor = min(score for _, _, score in semantic)
        span = max(top - floor, MIN_SPAN)
        for rank, (oid, node_id, score) in enumerate(semantic, 1):
            entry = found.setdefault(oid, _Candidate(node_id))
            entry.semantic, entry.semantic_rank = 1.0 - (top - score) / span, rank
    # One ranking alone (a mode, or nothing matched the other) keeps its own scale.
    weights = (lexical_weight, 1.0 - lexical_weight) if lexical and semantic else (1.0, 1.0)
    for entry in found.values():
        entry.base = entry.score = weights[0] * entry.lexical + weights[1] * entry.semantic
    if neighbours > 0 and neighbour_weight > 0:
        _add_neighbours(list(found.values()), neighbours, neighbour_weight)
    if lifted is not None and lift:
        for oid, entry in found.items():
            if lifted(oid):
                entry.score += lift
    # Stable: equal scores keep the rankings' own order (each breaks its ties by hash).
    order = sorted(found.items(), key=lambda item: -item[1].score)
    return [Fused(oid, e.id, e.score, e.lexical_rank, e.semantic_rank) for oid, e in order]


class _Candidate:
    __slots__ = ("base", "id", "lexical", "lexical_rank", "score", "semantic", "semantic_rank")

    def __init__(self, node_id: str) -> None:
        self.id = node_id
        self.lexical = self.semantic = self.base = self.score = 0.0
        self.lexical_rank: int | None = None
        self.semantic_rank: int | None = None


def _add_neighbours(candidates: list[_Candidate], reach: int, weight: float) -> None:
    at: dict[tuple[str, int], float] = {}
    placed: list[tuple[_Candidate, tuple[str, int]]] = []
    for entry in candidates:
        key = numbered(entry.id)
        if key is not None:
            placed.append((entry, key))
            at[key] = max(at.get(key, 0.0), entry.base)
    for entry, (stem, number) in placed:
        near = [
            at[(stem, number + step)]
            for step in range(-reach, reach + 1)
            if step and (stem, number + step) in at
        ]
        if near:
            entry.score += weight * max(near)
