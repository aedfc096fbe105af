"""The served side of a transfer over HTTP: what a store answers to each step (ADR 34).

``mnemo serve`` routes ``POST /v1/tenants/{tenant}/transfer/{step}`` here
through :meth:`~mnemosyne.api.repo.Repo.answer_transfer`: the body is a
:mod:`~mnemosyne.admin.wire` message, the answer another. The steps are those of
:mod:`~mnemosyne.admin.transfer` with this tenant as the sender (a client
fetching) or as the destination (a client pushing), so a transfer over HTTP
keeps every guarantee of one in a process: objects hashed on arrival,
redactions first, refs moved last by compare-and-swap, and each step one
transaction of its own, so an interrupted transfer leaves the store consistent.
Which role each step needs is the server's to decide (its route table).
"""

from __future__ import annotations

import threading
import weakref

import msgspec

from mnemosyne.admin import wire
from mnemosyne.admin.receiving import Received
from mnemosyne.admin.sending import read_some
from mnemosyne.admin.transfer import LocalDestination, LocalSender
from mnemosyne.api._handle import Handle
from mnemosyne.api._ref_moves import move_branch
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.index.view import WriteView
from mnemosyne.model.reports import RefUpdate
from mnemosyne.store.refs import check_branch_name

_received: weakref.WeakKeyDictionary[Handle, Received] = weakref.WeakKeyDictionary()
"""Each served tenant's :class:`Received`: what its ``store`` steps compared, for ``finish``."""
_receiving = threading.Lock()


def _received_by(handle: Handle) -> Received:
    with _receiving:
        found = _received.get(handle)
        if found is None:
            found = _received[handle] = Received()
        return found


def answer(handle: Handle, step: str, request: bytes, *, author: str) -> bytes:
    """This tenant's answer to one step of a transfer (see :mod:`mnemosyne.admin.wire`).

    Raises:
        InvalidInput: an unknown step, or a body that is not its message.
        NotFound: a commit or object asked about that is not here.
        RefConflict: ``finish`` would move the branch backwards, without ``force``.
    """
    if step not in wire.STEPS:
        raise InvalidInput(f"no transfer step {step!r} (steps: {', '.join(wire.STEPS)})")
    message = wire.decode(request, wire.STEPS[step][0], "the request")
    return wire.encode(_answer(handle, step, message, author))


def _answer(handle: Handle, step: str, message: msgspec.Struct, author: str) -> msgspec.Struct:
    destination = LocalDestination(handle, _received_by(handle))
    if isinstance(message, wire.Want):
        with handle.read() as view:
            offer = LocalSender(view).offer(message.tips, message.have, frozenset(message.erased))
        return wire.OfferMessage(
            head=offer.head,
            branches=offer.branches,
            commits=[(oid, list(parents)) for oid, parents in offer.commits],
            redactions=offer.redactions,
        )
    if isinstance(message, wire.Plan):
        with handle.read() as view:
            return wire.Ids(ids=LocalSender(view).objects(message.commits))
    if isinstance(message, wire.Ids):
        with handle.read() as view:
            ids, data, erased = read_some(view, message.ids, wire.READ_LIMIT)
        return wire.ObjectBatch(ids=ids, data=data, erased=erased)
    if isinstance(message, wire.Empty):
        survey = destination.survey()
        return wire.SurveyMessage(tips=survey.tips, erased=sorted(survey.erased))
    if isinstance(message, wire.Lacking):
        commits = destination.lacking_commits(message.commits) if message.commits else set()
        objects = destination.lacking(message.objects) if message.objects else set()
        return wire.Lacking(
            commits=[oid for oid in message.commits if oid in commits],
            objects=[oid for oid in message.objects if oid in objects],
        )
    if isinstance(message, wire.Records):
        return wire.Counts(redactions=destination.redact(message.records))
    if isinstance(message, wire.ObjectBatch):
        if len(message.data) != len(message.ids):
            raise InvalidInput("ids and data must be as many")
        written, size = destination.store(list(zip(message.ids, message.data, strict=True)))
        return wire.Counts(objects=written, bytes=size)
    if isinstance(message, wire.Finish):
        move = message.move
        if move is not None:
            check_branch_name(move.branch)
        now = handle.now()

        def moving(view: WriteView) -> RefUpdate | None:
            if move is None:
                return None
            if not view.graph.has(view.txn, move.tip):
                raise NotFound(
                    f"commit {move.tip.hex()[:12]} is not here: it is sent before the branch moves"
                )
            who = move.author or author
            return move_branch(view, move.remote, move.branch, move.tip, move.force, now, who)

        indexed, moved = destination.finish(message.commits, moving)
        return wire.Finished(commits=indexed, ref=moved)
    raise AssertionError(f"unhandled transfer step {step}")  # every step's message is handled above
