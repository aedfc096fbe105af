"""What a transaction on PostgreSQL reads when it begins: learned from the transactions before it (ADR 31).

A transaction is begun by one message, ``BEGIN …; EXECUTE (one statement reading
the erasure epoch, rows and first pages of scans)``, read in the snapshot it
opens, so whatever it returns is exactly what asking later would. What goes in
is what the last few transactions of the same kind (read or write) asked the
server for first:

- a row by key (the tenant binding, ``HEAD``, a branch's ref);
- a row whose key ends with the value of an earlier one (the commit graph's
  entry of whatever commit the branch's ref names), or with that value spelled
  in hex digits (``refs/heads/<commit id>``: whether a commit id given as text,
  such as a commit's expected parent, is also a branch's name): the key is
  computed by the server in the same statement, so a ref that moved since is
  followed;
- the first page of a scan (the end of a reflog, of the recall queue).

A wrong guess costs a few rows in the same message, never a round trip. The
statement is prepared on a connection by a simple-protocol message (after the
``BEGIN``), its keys spelt in SQL as hex digits the server decodes; from then on
it runs as a bind of the prepared statement, its keys binary parameters (the
``BEGIN`` before it in libpq's pipeline mode).
"""

from __future__ import annotations

import binascii
import hashlib
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from psycopg.pq.abc import PGresult

from mnemosyne.store.kv.base import Space

QUESTIONS = 8
"""How many questions a transaction reads ahead at most (and how many it records)."""

REMEMBERED = 4
"""How many of the last transactions of a kind the read-ahead draws on, newest first."""

FOLLOWED = 16
"""The shortest value whose end of a later key makes that key "follow" it (a commit id is 32 bytes)."""

FIRST_PAGE = 8
"""Rows a scan asks for first: many scans stop after one (the last entry of a log)."""

EXTENDED = 32
"""Shapes of named pages a statement keeps its extended forms for (see :meth:`Opening.with_pages`)."""

Key = tuple[Space, bytes]


@dataclass(frozen=True, slots=True)
class Get:
    """A row by its key."""

    space: Space
    key: bytes


@dataclass(frozen=True, slots=True)
class Follow:
    """A row keyed ``prefix`` + the value of ``source`` (when that row exists).

    ``hexed``: keyed ``prefix`` + the value in lowercase hex digits instead (a ref
    named after a commit id, as resolving a commit id given as text looks up).
    """

    space: Space
    prefix: bytes
    source: Get | Follow
    hexed: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    """The first page (:data:`FIRST_PAGE` rows) of a scan: its bounds, each present or not, open or not."""

    space: Space
    reverse: bool
    low: bytes | None
    low_open: bool
    high: bytes | None
    high_open: bool


Question = Get | Follow | Page


def _hex(value: bytes) -> str:
    return f"decode('{value.hex()}', 'hex')"


class Opening:
    """The one statement that reads ahead for a transaction, and how to read its answer.

    One statement, so it reads one snapshot even outside a transaction: the rows
    are columns, each scan's first page an array column of ``key:value`` in hex.
    It is prepared once per connection (``PREPARE``) and run with the keys as
    arguments (``EXECUTE``): planned afresh each time, it would cost the server
    about as much as the round trip. Values come back hex-encoded by the server
    (``encode``), whatever its ``bytea_output``.

    Args:
        questions: what to read ahead, each :class:`Follow` after its source.
        tables: the quoted table of each keyspace.
        epoch: the statement reading the erasure epoch.
    """

    def __init__(
        self,
        questions: tuple[Question, ...],
        tables: dict[Space, str],
        epoch: str,
        shaped: Opening | None = None,
    ) -> None:
        self.questions = questions
        self._tables = tables
        self._epoch = epoch
        self._extended: dict[tuple[tuple[object, ...], ...], Opening] = {}
        """Per shape of the pages a read names (:meth:`with_pages`): this statement extended by them."""
        self._rows = [q for q in questions if not isinstance(q, Page)]
        self._pages = [q for q in questions if isinstance(q, Page)]
        arguments = [_key_of(q) for q in self._rows]
        if shaped is None:
            number: dict[Question, int] = {question: at for at, question in enumerate(self._rows, start=1)}
            columns = [f"({epoch})"]
            columns += [f"encode({self._column(q, tables, number)}, 'hex')" for q in self._rows]
            for page in self._pages:
                columns.append(self._page(page, tables, arguments))
            select = f"SELECT {', '.join(columns)}"
            self.name = "mnemo_" + hashlib.blake2b(select.encode(), digest_size=10).hexdigest()
            """The prepared statement's name (from its text: a connection prepares each shape once)."""
            types = f"({', '.join(['bytea'] * len(arguments))})" if arguments else ""
            self.prepare = f"PREPARE {self.name}{types} AS {select}"
            """How to prepare it on a connection."""
        else:
            # The same text as ``shaped`` (questions of the same shapes, in order): its bounds only.
            arguments += [edge for page in self._pages for edge in (page.low, page.high) if edge is not None]
            self.name, self.prepare = shaped.name, shaped.prepare
        values = f"({', '.join(_hex(value) for value in arguments)})" if arguments else ""
        self.execute = f"EXECUTE {self.name}{values}"
        """How to run it with this opening's keys, in SQL (in the message that prepares it)."""
        self.arguments = tuple(arguments)
        """Its keys, each bound as a binary parameter when it runs prepared (no SQL to parse)."""

    def with_pages(self, pages: tuple[Page, ...]) -> Opening:
        """This statement reading the first pages of ``pages`` too (those it does not already).

        The statement's text depends on the pages' shapes alone (their bounds are
        arguments): it is made once per shape, and each call only spells its bounds.
        """
        extra = tuple(page for page in pages if page not in self.questions)
        if not extra:
            return self
        shape = tuple(
            (page.space, page.reverse, page.low is None, page.low_open, page.high is None, page.high_open)
            for page in extra
        )
        made = self._extended.get(shape)
        if made is None:
            if len(self._extended) >= EXTENDED:
                self._extended.clear()
            made = self._extended[shape] = Opening(self.questions + extra, self._tables, self._epoch)
            return made
        return Opening(self.questions + extra, self._tables, self._epoch, shaped=made)

    def _column(self, question: Get | Follow, tables: dict[Space, str], number: dict[Question, int]) -> str:
        table = tables[question.space]
        if isinstance(question, Get):
            return f"(SELECT v FROM {table} WHERE k = ${number[question]})"
        source = self._column(question.source, tables, number)
        if question.hexed:
            source = f"convert_to(encode({source}, 'hex'), 'UTF8')"
        return f"(SELECT v FROM {table} WHERE k = ${number[question]} || {source})"

    @staticmethod
    def _page(page: Page, tables: dict[Space, str], arguments: list[bytes]) -> str:
        """The array column of a page; its bounds join ``arguments``."""
        conditions = []
        for bound, is_open, strict, loose in (
            (page.low, page.low_open, ">", ">="),
            (page.high, page.high_open, "<", "<="),
        ):
            if bound is not None:
                arguments.append(bound)
                conditions.append(f"k {strict if is_open else loose} ${len(arguments)}")
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        order = "DESC" if page.reverse else "ASC"
        return (
            f"ARRAY(SELECT encode(k, 'hex') || ':' || encode(v, 'hex') FROM {tables[page.space]}{where} "
            f"ORDER BY k {order} LIMIT {FIRST_PAGE})"
        )

    def answers(
        self, result: PGresult
    ) -> tuple[int, dict[Key, bytes | None], dict[Page, list[tuple[bytes, bytes]]]]:
        """The epoch, the rows and the pages, from the statement's result (text format)."""
        epoch = int(_text(result.get_value(0, 0)))
        values: dict[Question, bytes | None] = {}
        known: dict[Key, bytes | None] = {}
        for column, question in enumerate(self._rows, start=1):
            cell = result.get_value(0, column)
            value = None if cell is None else binascii.unhexlify(cell)
            values[question] = value
            if isinstance(question, Get):
                known[question.space, question.key] = value
            else:
                source = values[question.source]
                if source is not None:  # no source row: no key to name, nothing learned
                    end = source.hex().encode() if question.hexed else source
                    known[question.space, question.prefix + end] = value
        pages: dict[Page, list[tuple[bytes, bytes]]] = {}
        for column, page in enumerate(self._pages, start=len(self._rows) + 1):
            # A text array of hex digits and ':' needs no quoting: "{k:v,k:v}", "{}" when empty.
            listed = _text(result.get_value(0, column))[1:-1]
            pages[page] = [
                (binascii.unhexlify(key), binascii.unhexlify(value))
                for key, value in (entry.split(b":") for entry in listed.split(b",") if entry)
            ]
        return epoch, known, pages


def _text(cell: bytes | None) -> bytes:
    assert cell is not None  # the epoch and a page are never NULL
    return cell


def _key_of(question: Get | Follow) -> bytes:
    return question.key if isinstance(question, Get) else question.prefix


def learned(asked: dict[Key | Page, bytes | None]) -> list[Question]:
    """A transaction's questions as the next one should ask them: keys ending with an earlier value follow it.

    ``asked`` holds the questions in the order first asked: rows by ``(keyspace,
    key)`` with the value each had, and first pages of scans (with None).
    """
    out: list[Question] = []
    answered: list[tuple[Get | Follow, bytes]] = []
    for asked_for, value in asked.items():
        kept: Question
        if isinstance(asked_for, Page):
            kept = asked_for
        else:
            space, key = asked_for
            kept = Get(space, key)
            for source, earlier in answered:
                if len(key) > len(earlier) and key.endswith(earlier):
                    kept = Follow(space, key[: -len(earlier)], source)
                    break
                spelt = earlier.hex().encode()
                if len(key) > len(spelt) and key.endswith(spelt):
                    kept = Follow(space, key[: -len(spelt)], source, hexed=True)
                    break
        out.append(kept)
        if value is not None and len(value) >= FOLLOWED and isinstance(kept, Get | Follow):
            answered.append((kept, value))
    return out


class ReadAhead:
    """What transactions of one kind read ahead: the questions of the last few, newest first."""

    def __init__(self, tables: dict[Space, str], epoch: str) -> None:
        self._tables = tables
        self._epoch = epoch
        self._recent: deque[tuple[Question, ...]] = deque(maxlen=REMEMBERED)
        self._repeats = 0
        self._opening = Opening((), tables, epoch)
        self._asked: dict[Key | Page, bytes | None] = {}
        self._learned: list[Question] = []
        # A served store ends transactions in many threads at once: one learns at a time
        # (unlocked, one's appendleft met another's walk over the deque: a 500 under load).
        self._lock = threading.Lock()

    @property
    def opening(self) -> Opening:
        """The statement the next transaction begins with."""
        return self._opening

    def learn_asked(self, asked: dict[Key | Page, bytes | None]) -> None:
        """Take a finished transaction's first questions (``Txn.asked``) into account.

        Reads at HEAD in a loop ask the same questions with the same answers each
        time: what :func:`learned` makes of them is worked out once.
        """
        with self._lock:
            if asked != self._asked:
                self._asked, self._learned = dict(asked), learned(asked)
            self._learn(self._learned)

    def learn(self, questions: Iterable[Question]) -> None:
        """Take a finished transaction's questions (from :func:`learned`) into account."""
        with self._lock:
            self._learn(questions)

    def _learn(self, questions: Iterable[Question]) -> None:
        latest = tuple(questions)
        if not latest:
            return
        if self._recent and latest == self._recent[0]:
            # The same transaction again (reads at HEAD in a loop): nothing to work out,
            # unless it has repeated long enough for the others to age out.
            self._repeats += 1
            if len(self._recent) == 1 or self._repeats < REMEMBERED:
                return
            self._recent.clear()
        self._repeats = 0
        self._recent.appendleft(latest)
        chosen: dict[Question, None] = {}
        for questions_of_one in self._recent:
            for question in questions_of_one:
                if len(chosen) >= QUESTIONS:
                    break
                _add(chosen, question)
        ordered = tuple(chosen)
        if ordered != self._opening.questions:
            self._opening = Opening(ordered, self._tables, self._epoch)


def _add(chosen: dict[Question, None], question: Question) -> None:
    """Add ``question`` after its sources (a follow's value can only be keyed once its source's is known)."""
    if isinstance(question, Follow):
        _add(chosen, question.source)
    chosen.setdefault(question)
