"""The lexical index: numbered documents, postings in segments, and BM25 over them.

Each indexed node version is a document with a dense number, given in indexing
order and never reused until the index is rebuilt. Postings are grouped by
document number into segments of :data:`SEGMENT` documents: one key per (word,
segment) whose value is a packed array of ``(document, tf, length)`` rows
(little-endian u32, sorted by document), and one key per word summarizes its
segments (how many rows, the highest tf, the lowest length), which bounds what
each segment can add to a score. Catching up a batch of versions writes each
touched word's segment and summary once (:mod:`~mnemosyne.recall.postings_writer`);
ranking (:func:`lexical`) reads the summaries, then only the segments that can
still change the top k (block-max MaxScore; ADR 37), with ``np.frombuffer``, BM25
computed over whole arrays.

Each version's expiry is kept with it, so a search turns expired versions away
without reading them.

Keys (behind the tenant scope) in the ``recall`` keyspace:
``d`` node hash → document number (u32), expiry (i64 µs), content hash ·
``r`` document number (u32) → node hash, expiry, node id ·
``t`` word 00 segment (u32) → postings ·
``s`` word 00 → the word's segment summaries: a packed ``(segment, rows, highest tf,
lowest length)`` row (little-endian u32) per segment, by segment (numbers only: they
bound what a segment can add to a score, so a ranking skips segments that cannot
matter; see :func:`lexical`) ·
``c`` content hash → ``(node hash, id, expiry)`` of every indexed version with it ·
``n`` → documents, words, next document number ·
``l`` sequence → a content hash whose versions changed, or ``*`` (everything
changed: the index was cleared), so handles can keep what they read of these
maps (see :mod:`mnemosyne.recall.names`).
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

import msgspec
import numpy as np
import numpy.typing as npt

from mnemosyne.errors import CorruptObject, NotFound
from mnemosyne.index.view import View
from mnemosyne.model.objects import Node
from mnemosyne.model.times import micros
from mnemosyne.recall.text import content_hash, document_words
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn, last_number

DOC, NUMBER, TERM, CONTENT, STATS, CHANGES, SUMMARY = b"d", b"r", b"t", b"c", b"n", b"l", b"s"
SEGMENT = 2048
"""Documents per postings segment: bounds what one catch-up or erasure rewrites per word."""
K1, B = 0.9, 0.4
"""BM25 parameters: Lucene's (Anserini's) choice for short passages; memories are short (ADR 44)."""

NEVER = (1 << 63) - 1
"""The expiry of a version that never expires."""
_STATS = struct.Struct(">QQQ")
DOC_RECORD = struct.Struct(">Iq")
"""The head of a document record: document number, expiry; then the content hash."""
EXPIRY = struct.Struct(">q")
"""An expiry as a document-number record holds it."""
NUMBER_HEAD = 32 + EXPIRY.size
"""Bytes of a document-number record before the node id: the node hash, the expiry."""
DOC_SIZE = DOC_RECORD.size + 32
"""Bytes of a document record: number, expiry, content hash."""
ROW = 3
"""u32 fields per posting: document, tf, length."""
ROW_BYTES = 4 * ROW
"""Bytes per posting."""
SUMMARY_FIELDS = 4
"""u32 fields per segment summary: segment, rows, highest tf, lowest length."""
SUMMARY_BYTES = 4 * SUMMARY_FIELDS
"""Bytes per segment summary."""
SUMMARY_ROW = struct.Struct("<IIII")
"""One segment summary packed."""
# Tuples, not lists: a handle may keep many, and tuples of plain values leave the
# garbage collector's books once it has looked at them.
VERSIONS = msgspec.msgpack.Decoder(tuple[tuple[bytes, str, int], ...])
"""Decodes a content-map value: the versions with one content."""
ENCODER = msgspec.msgpack.Encoder()
"""Encodes content-map values."""

Version = tuple[bytes, str, int]
"""An indexed version as a search meets it: node hash, node id, expiry (see :func:`expiry`)."""
Accept = Callable[[str, bytes, int], bool]
"""Whether a (node id, node hash, expiry) candidate may be returned: the snapshot check."""


@contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic garbage collector while a bulk of index entries is made.

    Indexing (or reading a map whole) makes hundreds of thousands of small
    objects and no reference cycles; the collections they trigger walk the whole
    heap for nothing (a tenth of a rebuild's time). Collection resumes as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def expiry(when: datetime | None) -> int:
    """An expiry time as microseconds since 1970 (exact), :data:`NEVER` for None.

    The index keeps each version's expiry, so a search can turn expired versions
    away without reading them.
    """
    return NEVER if when is None else micros(when)


class Stats(msgspec.Struct, frozen=True):
    """The running totals BM25 needs, and the next document number to give."""

    docs: int = 0
    words: int = 0
    next: int = 0


def damaged(what: str, exc: Exception) -> CorruptObject:
    """The error for a damaged part of the index (``what``), saying how to rebuild it."""
    return CorruptObject(
        f"the search index is damaged ({what}: {exc}); run 'mnemo reindex' to rebuild it from the memories"
    )


class Postings:
    """One tenant's lexical index: the ``recall`` keyspace's d, r, t, c, n and l families."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def _term_key(self, word: str, segment: int) -> bytes:
        return self.scope + TERM + word.encode() + b"\x00" + segment.to_bytes(4, "big")

    def _summary_key(self, word: str) -> bytes:
        return self.scope + SUMMARY + word.encode() + b"\x00"

    def number_key(self, number: int) -> bytes:
        """The key of a document-number record."""
        return self.scope + NUMBER + number.to_bytes(4, "big")

    # -- reading -----------------------------------------------------------------

    def stats(self, txn: ReadTxn) -> Stats:
        """The tenant's totals (zeros before anything is indexed)."""
        data = txn.get(Space.RECALL, self.scope + STATS)
        if data is None:
            return Stats()
        try:
            return Stats(*_STATS.unpack(data))
        except struct.error as exc:
            raise damaged("its totals", exc) from None

    def has_totals(self, txn: ReadTxn) -> bool:
        """Whether totals are written (every layout writes them as soon as it indexes)."""
        return txn.get(Space.RECALL, self.scope + STATS) is not None

    def any_document(self, txn: ReadTxn) -> bool:
        """Whether any version is indexed."""
        return next(iter(txn.scan(Space.RECALL, self.scope + DOC)), None) is not None

    def document(self, txn: ReadTxn, oid: bytes) -> tuple[int, bytes, int] | None:
        """``(document number, content hash, expiry)`` of an indexed version, or None."""
        data = txn.get(Space.RECALL, self.scope + DOC + oid)
        return None if data is None else _document(data)

    def every_document(self, txn: ReadTxn) -> Iterator[tuple[bytes, tuple[int, bytes, int]]]:
        """``(node hash, (document number, content hash, expiry))`` of every indexed version, one scan.

        Raises:
            CorruptObject: a damaged document record.
        """
        prefix = self.scope + DOC
        for key, data in txn.scan(Space.RECALL, prefix):
            yield key[len(prefix) :], _document(data)

    def indexed(self, txn: ReadTxn, oids: list[bytes]) -> set[bytes]:
        """Those of ``oids`` that are indexed, read at once (one round trip on PostgreSQL)."""
        found = txn.get_many(Space.RECALL, [self.scope + DOC + oid for oid in oids])
        return {oid for oid, data in zip(oids, found, strict=True) if data is not None}

    def documents(self, txn: ReadTxn) -> Iterator[bytes]:
        """The node hash of every indexed version."""
        prefix = self.scope + DOC
        for key, _ in txn.scan(Space.RECALL, prefix):
            yield key[len(prefix) :]

    def numbered(self, txn: ReadTxn, number: int) -> Version | None:
        """The indexed version with this document number, or None."""
        data = txn.get(Space.RECALL, self.number_key(number))
        return _version(data) if data is not None else None

    def every_number(self, txn: ReadTxn) -> Iterator[tuple[int, Version]]:
        """Every document number and its version, in number order."""
        prefix = self.scope + NUMBER
        for key, data in txn.scan(Space.RECALL, prefix):
            yield int.from_bytes(key[len(prefix) :], "big"), _version(data)

    def number_records(self, txn: ReadTxn) -> tuple[list[bytes], list[bytes]]:
        """Every document-number record undecoded, in number order: keys and values.

        A key is the number (u32, big-endian); a value the node hash, the expiry
        (i64, big-endian) and the node id (UTF-8): see :data:`NUMBER_HEAD`. For
        reading the map whole into arrays (see :mod:`mnemosyne.recall.names`).
        """
        prefix = self.number_key(0)[:-4]
        keys: list[bytes] = []
        values: list[bytes] = []
        for key, value in txn.scan(Space.RECALL, prefix):
            keys.append(key[len(prefix) :])
            values.append(value)
        return keys, values

    def document_records(self, txn: ReadTxn) -> list[bytes]:
        """Every document record's value undecoded, in node hash order.

        A value is the document number (u32), the expiry (i64), both big-endian,
        and the content hash: :data:`DOC_SIZE` bytes.
        """
        return [value for _, value in txn.scan(Space.RECALL, self.scope + DOC)]

    def term_segments(self, txn: ReadTxn, word: str) -> Iterator[bytes]:
        """The packed postings of every segment of ``word``."""
        for _, value in txn.scan(Space.RECALL, self.scope + TERM + word.encode() + b"\x00"):
            yield value

    def term_segment(self, txn: ReadTxn, word: str, segment: int) -> bytes | None:
        """The packed postings of one segment of ``word``, or None."""
        return txn.get(Space.RECALL, self._term_key(word, segment))

    def summary(self, txn: ReadTxn, word: str) -> npt.NDArray[np.uint32] | None:
        """``word``'s segment summaries as rows of (segment, rows, highest tf, lowest length).

        None when the word has none: it is in no segment, or the index predates
        summaries (layout 3, which a read-only handle may still search).
        """
        data = txn.get(Space.RECALL, self._summary_key(word))
        if data is None:
            return None
        if len(data) % SUMMARY_BYTES:
            raise damaged("a segment summary", ValueError(f"{len(data)} bytes is no whole number of rows"))
        return np.frombuffer(data, dtype="<u4").reshape(-1, SUMMARY_FIELDS)

    def every_segment(self, txn: ReadTxn) -> Iterator[tuple[bytes, bytes]]:
        """Every postings key (after the scope and tag) and its packed rows."""
        prefix = self.scope + TERM
        for key, value in txn.scan(Space.RECALL, prefix):
            yield key[len(prefix) :], value

    def last_change(self, txn: ReadTxn) -> int:
        """The sequence number of the change log's last entry (0 when empty)."""
        return last_number(txn, Space.RECALL, self.scope + CHANGES)

    def changes_since(self, txn: ReadTxn, seq: int) -> Iterator[bytes]:
        """The change log's entries after ``seq``: content hashes whose versions changed, or ``*``."""
        prefix = self.scope + CHANGES
        for _, change in txn.scan(Space.RECALL, prefix, start=prefix + (seq + 1).to_bytes(8, "big")):
            yield change

    def versions_with_content(self, txn: ReadTxn, chash: bytes) -> tuple[Version, ...]:
        """Every indexed version whose content hashes to ``chash``, by node hash."""
        data = txn.get(Space.RECALL, self.scope + CONTENT + chash)
        return _decode_versions(data) if data is not None else ()

    def every_content(self, txn: ReadTxn) -> Iterator[tuple[bytes, tuple[Version, ...]]]:
        """Every content hash with its versions."""
        prefix = self.scope + CONTENT
        for key, data in txn.scan(Space.RECALL, prefix):
            yield key[len(prefix) :], _decode_versions(data)

    # -- writing -----------------------------------------------------------------

    def put_stats(self, txn: WriteTxn, found: Stats) -> None:
        """Write the totals."""
        txn.put(Space.RECALL, self.scope + STATS, _STATS.pack(found.docs, found.words, found.next))

    def restart_log(self, txn: WriteTxn) -> None:
        """Replace the change log by one ``*`` entry (handles then forget every name).

        Erasure comes through here rather than logging the content's hash: a content
        hash confirms a guessed text, and no entry may name erased content, including
        entries written when it was indexed.
        """
        end = self.last_change(txn)
        prefix = self.scope + CHANGES
        for key in [key for key, _ in txn.scan(Space.RECALL, prefix)]:
            txn.discard(Space.RECALL, key)
        txn.put(Space.RECALL, prefix + (end + 1).to_bytes(8, "big"), b"*")

    def clear(self, txn: WriteTxn, *, keep_numbers: bool) -> None:
        """Drop the whole lexical index; its change log goes on counting, after a ``*``.

        ``keep_numbers`` leaves the document-number records for a rebuild to
        overwrite from 0 up (cheaper than deleting them first), which then drops
        those it did not reach with :meth:`drop_numbers`.
        """
        seq = self.last_change(txn)
        families = [DOC, TERM, SUMMARY, CONTENT, STATS, CHANGES, *([] if keep_numbers else [NUMBER])]
        for family in families:
            for key in [key for key, _ in txn.scan(Space.RECALL, self.scope + family)]:
                txn.discard(Space.RECALL, key)
        # Every handle must see the ``*``, so the log goes on from where it was.
        txn.put(Space.RECALL, self.scope + CHANGES + (seq + 1).to_bytes(8, "big"), b"*")

    def restart_after(self, txn: WriteTxn, seq: int) -> None:
        """Start the change log after ``seq`` with a ``*`` (the index was wiped whole)."""
        txn.put(Space.RECALL, self.scope + CHANGES + (seq + 1).to_bytes(8, "big"), b"*")

    def drop_numbers(self, txn: WriteTxn, end: int) -> None:
        """Drop the document-number records from the next number to give up to ``end``.

        A rebuild overwrites the records of the old index from 0 up instead of
        deleting them first; this drops those it did not reach.
        """
        for number in range(self.stats(txn).next, end):
            txn.discard(Space.RECALL, self.number_key(number))

    def remove(self, txn: WriteTxn, oid: bytes, node: Node) -> None:
        """Remove one version's document record, postings and content-map entry.

        Each segment holding one of its words is rewritten without it (or deleted
        when it held nothing else): no key or value of the index names it after.
        """
        scope = self.scope
        found = self.document(txn, oid)
        if found is None:
            chash = content_hash(node)
        else:
            number, chash, _ = found
            segment = number // SEGMENT
            found_words = document_words(node)
            for word in set(found_words):
                key = self._term_key(word, segment)
                value = txn.get(Space.RECALL, key)
                if value is None:
                    continue
                numbers = np.frombuffer(value, dtype="<u4")[::ROW]
                at = int(np.searchsorted(numbers, number))
                if at == len(numbers) or int(numbers[at]) != number:
                    continue
                rest = value[: at * ROW_BYTES] + value[(at + 1) * ROW_BYTES :]
                if rest:
                    txn.put(Space.RECALL, key, rest)
                else:
                    txn.discard(Space.RECALL, key)
                self._resummarize(txn, word, segment, rest)
            txn.discard(Space.RECALL, scope + DOC + oid)
            txn.discard(Space.RECALL, self.number_key(number))
            totals = self.stats(txn)
            left = Stats(max(totals.docs - 1, 0), max(totals.words - len(found_words), 0), totals.next)
            self.put_stats(txn, left)
        key = scope + CONTENT + chash
        data = txn.get(Space.RECALL, key)
        if data is not None:
            self.restart_log(txn)
            versions = [entry for entry in _decode_versions(data) if entry[0] != oid]
            if versions:
                txn.put(Space.RECALL, key, ENCODER.encode(versions))
            else:
                txn.discard(Space.RECALL, key)

    def _resummarize(self, txn: WriteTxn, word: str, segment: int, rest: bytes) -> None:
        """Summarize a rewritten segment again from what is left of it (no row: drop its summary).

        Computed afresh rather than left as an upper bound: nothing of the removed
        row (its tf, its length) stays behind, and the word's key goes with its
        last segment.
        """
        table = self.summary(txn, word)
        if table is None:
            return  # an index that predates summaries
        key = self._summary_key(word)
        keep = table[table[:, 0] != segment]
        if rest:
            rows = rows_of(rest)
            mine = np.array([[segment, len(rows), rows[:, 1].max(), rows[:, 2].min()]], dtype="<u4")
            keep = np.concatenate([keep, mine])
            keep = keep[np.argsort(keep[:, 0], kind="stable")]
        if len(keep):
            txn.put(Space.RECALL, key, keep.astype("<u4").tobytes())
        else:
            txn.discard(Space.RECALL, key)


def _document(data: bytes) -> tuple[int, bytes, int]:
    """A document record decoded: ``(document number, content hash, expiry)``."""
    try:
        number, expires = DOC_RECORD.unpack_from(data)
    except struct.error as exc:
        raise damaged("a document record", exc) from None
    return number, data[DOC_RECORD.size :], expires


def _version(data: bytes) -> Version:
    try:
        return data[:32], data[40:].decode(), EXPIRY.unpack_from(data, 32)[0]
    except (UnicodeDecodeError, struct.error) as exc:
        raise damaged("a document number record", exc) from None


def _decode_versions(data: bytes) -> tuple[Version, ...]:
    try:
        return VERSIONS.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise damaged("the content map", exc) from None


def rows_of(value: bytes) -> npt.NDArray[np.uint32]:
    """A segment's packed postings as rows of (document, tf, length)."""
    if len(value) % ROW_BYTES:
        raise damaged("a postings segment", ValueError(f"{len(value)} bytes is no whole number of rows"))
    return np.frombuffer(value, dtype="<u4").reshape(-1, ROW)


def readable_queue(view: View, postings: Postings) -> Iterator[tuple[bytes, Node]]:
    """Queued versions not indexed yet (commits queue without looking) and still stored."""
    for oid in view.stores.queue.queued(view.txn):
        if postings.document(view.txn, oid) is not None:
            continue  # indexed already: its postings count, not a second copy
        try:
            node = view.node(oid)
        except NotFound:
            continue
        yield oid, node
