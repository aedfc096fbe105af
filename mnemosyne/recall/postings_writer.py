"""Catching up the lexical index: a writer adding documents a segment of postings at a time.

The keys it writes are :class:`~mnemosyne.recall.postings.Postings`' (the d, r, t,
s, c, n and l families of the ``recall`` keyspace, laid out there); a
:class:`Writer` is made for one catch-up or rebuild and holds the index it adds to.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from mnemosyne.model.objects import Node
from mnemosyne.recall import postings as layout  # SEGMENT read at each use: tests shrink it
from mnemosyne.recall.postings import (
    CHANGES,
    CONTENT,
    DOC,
    DOC_RECORD,
    ENCODER,
    EXPIRY,
    ROW,
    ROW_BYTES,
    SUMMARY,
    SUMMARY_BYTES,
    SUMMARY_FIELDS,
    SUMMARY_ROW,
    TERM,
    VERSIONS,
    Postings,
    Stats,
    Version,
    expiry,
)
from mnemosyne.recall.text import content_hash, document_words
from mnemosyne.store.kv.base import AppendLog, Space, WriteTxn


def _summaries(rows: npt.NDArray[np.uint32], starts: list[int], segment: int) -> bytes:
    """The packed summary of each run of rows (one word's rows in one segment) starting at ``starts``."""
    at = np.asarray(starts, dtype=np.intp)
    out = np.empty((len(at), SUMMARY_FIELDS), dtype="<u4")
    out[:, 0] = segment
    out[:, 1] = np.diff(np.append(at, len(rows)))
    out[:, 2] = np.maximum.reduceat(rows[:, 1], at)
    out[:, 3] = np.minimum.reduceat(rows[:, 2], at)
    return out.tobytes()


class _Terms(dict[str, int]):
    """Word → term number for one writer's life; a word is numbered when first looked up.

    Kept rather than a vocabulary built per segment (two more passes over its
    words): most words recur from segment to segment, a known word's lookup stays
    in C, and words come back as the dictionary's own strings, hashes computed,
    when their postings are filed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        """The words by term number."""

    def __missing__(self, word: str) -> int:
        number = self[word] = len(self.words)
        self.words.append(word)
        return number


class Writer:
    """Adds documents to one tenant's lexical index, a segment of postings at a time.

    Document records are written as documents are added; postings wait in
    memory until their segment is full or :meth:`close` is called, so each
    (word, segment) key is written once per catch-up. The totals are written by
    :meth:`close`.

    A writer told its index is ``fresh`` (cleared in this transaction) keeps
    the postings and the content map until :meth:`close` and writes them in key
    order: written batch by batch, each new key would land on a page of its
    own (a word's segments sit together, content hashes are random), and every
    such page be copied again and again. It reads nothing back.
    """

    def __init__(self, txn: WriteTxn, postings: Postings, fresh: bool = False) -> None:
        self._txn = txn
        self._postings = postings
        self._scope = postings.scope
        self._fresh = fresh
        self._totals = Stats() if fresh else postings.stats(txn)
        self._first = self._totals.next  # the number of the first buffered document
        self._words: list[str] = []  # the buffered documents' words, one after another
        self._terms = _Terms()
        self._lengths: list[int] = []
        self._segments: dict[str, list[tuple[int, bytes, bytes]]] = {}  # fresh: word → segments, summaries
        self._contents: dict[bytes, list[Version]] = {}  # fresh: the content map

    def add(self, nodes: list[tuple[bytes, Node]]) -> list[bytes]:
        """Index node versions that are not indexed yet; return their content hashes."""
        scope = self._scope
        records: list[tuple[bytes, bytes]] = []
        contents: dict[bytes, list[Version]] = self._contents if self._fresh else {}
        hashes: list[bytes] = []
        docs, total, number = self._totals.docs, self._totals.words, self._totals.next
        for oid, node in nodes:
            found = document_words(node)
            chash = content_hash(node)
            expires = expiry(node.expires_at)
            hashes.append(chash)
            records.append((scope + DOC + oid, DOC_RECORD.pack(number, expires) + chash))
            number_key = self._postings.number_key(number)
            records.append((number_key, oid + EXPIRY.pack(expires) + node.id.encode()))
            contents.setdefault(chash, []).append((oid, node.id, expires))
            self._words.extend(found)
            self._lengths.append(len(found))
            docs += 1
            total += len(found)
            number += 1
            if number % layout.SEGMENT == 0:
                self._flush()
        self._totals = Stats(docs, total, number)
        if not self._fresh:
            records.extend(self._merged(contents))
        records.sort()
        self._txn.put_many(Space.RECALL, records)
        return hashes

    def _merged(self, contents: dict[bytes, list[Version]]) -> Iterator[tuple[bytes, bytes]]:
        """Content-map entries with the versions already there added."""
        log = AppendLog(self._txn, Space.RECALL, self._scope + CHANGES)
        keys = [self._scope + CONTENT + chash for chash in contents]
        # Read at once: on PostgreSQL a round trip each.
        for key, known, (chash, versions) in zip(
            keys, self._txn.get_many(Space.RECALL, keys), contents.items(), strict=True
        ):
            if known is not None:
                versions = [*VERSIONS.decode(known), *versions]
                log.append(chash)  # new contents need no entry: no handle can hold them
            yield key, ENCODER.encode(sorted(versions))

    def close(self) -> None:
        """Write the postings still buffered (a fresh index's all) and the new totals."""
        self._flush()
        txn = self._txn
        if self._segments:
            head, summary_head = self._scope + TERM, self._scope + SUMMARY
            ordered = sorted(self._segments)  # code point order is UTF-8 byte order
            txn.put_many(
                Space.RECALL,
                [
                    (
                        summary_head + word.encode() + b"\x00",
                        b"".join(row for _, _, row in self._segments[word]),
                    )
                    for word in ordered
                ],
            )
            items = [
                (head + word.encode() + b"\x00" + segment.to_bytes(4, "big"), value)
                for word in ordered
                for segment, value, _ in self._segments[word]
            ]
            txn.put_many(Space.RECALL, items)
            self._segments = {}
        if self._contents:
            head = self._scope + CONTENT
            txn.put_many(
                Space.RECALL,
                [
                    (head + chash, ENCODER.encode(sorted(self._contents[chash])))
                    for chash in sorted(self._contents)
                ],
            )
            self._contents = {}
        self._postings.put_stats(txn, self._totals)

    def _flush(self) -> None:
        """Write the buffered documents' postings: one key per word (one segment)."""
        first, count, flat = self._first, len(self._lengths), self._words
        self._first = first + count
        lengths = np.array(self._lengths, dtype=np.int64)
        self._words, self._lengths = [], []
        if not flat:
            return
        terms = np.fromiter(map(self._terms.__getitem__, flat), dtype=np.int64, count=len(flat))
        vocabulary = self._terms.words
        # One sort gives every (word, document) pair in word then document order, with its tf.
        pairs, tf = np.unique(terms * count + np.repeat(np.arange(count), lengths), return_counts=True)
        term, local = np.divmod(pairs, count)
        rows = np.empty((len(pairs), ROW), dtype="<u4")
        rows[:, 0] = first + local
        rows[:, 1] = tf
        rows[:, 2] = lengths[local]
        starts = [0, *(np.flatnonzero(np.diff(term)) + 1).tolist()]
        ends = [*starts[1:], len(pairs)]
        segment = first // layout.SEGMENT
        data = rows.tobytes()
        summaries = _summaries(rows, starts, segment)
        bounds = zip(
            starts, ends, term[starts].tolist(), range(0, len(summaries), SUMMARY_BYTES), strict=True
        )
        if self._fresh:
            for start, end, word, at in bounds:
                self._segments.setdefault(vocabulary[word], []).append(
                    (
                        segment,
                        data[start * ROW_BYTES : end * ROW_BYTES],
                        summaries[at : at + SUMMARY_BYTES],
                    )
                )
            return
        resumed = first % layout.SEGMENT != 0  # the segment holds earlier documents: append to them
        head, tail = self._scope + TERM, b"\x00" + segment.to_bytes(4, "big")
        summary_head = self._scope + SUMMARY
        spans = list(bounds)
        encoded = [vocabulary[word].encode() for _, _, word, _ in spans]
        keys = [head + word + tail for word in encoded]
        summary_keys = [summary_head + word + b"\x00" for word in encoded]
        # What is there already, read at once: on PostgreSQL a round trip each.
        befores = self._txn.get_many(Space.RECALL, keys) if resumed else [None] * len(keys)
        knowns = self._txn.get_many(Space.RECALL, summary_keys)
        items: list[tuple[bytes, bytes]] = []
        for (start, end, _, at), key, before, summary_key, known in zip(
            spans, keys, befores, summary_keys, knowns, strict=True
        ):
            value = data[start * ROW_BYTES : end * ROW_BYTES]
            items.append((key, value if before is None else before + value))
            items.append((summary_key, _summarized(known or b"", summaries[at : at + SUMMARY_BYTES])))
        items.sort()
        self._txn.put_many(Space.RECALL, items)


def _summarized(known: bytes, row: bytes) -> bytes:
    """A word's summaries with one segment's new rows' summary ``row`` added (appended or merged)."""
    if len(known) >= SUMMARY_BYTES:
        last = SUMMARY_ROW.unpack_from(known, len(known) - SUMMARY_BYTES)
        new = SUMMARY_ROW.unpack(row)
        if last[0] == new[0]:  # the segment had rows of the word already: one summary of them all
            merged = (new[0], last[1] + new[1], max(last[2], new[2]), min(last[3], new[3]))
            return known[:-SUMMARY_BYTES] + SUMMARY_ROW.pack(*merged)
    return known + row
