"""BM25 ranking over the postings, reading only the segments that can change the top k.

Each word's postings are kept per segment of documents with a summary per
segment (:mod:`~mnemosyne.recall.postings`); :func:`lexical` takes the words
with the highest bounds first, scores their documents exactly, and stops reading
once nothing unread can enter the top k (block-max MaxScore, ADR 37). With
``skip=False`` it reads every posting: the reference the skipping ranking is
held to, to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from mnemosyne.index.view import View
from mnemosyne.recall import postings as layout  # SEGMENT read at each use: tests shrink it
from mnemosyne.recall.postings import (
    K1,
    ROW,
    SUMMARY_FIELDS,
    Accept,
    B,
    Postings,
    Version,
    expiry,
    readable_queue,
    rows_of,
)
from mnemosyne.recall.text import document_words, query_words, unstemmed_words
from mnemosyne.store.kv.base import ReadTxn


class Blocks:
    """How many postings segments one lexical ranking read, and how many it left unread.

    Pass one to :func:`lexical` to count (a benchmark or a test compares the
    skipping ranking with the exhaustive one); counts add up over calls.
    """

    def __init__(self) -> None:
        self.read = 0
        """Segments (of every word of the query) whose postings were read."""
        self.skipped = 0
        """Segments of the query's words left unread: they could not change the answer."""


_SLACK = 1e-9
"""Relative room given to every bound: a sum taken in another order may differ in its last bits."""


def _loose(value: Any) -> Any:
    """``value`` (a float or an array of them) raised by the slack: a bound never below the sum it bounds."""
    return value + abs(value) * _SLACK + 1e-12


def _weights(rows: npt.NDArray[Any], idf: float, average: float) -> npt.NDArray[np.float64]:
    """BM25 of ``(document, tf, length)`` rows, one expression for every path (equal to the bit)."""
    tf = rows[:, 1].astype(np.float64)
    length = rows[:, 2].astype(np.float64)
    weight = tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
    return idf * weight


def lexical(
    view: View,
    postings: Postings,
    query: str,
    accept: Accept,
    limit: int,
    number: Callable[[int], Version | None] | None = None,
    *,
    skip: bool = True,
    blocks: Blocks | None = None,
    screen: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = None,
    unstemmed: bool = False,
) -> list[tuple[bytes, str, float]]:
    """BM25 over indexed and queued versions; the best ``limit`` accepted ones.

    ``number`` looks up a document by number (default: read from ``view``; a
    handle's :class:`~mnemosyne.recall.names.Names` remembers them).
    ``screen`` flags, for a batch of document numbers at once, those that
    ``accept`` might take (False: it surely turns the document away, so it is
    not looked up; a handle's :meth:`~mnemosyne.recall.names.Names.under`
    screens for a namespace prefix).

    With ``skip`` (the default) the ranking reads only the postings segments
    that can still change the answer (block-max MaxScore, see
    :func:`_skipping`); without it, every segment of every word (the reference
    the skipping ranking must equal). Either way the answer is the same: the
    same versions with the same scores in the same order. ``blocks`` counts the
    segments read and skipped. ``unstemmed``: the postings are of a layout
    before 5 (a read-only handle reads them until a writer re-indexes them), so
    the query is split as they were (:func:`~mnemosyne.recall.text.unstemmed_words`).

    Equal scores break by node hash. Scores are summed in the same order (words
    sorted) whatever the layout, so they are equal bit for bit in every process.

    Returns:
        ``(node hash, node id, score)``, best first.
    """
    txn = view.txn
    terms = sorted(set((unstemmed_words if unstemmed else query_words)(query)))
    if not terms or limit <= 0:
        return []
    totals = postings.stats(txn)
    pending = list(readable_queue(view, postings))
    pending_words = [document_words(node) for _, node in pending]
    docs = totals.docs + len(pending)
    average = (totals.words + sum(map(len, pending_words))) / docs if docs else 1.0
    named = {
        totals.next + i: (oid, node.id, expiry(node.expires_at)) for i, (oid, node) in enumerate(pending)
    }
    lookup = number if number is not None else lambda n: postings.numbered(txn, n)
    counted = blocks if blocks is not None else Blocks()

    def walk(
        found: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], wanted: int, turned: list[int] | None
    ) -> list[tuple[bytes, str, float]]:
        return _walk(found, scores, named, lookup, accept, wanted, turned, screen)

    # Queued versions get numbers past every indexed document's.
    extras = [
        np.array(
            [
                (totals.next + i, found.count(term), len(found))
                for i, found in enumerate(pending_words)
                if term in found
            ],
            dtype=np.int64,
        ).reshape(-1, ROW)
        for term in terms
    ]
    if skip:
        listed = [
            _Term(txn, postings, term, extra, totals.next, counted)
            for term, extra in zip(terms, extras, strict=True)
        ]
        present = [t for t in listed if t.having]
        return _skipping(present, docs, average, totals.next, walk, limit, screen)
    numbers: list[npt.NDArray[np.int64]] = []
    weights: list[npt.NDArray[np.float64]] = []
    for term, extra in zip(terms, extras, strict=True):
        parts: list[npt.NDArray[Any]] = [rows_of(value) for value in postings.term_segments(txn, term)]
        counted.read += len(parts)
        if len(extra):
            parts.append(extra)
        if not parts:
            continue
        rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
        having = len(rows)
        idf = math.log(1 + (docs - having + 0.5) / (having + 0.5))
        numbers.append(rows[:, 0].astype(np.int64))
        weights.append(_weights(rows, idf, average))
    if not numbers:
        return []
    # bincount adds each document's terms in the order given: the words' sorted order.
    found, where = np.unique(np.concatenate(numbers), return_inverse=True)
    scores = np.bincount(where, weights=np.concatenate(weights)).astype(np.float64, copy=False)
    return walk(found.astype(np.int64), scores, limit, None)


def _walk(
    found: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float64],
    named: dict[int, Version],
    lookup: Callable[[int], Version | None],
    accept: Accept,
    limit: int,
    turned: list[int] | None = None,
    screen: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = None,
) -> list[tuple[bytes, str, float]]:
    """The first ``limit`` accepted of ``found`` (scored ``scores``), best first, equal ones by node hash.

    Versions looked up are kept in ``named``, and documents turned away are
    added to ``turned``: a skipping ranking walks its candidates again as it
    finds more, and leaves those out. ``screen`` (see :func:`lexical`) turns
    documents away a batch at a time before they are looked up.
    """
    out: list[tuple[bytes, str, float]] = []
    for take in _best_first(scores, max(64, 8 * limit)):
        docs = found[take]
        values = scores[take]
        group = np.zeros(len(take), dtype=np.intp)  # equal scores share a group, numbered best first
        np.cumsum(values[1:] != values[:-1], out=group[1:])
        if screen is None:
            kept, dropped = np.arange(len(take)), None
        else:
            passing = screen(docs)
            kept, dropped = np.flatnonzero(passing), np.flatnonzero(~passing)
        # Only the groups with a document the screen let through are walked, one by one.
        for part in np.split(kept, np.flatnonzero(np.diff(group[kept])) + 1) if len(kept) else []:
            candidates: list[tuple[Version, int]] = []
            for doc in docs[part].tolist():
                entry = named.get(doc)
                if entry is None:
                    entry = lookup(doc)
                    if entry is None:
                        if turned is not None:
                            turned.append(doc)
                        continue
                    named[doc] = entry
                candidates.append((entry, doc))
            score = float(values[part[0]])
            for (oid, node_id, expires), doc in sorted(candidates):
                if accept(node_id, oid, expires):
                    out.append((oid, node_id, score))
                    if len(out) >= limit:
                        if turned is not None and dropped is not None:
                            # Those screened out up to the end of this group were turned away.
                            end = int(np.searchsorted(group, group[part[0]], side="right"))
                            turned.extend(docs[dropped[dropped < end]].tolist())
                        return out
                elif turned is not None:
                    turned.append(doc)
        if turned is not None and dropped is not None:
            turned.extend(docs[dropped].tolist())
    return out


class _Term:
    """One word of a query: its segment summaries, its queued rows, and what was read of its postings."""

    def __init__(
        self,
        txn: ReadTxn,
        postings: Postings,
        word: str,
        extra: npt.NDArray[np.int64],
        first_queued: int,
        blocks: Blocks,
    ) -> None:
        self.txn, self.postings, self.word, self.extra, self.blocks = txn, postings, word, extra, blocks
        self.first_queued = first_queued
        self.segments: dict[int, npt.NDArray[np.int64]] = {}  # segment → its rows, once read
        self.rows: npt.NDArray[np.int64] | None = None  # every row (segments, then queued), once read
        summary = postings.summary(txn, word)
        self.summarized = summary is not None
        self.summary: npt.NDArray[np.int64] = np.zeros((0, SUMMARY_FIELDS), dtype=np.int64)
        if summary is None:
            self._read_all()  # no summaries (an index of layout 3): summarize what is read
            assert self.rows is not None
            indexed = self.rows[self.rows[:, 0] < first_queued]
            segment = indexed[:, 0] // layout.SEGMENT
            starts = np.flatnonzero(np.diff(segment, prepend=-1)) if len(indexed) else np.zeros(0, np.intp)
            derived = np.empty((len(starts), SUMMARY_FIELDS), dtype=np.int64)
            if len(starts):
                derived[:, 0] = segment[starts]
                derived[:, 1] = np.diff(np.append(starts, len(indexed)))
                derived[:, 2] = np.maximum.reduceat(indexed[:, 1], starts)
                derived[:, 3] = np.minimum.reduceat(indexed[:, 2], starts)
            self.summary = derived
        else:
            self.summary = summary.astype(np.int64)
            blocks.skipped += len(summary)  # until read
        self.having = int(self.summary[:, 1].sum()) + len(extra)
        self.idf = 0.0

    def _read_all(self) -> None:
        """Read every segment of the word (those not read yet)."""
        values = list(self.postings.term_segments(self.txn, self.word))
        fresh = len(values) - len(self.segments)
        self.blocks.read += fresh
        if self.summarized:
            self.blocks.skipped -= fresh
        # One buffer for them all: a segment at a time costs as much again in array calls.
        rows = rows_of(b"".join(values)).astype(np.int64)
        self.rows = np.concatenate([rows, self.extra]) if len(self.extra) else rows

    def docs(self) -> npt.NDArray[np.int64]:
        """Every document with the word, ascending (its postings are read whole)."""
        if self.rows is None:
            self._read_all()
        assert self.rows is not None
        return self.rows[:, 0]

    def weights_of(self, found: npt.NDArray[np.int64], average: float) -> npt.NDArray[np.float64]:
        """The word's BM25 weight in each of the documents ``found`` (ascending): 0 where it is not.

        Reads only the segments that hold one of them, or every segment when
        they hold more than half of them (one scan costs less than as many reads).
        """
        rows = self.rows
        if rows is None:
            wanted = _distinct(found[found < self.first_queued] // layout.SEGMENT)
            wanted = wanted[np.isin(wanted, self.summary[:, 0], assume_unique=True)]
            missing = [int(s) for s in wanted.tolist() if s not in self.segments]
            if 2 * (len(missing) + len(self.segments)) > len(self.summary):
                self._read_all()
                rows = self.rows
            else:
                for segment in missing:
                    value = self.postings.term_segment(self.txn, self.word, segment)
                    self.segments[segment] = (
                        rows_of(value).astype(np.int64) if value is not None else np.zeros((0, ROW), np.int64)
                    )
                self.blocks.read += len(missing)
                self.blocks.skipped -= len(missing)
                rows = np.concatenate([*(self.segments[int(s)] for s in wanted.tolist()), self.extra])
        assert rows is not None
        out = np.zeros(len(found), dtype=np.float64)
        if not len(rows) or not len(found):
            return out
        at = np.minimum(np.searchsorted(rows[:, 0], found), len(rows) - 1)
        hit = rows[at, 0] == found
        out[hit] = _weights(rows[at[hit]], self.idf, average)
        return out


def _distinct(ascending: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values of an ascending array (no sort: they are in order already)."""
    keep = np.ones(len(ascending), dtype=bool)
    keep[1:] = ascending[1:] != ascending[:-1]
    return ascending[keep]


def _union(lists: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """The distinct values of the ascending ``lists``, ascending (what ``np.unique`` of them gives).

    A stable sort merges the lists as the runs they are, in a small share of the
    time ``np.unique`` takes (it hashes every value, then sorts what it kept).
    """
    merged = np.sort(np.concatenate(lists), kind="stable")
    if not len(merged):
        return merged
    keep = np.empty(len(merged), dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


def _outside(docs: npt.NDArray[np.int64], lists: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """Those of ``docs`` in none of the ascending ``lists``."""
    keep = np.ones(len(docs), dtype=bool)
    for listed in lists:
        if len(listed):
            at = np.minimum(np.searchsorted(listed, docs), len(listed) - 1)
            keep &= listed[at] != docs
    return docs[keep]


def _skipping(
    terms: list[_Term],
    docs: int,
    average: float,
    first_queued: int,
    walk: Callable[
        [npt.NDArray[np.int64], npt.NDArray[np.float64], int, list[int] | None],
        list[tuple[bytes, str, float]],
    ],
    limit: int,
    screen: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = None,
) -> list[tuple[bytes, str, float]]:
    """The exhaustive ranking's answer, reading only the segments that can change it (block-max MaxScore).

    A word's segment summary bounds its weight in any document of the segment
    (highest tf, lowest length: BM25 grows with the one and falls with the
    other). Words are taken best bound first: the documents of the first
    (essential) words are candidates, scored exactly by looking their rows up
    in the other words, a segment at a time, and dropped as soon as their bound
    (what is known plus the segment bounds of the words not looked up yet)
    falls below the threshold: the score of the ``limit``-th accepted candidate
    so far. A document in none of the essential words scores at most the
    largest sum, over segments, of the other words' bounds; once that is below
    the threshold, no unread document can enter the answer, and the walk over
    the candidates (best first, equal scores by node hash) is the answer.
    Queued versions are always candidates. Those ``screen`` (see :func:`lexical`)
    turns away are dropped before they are scored.
    """
    if not terms:
        return []
    count = len(terms)
    for term in terms:
        term.idf = math.log(1 + (docs - term.having + 0.5) / (term.having + 0.5))
    segments = max((int(t.summary[:, 0].max()) + 1 for t in terms if len(t.summary)), default=0)
    bounds = np.zeros((count, segments + 1), dtype=np.float64)  # the last column: no segment (queued)
    top = np.zeros(count)
    for i, term in enumerate(terms):
        if len(term.summary):
            best = _weights(term.summary[:, 1:], term.idf, average)  # (rows, tf, length): tf and length
            bounds[i, term.summary[:, 0]] = _loose(best)
            top[i] = bounds[i].max()
        if len(term.extra):
            top[i] = max(top[i], float(_loose(_weights(term.extra, term.idf, average)).max()))
    order = sorted(range(count), key=lambda i: (-top[i], i))
    # suffix[j]: per segment, the most the words order[j:] add to a document in it.
    suffix = np.zeros((count + 1, segments + 1), dtype=np.float64)
    for j in range(count - 1, -1, -1):
        suffix[j] = suffix[j + 1] + bounds[order[j]]
    rest = suffix.max(axis=1)
    queued = [t.extra[:, 0] for t in terms if len(t.extra)]
    found = np.zeros(0, dtype=np.int64)
    scores = np.zeros(0, dtype=np.float64)
    threshold = -math.inf
    fixed: list[tuple[bytes, str, float]] = []
    refused = 0  # candidates turned away so far
    done, end = 0, 1
    while True:
        fresh = [terms[i].docs() for i in order[done:end]]
        if done:
            # Those in an earlier essential word were candidates (or dropped) already; queued ones too.
            fresh = [
                _outside(docs[docs < first_queued], [terms[i].docs() for i in order[:done]]) for docs in fresh
            ]
        else:
            fresh += queued
        new = fresh[0] if len(fresh) == 1 else _union(fresh)  # a word's are distinct
        if screen is not None and len(new):
            # Candidates the filter surely turns away are neither scored nor walked; they count
            # as turned away, as a walk through every candidate would have counted them.
            passing = screen(new)
            refused += len(new) - int(np.count_nonzero(passing))
            new = new[passing]
        # Queued documents are never dropped: no segment bounds them.
        kept = new >= first_queued
        where = np.where(kept, segments, new // layout.SEGMENT)
        contribution = np.zeros((count, len(new)), dtype=np.float64)
        known = np.zeros(len(new), dtype=np.float64)
        for i in order[done:end]:
            contribution[i] = terms[i].weights_of(new, average)
            known += contribution[i]
        alive = kept | (_loose(known + suffix[end][where]) >= threshold)
        for j in range(end, count):
            alive &= kept | (_loose(known + suffix[j][where]) >= threshold)
            i = order[j]
            weight = terms[i].weights_of(new[alive], average)
            contribution[i, alive] = weight
            known[alive] += weight
        alive &= kept | (_loose(known) >= threshold)
        exact = np.zeros(int(alive.sum()), dtype=np.float64)
        for i in range(count):  # the words' sorted order, as the exhaustive sum
            exact = exact + contribution[i, alive]
        found = np.concatenate([found, new[alive]])
        scores = np.concatenate([scores, exact])
        turned: list[int] = []
        out = fixed + walk(found, scores, limit - len(fixed), turned)
        if len(out) >= limit:
            threshold = out[-1][2]
        below = _loose(rest[end])
        if end == count or (len(out) >= limit and threshold > below):
            return out
        # Later rounds only find documents scoring at most ``below``: what ranks above it is
        # settled (walked, and judged), and is not walked again.
        fixed = [hit for hit in out if hit[2] > below]
        # What was turned away stays out: the answer is the same whichever candidates are judged first.
        low = (scores <= below) & ~np.isin(found, np.array(turned, dtype=np.int64))
        found, scores = found[low], scores[low]
        refused += len(turned)
        done = end
        if threshold == -math.inf:
            # Too few accepted yet: take in enough words for the share accepted so far to fill the
            # answer twice over (all of them when none was), rather than a round per word.
            wanted = 2 * limit * (len(out) + refused) / len(out) if out else math.inf
            listed = sum(terms[i].having for i in order[:end])
            end += 1
            while end < count and listed + terms[order[end - 1]].having < wanted:
                listed += terms[order[end - 1]].having
                end += 1
        else:
            end = next(j for j in range(end + 1, count + 1) if _loose(rest[j]) < threshold or j == count)


def _best_first(scores: npt.NDArray[np.float64], chunk: int) -> Iterator[npt.NDArray[np.intp]]:
    """Indices by score, best first (equal ones in index order), a growing chunk at a time.

    Only the part of the ranking that is walked gets sorted; a chunk always ends
    between two different scores, so no group of equal scores is split.
    """
    left = np.arange(len(scores))
    while len(left):
        values = scores[left]
        if len(left) > chunk:
            boundary = np.partition(values, len(values) - chunk)[len(values) - chunk]
            take, left = left[values >= boundary], left[values < boundary]
        else:
            take, left = left, left[:0]
        yield take[np.argsort(-scores[take], kind="stable")]
        chunk *= 4
