"""Moving history between two stores by hash: the sending side's objects the receiving side lacks.

One transfer copies what the receiving tenant lacks of the history some tips
reach, then moves refs there. The two sides are :class:`Sender` and
:class:`Destination`: the same steps run whether both are open in this process
(:class:`LocalSender`, :class:`LocalDestination`) or one is a served store
reached over HTTP (:mod:`mnemosyne.admin.http_remote`), each step a few
batched questions, never one per commit or object. Every write is one of the
receiving store's own transactions, so a transfer killed at any point leaves
both stores consistent and running it again completes it:

1. **Have/want.** The receiver names the commits it surely has (its refs'
   tips) and the versions it erased. The sender walks its commit graph from the
   tips, newest generation first, and stops where the receiver's tips reach:
   what is left are the candidates, of which the receiver keeps those it has not
   indexed (its commit graph holds only commits whose whole history is stored).
   A no-op transfer reads one entry per tip.
2. **Redactions.** Every redaction record of the sender the receiver lacks is
   applied first: the receiver erases those versions' bytes (and what its
   derived indexes hold of them, as ``forget`` does) and keeps the record. The
   receiver never stores a version it has a redaction record for, so erasure
   travels one way only: bytes never come back.
3. **Objects.** For each missing commit the sender compares its tree with its
   parents' trees, which the receiver has or is about to have, descending only
   into chunks that differ; the receiver keeps the ids it lacks, and the sender
   streams them, children before parents (nodes, then tree chunks bottom-up,
   contradiction records, then the commit, commits parents first), in
   transactions of at most :data:`BATCH` objects. Every object's bytes are
   hashed on arrival and must match their id. With the other side in another
   process, the history goes in parts (:data:`PLAN`, :data:`PLAN_THERE`
   commits), one part planned while the other side stores the one before, and
   the receiver compares each commit with its first parent as it stores it
   (:class:`~mnemosyne.admin.receiving.Received`). What the receiver holds never
   prunes the walk, only the list, so objects an interrupted run left behind
   are skipped and a ``gc`` between runs loses nothing. Objects of an
   interrupted transfer are unreachable until the refs move, so ``gc`` collects
   them after its grace period if no rerun comes.
4. **Indexes and refs**, in one transaction: the new commits enter the commit
   graph, change and claim indexes (computed by the receiver, never copied), their
   versions are queued for recall, and the caller's ref moves run last
   (compare-and-swap, reflogged). Derived indexes are rebuilt, never received.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, closing
from typing import Protocol, TypeVar

import msgspec

from mnemosyne.admin.receiving import Objects, Received, apply_redactions, index_commits, store_objects
from mnemosyne.admin.sending import candidates, plan_objects
from mnemosyne.errors import NotFound
from mnemosyne.index.view import View, WriteView
from mnemosyne.store.tree_diff import Change

T = TypeVar("T")


BATCH = 20_000
"""Objects written per transaction of the receiving store (bounded work to redo after a crash)."""

QUESTION = 50_000
"""Ids asked about at once (whether the receiver lacks them): bounded requests over HTTP."""

PLAN = 256
"""Commits planned at once for a receiver in another process (a push over HTTP), which
stores one part while this process plans the next (one in this process takes them all)."""

PLAN_THERE = 1024
"""Commits a sender in another process (a fetch over HTTP) is asked to plan at once: it
plans the next part while this process stores one; each part is a request and a
transaction more, so larger parts than a push's."""


class Receiver(Protocol):
    """One tenant of the receiving store, as a transfer sees it: a way to read and to write.

    The API's tenant handle is one: every transaction it opens checks first that
    the tenant is still the one it was bound to.
    """

    def read(self) -> AbstractContextManager[View]:
        """A view of one snapshot of the tenant."""
        ...

    def write(self, fn: Callable[[WriteView], T]) -> T:
        """Run ``fn`` in one write transaction of the tenant (it may run again)."""
        ...


class Survey(msgspec.Struct, frozen=True, kw_only=True):
    """What the receiving side tells a sender first.

    Attributes:
        tips: commits it has indexed (the tips of its refs): the sender's walk stops there.
        erased: ids of the versions it holds redaction records for: never sent.
    """

    tips: list[bytes]
    erased: frozenset[bytes]


class Offer(msgspec.Struct, frozen=True, kw_only=True):
    """What the sending side offers, given a :class:`Survey`.

    Attributes:
        head: the sender's current branch.
        branches: ``(name, tip)`` of every branch of the sender with commits, by name.
        commits: ``(id, parents)`` of the candidates, parents first: the commits the
            tips reach that the receiver's tips do not (it may have some of them).
        redactions: ``(id, stored record)`` of the sender's redaction records the receiver lacks.
    """

    head: str
    branches: list[tuple[str, bytes]]
    commits: list[tuple[bytes, tuple[bytes, ...]]]
    redactions: list[tuple[bytes, bytes]]


class Sender(Protocol):
    """The side history comes from."""

    def offer(self, tips: list[bytes] | None, have: list[bytes], erased: frozenset[bytes]) -> Offer:
        """The candidates for ``tips`` (None: every branch) given the receiver's ``have`` tips."""
        ...

    def objects(self, commits: list[bytes]) -> list[bytes]:
        """Ids of the objects ``commits`` add to their parents' trees, children before parents.

        Versions the sender erased are left out: it has no bytes to send.
        """
        ...

    def read(self, ids: list[bytes]) -> Iterator[Objects]:
        """The objects of ``ids``, in order, in as many parts as the sender sends them."""
        ...


class Destination(Protocol):
    """The side history goes to."""

    def survey(self) -> Survey:
        """The receiver's tips and erased versions."""
        ...

    def lacking_commits(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` the receiver has not indexed."""
        ...

    def lacking(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` the receiver does not store."""
        ...

    def redact(self, records: list[tuple[bytes, bytes]]) -> int:
        """Apply redaction records (erasing those versions there); how many were new there."""
        ...

    def store(self, objects: Objects) -> tuple[int, int]:
        """Write objects, each hashed on arrival; ``(objects written, bytes)`` confirmed so far.

        A destination in another process may still be writing some when this
        returns (:meth:`flush` waits for them); each write is still one
        transaction there, and an error of one surfaces at the next call.
        """
        ...

    def flush(self) -> tuple[int, int]:
        """Wait for the objects still being written; ``(objects written, bytes)`` of those."""
        ...


class Sent:
    """What a transfer did on the receiving side.

    Attributes:
        commits: commits the receiver indexed.
        objects: objects written (those an interrupted run wrote before are not counted again).
        bytes: their stored size.
        redactions: redaction records received.
    """

    def __init__(self) -> None:
        self.commits = 0
        self.objects = 0
        self.bytes = 0
        self.redactions = 0


class Exchange(msgspec.Struct, frozen=True, kw_only=True):
    """A transfer up to its last step: what was sent, and the commits the receiver must index.

    Attributes:
        sent: counts so far (``commits`` is set by the last step).
        commits: the commits sent, parents first, for the receiver to index.
        offer: what the sender offered (its head and branches).
    """

    sent: Sent
    commits: list[bytes]
    offer: Offer


def transfer(
    source: View, target: Receiver, tips: Iterable[bytes], move: Callable[[WriteView], T]
) -> tuple[Sent, T]:
    """Send what ``target`` lacks of the history ``tips`` reach in ``source``, then run ``move``.

    Both sides open in this process. ``source`` is one snapshot of the sending
    tenant, held for the whole transfer; ``move`` runs in the final transaction
    of the receiver, after the new commits are indexed, and moves its refs (it
    may raise to refuse: the objects stay, unreachable, and nothing else changes).

    Raises:
        CorruptObject: an object's bytes do not match its id, or the sender lacks
            an object its history names (and has no redaction record for it).
        InvalidInput: an object of a newer format, or a malformed redaction record.
    """
    destination = LocalDestination(target)
    done = exchange(LocalSender(source), destination, list(tips))
    done.sent.commits, moved = destination.finish(done.commits, move)
    return done.sent, moved


def exchange(sender: Sender, destination: Destination, tips: list[bytes] | None) -> Exchange:
    """Steps 1 to 3 of a transfer: have/want, redactions, objects (``tips`` None: every branch).

    The caller runs the last step on the destination, with the ref moves it wants.
    """
    survey = destination.survey()
    offer = sender.offer(tips, survey.tips, survey.erased)
    sent = Sent()
    erased = set(survey.erased)
    if offer.redactions:
        sent.redactions = destination.redact(offer.redactions)
        erased.update(key for key, _ in offer.redactions)
    candidates = [oid for oid, _ in offer.commits]
    lacking = _ask(destination.lacking_commits, candidates)
    commits = [oid for oid in candidates if oid in lacking]
    step = len(commits) or 1
    if isinstance(sender, LocalSender) and isinstance(destination, LocalDestination):
        # Both in this process: the trees the sender compares while planning are the
        # ones the destination would compare to index the commits (ids name content).
        # Elsewhere nobody takes them: a sender over HTTP, or to one, does not compute
        # them, and the receiver compares the trees as their chunks arrive (Received).
        sender.diffs = destination.diffs = {}
    else:
        # The other side is another process (over HTTP): it stores one part of the
        # history while this process plans the next (a push), or plans the next while
        # this process stores one (a fetch): two processes at work, not one.
        step = PLAN if isinstance(sender, LocalSender) else PLAN_THERE
    parts = [commits[first : first + step] for first in range(0, len(commits), step)]
    # Closed on the way out, error or not: a request a thread sent ahead is answered first.
    with closing(_planned(sender, parts)) as plans:
        for ids in plans:
            # Versions erased on the receiving side are never sent, nor asked about.
            planned = [oid for oid in ids if oid not in erased]
            absent = _ask(destination.lacking, planned)
            wanted = [oid for oid in planned if oid in absent]
            for start in range(0, len(wanted), BATCH):
                for objects in sender.read(wanted[start : start + BATCH]):
                    written, size = destination.store(objects)
                    sent.objects += written
                    sent.bytes += size
    written, size = destination.flush()
    sent.objects += written
    sent.bytes += size
    return Exchange(sent=sent, commits=commits, offer=offer)


def _planned(sender: Sender, parts: list[list[bytes]]) -> Generator[list[bytes], None, None]:
    """The objects each part of the commits adds; a sender in another process plans the next meanwhile."""
    if isinstance(sender, LocalSender):  # its snapshot is a transaction of this thread
        for part in parts:
            yield sender.objects(part)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-plan") as planning:
        ahead = [planning.submit(sender.objects, part) for part in parts[:1]]
        for i in range(len(parts)):
            ids = ahead.pop().result()
            if i + 1 < len(parts):
                ahead.append(planning.submit(sender.objects, parts[i + 1]))
            yield ids


def _ask(question: Callable[[list[bytes]], set[bytes]], ids: list[bytes]) -> set[bytes]:
    found: set[bytes] = set()
    for start in range(0, len(ids), QUESTION):
        found |= question(ids[start : start + QUESTION])
    return found


# -- the sending side ---------------------------------------------------------------


class LocalSender:
    """A sender open in this process: one snapshot of its tenant, held for the whole transfer."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.planned: set[bytes] = set()
        """The ids :meth:`objects` listed so far: a history planned in parts lists each once."""
        self._erased: set[bytes] | None = None
        self.diffs: dict[bytes, list[Change]] | None = None
        """Where planning keeps what each commit changed against its first parent (see
        :func:`plan_objects`), for a receiver in this process; None (a served store
        planning for a client, a push over HTTP): not computed, as nobody would use them."""

    def offer(self, tips: list[bytes] | None, have: list[bytes], erased: frozenset[bytes]) -> Offer:
        """The candidates for ``tips`` (None: every branch), stopping where ``have`` reaches."""
        view = self.view
        branches = list(view.refs.branches(view.txn))
        wanted = [tip for _, tip in branches] if tips is None else tips
        for tip in wanted:
            if not view.graph.has(view.txn, tip):  # asked for by a client: not a commit of this store
                raise NotFound(f"commit {tip.hex()[:12]} is not here")
        common = [oid for oid in have if view.graph.has(view.txn, oid)]
        redactions = [(key, data) for key, data in view.objects.redactions(view.txn) if key not in erased]
        return Offer(
            head=view.refs.head_branch(view.txn),
            branches=branches,
            commits=candidates(view, wanted, common),
            redactions=redactions,
        )

    def objects(self, commits: list[bytes]) -> list[bytes]:
        """Ids of the objects ``commits`` add to their parents' trees, children before parents.

        What each commit changed is kept in :attr:`diffs` on the way, if it is set (see
        :func:`plan_objects`).
        """
        view = self.view
        if self._erased is None:  # erased here: no bytes to send (read once for all the parts)
            self._erased = {key for key, _ in view.objects.redactions(view.txn)}
        return plan_objects(view, commits, self._erased, self.diffs, self.planned)

    def read(self, ids: list[bytes]) -> Iterator[Objects]:
        """The objects of ``ids``, read as the receiver writes them (one part)."""
        yield _Reading(self.view, ids)


class _Reading:
    """Objects read from a snapshot as they are iterated (again, if a write transaction retries)."""

    def __init__(self, view: View, ids: list[bytes]) -> None:
        self.view = view
        self.ids = ids

    def __iter__(self) -> Iterator[tuple[bytes, bytes | None]]:
        objects, txn = self.view.objects, self.view.txn
        for start in range(0, len(self.ids), 256):  # a round trip per 256 on PostgreSQL
            batch = self.ids[start : start + 256]
            yield from zip(batch, objects.raw_many(txn, batch), strict=True)


# -- the receiving side -------------------------------------------------------------


class LocalDestination:
    """A receiver open in this process: its tenant handle, one transaction per step.

    Args:
        receiver: the receiving tenant.
        received: where what stored commits changed is kept (a served store passes
            its tenant's, kept across requests; by default, this destination's own).
    """

    def __init__(self, receiver: Receiver, received: Received | None = None) -> None:
        self.receiver = receiver
        self.diffs: dict[bytes, list[Change]] | None = None
        """What commits changed, as a sender in this process found planning them (see
        :func:`exchange`); None: no such sender, this side compares them storing them."""
        self.received = Received() if received is None else received

    def survey(self) -> Survey:
        """The tips of every ref (branches and remote-tracking refs), and the versions erased."""
        with self.receiver.read() as view:
            tips = [tip for _, tip in view.refs.branches(view.txn)]
            tips += [tip for _, tip in view.refs.tracking(view.txn)]
            erased = frozenset(key for key, _ in view.objects.redactions(view.txn))
        return Survey(tips=list(dict.fromkeys(tips)), erased=erased)

    def lacking_commits(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` not indexed here."""
        with self.receiver.read() as view:
            return set(ids).difference(view.graph.indexed(view.txn, ids))

    def lacking(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` not stored here."""
        with self.receiver.read() as view:
            return {
                oid
                for oid, data in zip(ids, view.objects.raw_many(view.txn, ids), strict=True)
                if data is None
            }

    def redact(self, records: list[tuple[bytes, bytes]]) -> int:
        """Erase here what the sender erased, keeping its records; how many were new here."""
        return self.receiver.write(lambda view: apply_redactions(view, records))

    def store(self, objects: Objects) -> tuple[int, int]:
        """Write objects in one transaction, each hashed on arrival.

        Without a sender in this process, the commits among them are compared with
        their first parents on the way (see :class:`Received`).
        """
        compare = self.diffs is None
        written, size, found = self.receiver.write(functools.partial(store_objects, objects, compare))
        if found:
            self.received.keep(found)  # only once the transaction holding their objects committed
        return written, size

    def flush(self) -> tuple[int, int]:
        """Nothing to wait for: each :meth:`store` wrote its objects before it returned."""
        return 0, 0

    def finish(self, commits: list[bytes], move: Callable[[WriteView], T]) -> tuple[int, T]:
        """Index ``commits`` (parents first), then run ``move``: one transaction."""
        known = self.diffs if self.diffs is not None else self.received.known(commits)

        def work(view: WriteView) -> tuple[int, T]:
            indexed = index_commits(view, commits, known)
            return indexed, move(view)

        done = self.receiver.write(work)
        self.received.drop(known)
        return done
