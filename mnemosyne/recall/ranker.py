"""The order of a hybrid search: a logistic model over what each candidate shows.

:func:`mnemosyne.recall.fusion.scaled` gives every candidate of the lexical and the
semantic ranking its two scaled scores and its ranks. What else tells the memory that
holds the answer from one that only shares its words was measured on long
conversations (ADR 81): the memories around it (a reply is found through the
question before it), how well the rest of its conversation session scores (the memories
sharing its id's stem, ``chat/s3/t`` of ``chat/s3/t7``), whether its text names a time,
only asks a question, or is long, and whether the query names the speaker its text is
labelled with (``"Mira: ..."``). Each candidate's score is the probability a logistic
regression over those features gives it; the weights were fitted on the development
conversations of a public benchmark by ``bench/fit_ranking.py``, which also reports
them cross-validated across conversations. It weighs in two passes (:func:`rank`):
every candidate by what reads nothing, then the best few by their texts too.

Only candidates are weighed, and only their own texts are read: a neighbour or a
session member the filters turned away lends nothing, and nothing outside the two
rankings is returned.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence

from mnemosyne.model.objects import Node
from mnemosyne.recall.fusion import Fused, Scaled, numbered
from mnemosyne.recall.text import text_of
from mnemosyne.recall.timing import asks_when, names_a_time

CONTEXT = (
    "lexical",
    "semantic",
    "lexical_rank",
    "semantic_rank",
    "base",
    "before_1",
    "before_2",
    "after_1",
    "after_2",
    "stem_best",
    "before_1_lexical",
    "stem_lexical_sum",
    "stem_base_sum",
    "stem_lexical_best",
    "stem_semantic_best",
    "stem_candidates",
)
"""What a candidate's scores and the candidates around it show, read without its text:

- ``lexical``, ``semantic``, ``base``: the scaled scores and their equal-share sum;
- ``lexical_rank``, ``semantic_rank``: the natural log of the rank (one past the depth
  read when the ranking did not read it);
- ``before_1`` … ``after_2``: the base of the candidate one or two numbers before or after
  it in its namespace (0 when that memory is not a candidate);
- ``stem_best``: the best base among the candidates sharing its id's stem (its own when
  its id ends in no number);
- ``before_1_lexical``: the scaled lexical score of the candidate just before it (0 when none):
  a question that shares the query's words lifts the reply after it more than one that only
  means the same;
- ``stem_lexical_sum``, ``stem_base_sum``, ``stem_lexical_best``, ``stem_semantic_best``,
  ``stem_candidates``: how the rest of its session matches, over the candidates sharing its
  id's stem: the sums of their lexical and base scores, the best of each ranking's, and the
  natural log of how many they are (its own values, and 0, when its id ends in no number).
"""
TEXT = ("names_a_time", "asked_when_names_a_time", "asks", "words", "speaker_named")
"""What a candidate's text shows:

- ``names_a_time``: 1 when it names a time (:func:`mnemosyne.recall.timing.names_a_time`);
  ``asked_when_names_a_time`` the same when the query asks when;
- ``asks``: 1 when it ends in a question mark;
- ``words``: the natural log of its number of words;
- ``speaker_named``: 1 when it begins with a short label (``"Mira: "``) the query names.
"""
FEATURES = CONTEXT + TEXT
"""What :func:`features` gives of each candidate, in order."""

FIRST_WEIGHTS = (
    0.1657,  # lexical
    1.7229,  # semantic
    -0.1938,  # lexical_rank
    -0.1384,  # semantic_rank
    2.0016,  # base
    -2.1160,  # before_1
    0.9337,  # before_2
    0.7627,  # after_1
    0.4074,  # after_2
    0.6266,  # stem_best
    2.4788,  # before_1_lexical
    -0.1861,  # stem_lexical_sum
    -0.1161,  # stem_base_sum
    2.7145,  # stem_lexical_best
    0.7279,  # stem_semantic_best
    -0.2055,  # stem_candidates
)
"""The weights of a logistic regression over :data:`CONTEXT` alone (``bench/fit_ranking.py``):
the first pass, which picks the candidates whose texts are read."""
FIRST_INTERCEPT = -6.6513
"""Its intercept."""
WEIGHTS = (
    0.5658,  # lexical
    0.9170,  # semantic
    -0.1972,  # lexical_rank
    -0.1783,  # semantic_rank
    1.6147,  # base
    -0.1814,  # before_1
    1.0060,  # before_2
    0.9791,  # after_1
    0.1593,  # after_2
    0.4337,  # stem_best
    1.7240,  # before_1_lexical
    -0.1949,  # stem_lexical_sum
    -0.1195,  # stem_base_sum
    2.6836,  # stem_lexical_best
    1.1170,  # stem_semantic_best
    -0.1190,  # stem_candidates
    0.6937,  # names_a_time
    0.2836,  # asked_when_names_a_time
    -0.5904,  # asks
    0.3597,  # words
    1.2895,  # speaker_named
)
"""The weights of the logistic regression over all :data:`FEATURES` (``bench/fit_ranking.py``)."""
INTERCEPT = -9.0412
"""Its intercept."""
READ_TEXTS = 30
"""How many candidates (at least: twice the number asked for, when more) the first pass
hands to the second, whose texts are read. Measured: with 30 or more, recall at 5, 10
and 25 is what reading every candidate's text gives (ADR 81)."""

_WORDS = re.compile(r"\w+")
_LABEL = re.compile(r"^\s*([^\W\d_][^\W_]*(?:[ .'-][^\W\d_][^\W_]*){0,2}):\s")


def speaker(text: str) -> str | None:
    """The label a text begins with (``"Mira"`` of ``"Mira: we moved"``): at most three words."""
    found = _LABEL.match(text)
    return found.group(1) if found is not None else None


class Asked:
    """What the text features need of a query, worked out once for all its candidates."""

    __slots__ = ("when", "words")

    def __init__(self, query: str) -> None:
        self.when = asks_when(query)
        self.words = _WORDS.findall(query.casefold())

    def names(self, label: str) -> bool:
        """Whether the query names ``label`` as a whole word (or words), in any case.

        Word by word, not by a pattern made of the label: no memory's text is kept in
        the process's cache of compiled patterns (``forget`` must leave none behind).
        """
        named = _WORDS.findall(label.casefold())
        width, asked = len(named), self.words
        return width > 0 and any(asked[i : i + width] == named for i in range(len(asked) - width + 1))


def context_features(candidates: Sequence[Scaled], depth: int) -> list[tuple[float, ...]]:
    """Each candidate's :data:`CONTEXT` features, in the order given; nothing is read.

    ``depth`` is how deep each ranking was read.
    """
    at: dict[tuple[str, int], float] = {}
    lexical_at: dict[tuple[str, int], float] = {}
    # stem -> [lexical sum, base sum, best lexical, best semantic, count, best base]
    stems: dict[str, list[float]] = {}
    keys = [numbered(candidate.id) for candidate in candidates]
    for candidate, key in zip(candidates, keys, strict=True):
        if key is not None:
            at[key] = max(at.get(key, 0.0), candidate.base)
            lexical_at[key] = max(lexical_at.get(key, 0.0), candidate.lexical)
            group = stems.setdefault(key[0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            group[0] += candidate.lexical
            group[1] += candidate.base
            group[2] = max(group[2], candidate.lexical)
            group[3] = max(group[3], candidate.semantic)
            group[4] += 1
            group[5] = max(group[5], candidate.base)
    beyond = math.log(depth + 1)
    rows: list[tuple[float, ...]] = []
    for candidate, key in zip(candidates, keys, strict=True):
        near: tuple[float, ...]
        if key is None:
            near = (0.0, 0.0, 0.0, 0.0)
            best = candidate.base
            before_lexical = 0.0
            session = (candidate.lexical, candidate.base, candidate.lexical, candidate.semantic, 0.0)
        else:
            stem, number = key
            near = tuple(at.get((stem, number + step), 0.0) for step in (-1, -2, 1, 2))
            before_lexical = lexical_at.get((stem, number - 1), 0.0)
            lexical_sum, base_sum, lexical_best, semantic_best, count, best = stems[stem]
            session = (lexical_sum, base_sum, lexical_best, semantic_best, math.log(count))
        rows.append(
            (
                candidate.lexical,
                candidate.semantic,
                math.log(candidate.lexical_rank) if candidate.lexical_rank else beyond,
                math.log(candidate.semantic_rank) if candidate.semantic_rank else beyond,
                candidate.base,
                *near,
                best,
                before_lexical,
                *session,
            )
        )
    return rows


def text_features(node: Node | None, asked: Asked) -> tuple[float, ...]:
    """A candidate's :data:`TEXT` features (all 0 when its node is gone)."""
    if node is None:
        return (0.0,) * len(TEXT)
    timed, asks, length, label = _shape(text_of(node))
    named = 1.0 if label is not None and asked.names(label) else 0.0
    return (timed, timed if asked.when else 0.0, asks, length, named)


def features(
    candidates: Sequence[Scaled],
    depth: int,
    node: Callable[[bytes], Node | None],
    query: str,
) -> list[tuple[float, ...]]:
    """Each candidate's :data:`FEATURES`, in the order given, every candidate's node read.

    ``node(node hash)`` is a candidate's node, or None when it is gone.
    """
    asked = Asked(query)
    return [
        row + text_features(node(candidate.oid), asked)
        for row, candidate in zip(context_features(candidates, depth), candidates, strict=True)
    ]


def rank(
    candidates: Sequence[Scaled],
    depth: int,
    node: Callable[[bytes], Node | None],
    query: str,
    k: int = 10,
) -> list[Fused]:
    """The candidates best first, each scored by the probability the model gives it.

    Two passes: every candidate is weighed by :data:`CONTEXT` alone, which reads
    nothing; the best :data:`READ_TEXTS` (or ``2 * k``, when more) have their nodes
    read (``node(node hash)``, None when gone) and are weighed by every feature, and
    come first in that order. The rest follow in the first pass's order, each scored
    no higher than the last of those. Equal scores keep the order given (the lexical
    ranking's, then the semantic one's).
    """
    context = context_features(candidates, depth)
    logits = [_logit(FIRST_INTERCEPT, FIRST_WEIGHTS, row) for row in context]
    first = sorted(range(len(candidates)), key=lambda i: -logits[i])
    read = max(READ_TEXTS, 2 * k)
    asked = Asked(query)
    chosen = []
    for i in first[:read]:
        row = context[i] + text_features(node(candidates[i].oid), asked)
        chosen.append((_probability(_logit(INTERCEPT, WEIGHTS, row)), i))
    chosen.sort(key=lambda pair: -pair[0])
    floor = chosen[-1][0] if chosen else 1.0
    rest = [(min(floor, _probability(logits[i])), i) for i in first[read:]]
    ordered = [(score, candidates[i]) for score, i in chosen + rest]
    return [Fused(c.oid, c.id, score, c.lexical_rank, c.semantic_rank) for score, c in ordered]


READ = 4096
"""How many characters of a candidate's text its shape is read from, at each end: a search
reads the texts of its best candidates, and a memory of megabytes must not cost one."""


def _shape(text: str) -> tuple[float, float, float, str | None]:
    """Whether ``text`` names a time and only asks, the log of its words, and its speaker's label.

    A text longer than twice :data:`READ` is read at its start and its end, its
    words counted there and estimated for the rest by their length.
    """
    if len(text) > 2 * READ:
        start, end = text[:READ], text[-READ:]
        timed = names_a_time(start) or names_a_time(end)
        counted = len(start.split()) + len(end.split())
        words = counted * len(text) / (2 * READ)
    else:
        start, end = text, text
        timed = names_a_time(text)
        words = len(text.split())
    asks = end.rstrip().endswith("?")
    return (1.0 if timed else 0.0, 1.0 if asks else 0.0, math.log(max(1.0, words)), speaker(start))


def _logit(intercept: float, weights: tuple[float, ...], row: tuple[float, ...]) -> float:
    total: float = sum(map(operator.mul, weights, row))
    return intercept + total


def _probability(logit: float) -> float:
    # The logistic function, written so neither branch overflows.
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    odds = math.exp(logit)
    return odds / (1.0 + odds)
