"""Claims and valid time for one tenant: facts in force, timelines, and how a timeline changed.

A claim says a subject's predicate holds a value over a valid-time interval; these
reads judge which claims are in force at a time, read in the snapshot a
revision (or a branch as of a record time) names. See :class:`Repo` and ADR 7.
"""

from __future__ import annotations

from datetime import timedelta

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput
from mnemosyne.history import queries
from mnemosyne.history.revisions import Rev
from mnemosyne.model.results import Fact, TimelineChange
from mnemosyne.model.times import TimeLike, as_time
from mnemosyne.model.validation import check_limit, check_window


class ClaimsService:
    """``facts``, ``timeline`` and ``timeline_history`` of one tenant (``Repo``'s, delegated)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def facts(
        self,
        subject: str,
        predicate: str | None = None,
        *,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        at: Rev | None = None,
        verified_within: timedelta | None = None,
    ) -> list[Fact]:
        """The claims in force on ``subject`` at valid time ``valid_at``, as facts.

        One claim per predicate: the one with the latest ``valid_from`` not after
        ``valid_at``, unless its own ``valid_to`` has passed. Two claims are returned
        for one predicate only when they start together with different values and
        were kept on purpose (``on_claim_conflict="keep"``), or a merge left them
        contradicting each other. Each fact carries its node, the commit that
        recorded it and its effective interval.

        Args:
            subject: whose facts.
            predicate: one attribute, or None for all of the subject's.
            valid_at: the world time asked about (default: now, by the store's clock).
            as_of: read the branch as it was at this record time ("what did we believe").
            at: a revision to read instead of HEAD.
            verified_within: leave out facts last confirmed (written, or verified
                with :meth:`verify`) longer ago than this before ``as_of`` (else now).
                Each fact's ``confirmed_at`` says when, with or without it.

        Raises:
            InvalidInput: an empty ``subject`` or ``predicate`` (no claim has one), a bad time.
        """
        _check_claim_key(subject, "subject")
        if predicate is not None:
            _check_claim_key(predicate, "predicate")
        when = as_time(as_of, "as_of")
        world = as_time(valid_at, "valid_at")
        check_window(verified_within)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            if tip is None:
                return []
            now = handle.judged_at(when)
            since = now - verified_within if verified_within is not None else None
            return queries.facts(view, tip, subject, predicate, world or now, now, since)

    def timeline(
        self, subject: str, predicate: str, *, as_of: TimeLike | None = None, at: Rev | None = None
    ) -> list[Fact]:
        """Every claim on one (subject, predicate), ordered by ``valid_from``.

        Each comes with the commit that recorded it, its effective interval and the
        claim it superseded in valid time.
        """
        _check_claim_key(subject, "subject")
        _check_claim_key(predicate, "predicate")
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            if tip is None:
                return []
            return queries.timeline(view, tip, subject, predicate, handle.judged_at(when))

    def timeline_history(
        self,
        subject: str,
        predicate: str,
        *,
        as_of: TimeLike | None = None,
        at: Rev | None = None,
        limit: int | None = None,
    ) -> list[TimelineChange]:
        """How one (subject, predicate) timeline changed along a branch's history, oldest first.

        One entry per commit on the first-parent line of ``at`` (default: HEAD)
        where the claims on the attribute differ from that commit's first parent:
        a commit that wrote, corrected or removed one, or a merge that brought
        claims in. Commits that reached the branch by a fast-forward, a pull or a
        clone are part of its history and count where they were made. Each entry
        holds the commit, the timeline there (what :meth:`timeline` with
        ``at=`` that commit returns; expiry is judged at ``as_of`` when given)
        and the contradictions on the attribute still open there, whose claims
        both stand in that timeline.

        Args:
            subject: whose claims.
            predicate: which attribute.
            as_of: read the branch as it was at this record time.
            at: a revision to read instead of HEAD.
            limit: only the newest ``limit`` entries; the walk stops there.

        Raises:
            InvalidInput: an empty subject or predicate, or a ``limit`` that is not a
                non-negative integer.
            NotFound: ``at`` names nothing, or did not exist yet at ``as_of``.
        """
        _check_claim_key(subject, "subject")
        _check_claim_key(predicate, "predicate")
        check_limit(limit)
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
        if tip is None or limit == 0:
            return []
        return queries.timeline_history(handle.read, tip, subject, predicate, handle.judged_at(when), limit)


def _check_claim_key(value: object, name: str) -> None:
    """Refuse a subject or predicate no claim can have: asking for it is a mistake, not "no facts"."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{name} must be a non-empty string (as every claim's {name} is)")
