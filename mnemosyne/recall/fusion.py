"""The two rankings of a hybrid search on one scale, and the ids beside a memory.

Each ranking is read to a depth (its best accepted versions); each candidate's two
scores are scaled to [0, 1] over the candidates: BM25 by the best BM25 score, cosine
between the deepest and the best cosine read. Unlike reciprocal ranks, a ranking that
is sure (one candidate far ahead) then counts for more than one that is not, and a weak
ranking's order among near-equal candidates does not drag a strong one down (ADR 44).
:mod:`mnemosyne.recall.ranker` weighs these with what else a candidate shows.

A memory's neighbours are the memories written beside it in its namespace, by the
number its id ends in (``chat/s3/t7`` beside ``chat/s3/t6`` and ``chat/s3/t8``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

LEXICAL_WEIGHT = 0.5
"""The lexical ranking's share of a candidate's base score (the semantic one has the rest)."""
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


class Scaled(msgspec.Struct, frozen=True):
    """One candidate of both rankings: its two scores scaled to [0, 1], its ranks, their weighted sum.

    ``lexical`` is the BM25 score over the best one read; ``semantic`` is the cosine placed
    between the deepest read (0) and the best (1). A candidate one ranking did not read has
    0 there and no rank.
    """

    oid: bytes
    id: str
    lexical: float
    semantic: float
    lexical_rank: int | None
    semantic_rank: int | None
    base: float


def scaled(lexical: Ranked, semantic: Ranked, *, lexical_weight: float = LEXICAL_WEIGHT) -> list[Scaled]:
    """Every candidate of the two rankings once, in the order first read (lexical, then semantic).

    One ranking alone (a mode, or nothing matched the other) keeps its own scale: its
    scaled score is the base.
    """
    parts: dict[bytes, list[Any]] = {}  # oid -> [id, lexical, semantic, lexical rank, semantic rank]
    if lexical:
        best = max(score for _, _, score in lexical) or 1.0
        for rank, (oid, node_id, score) in enumerate(lexical, 1):
            entry = parts.setdefault(oid, [node_id, 0.0, 0.0, None, None])
            entry[1], entry[3] = score / best, rank
    if semantic:
        top = max(score for _, _, score in semantic)
        floor = min(score for _, _, score in semantic)
        span = max(top - floor, MIN_SPAN)
        for rank, (oid, node_id, score) in enumerate(semantic, 1):
            entry = parts.setdefault(oid, [node_id, 0.0, 0.0, None, None])
            entry[2], entry[4] = 1.0 - (top - score) / span, rank
    weights = (lexical_weight, 1.0 - lexical_weight) if lexical and semantic else (1.0, 1.0)
    return [
        Scaled(oid, node_id, lex, sem, lex_rank, sem_rank, weights[0] * lex + weights[1] * sem)
        for oid, (node_id, lex, sem, lex_rank, sem_rank) in parts.items()
    ]


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
