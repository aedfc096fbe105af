"""Commands that read claims and valid time: ``facts``, ``timeline``, ``contradictions``.

A claim says ``subject predicate = value`` from ``valid_from`` (until
``valid_to``, if known). Claims on one (subject, predicate) under different ids
form its timeline; each is in force until the next one starts. These commands
open the store read-only.
"""

from typing import Annotated

import typer

from mnemosyne import Claim, Node

from .render import claim_text, compact, emit, provenance_text, say, short, when
from .state import AsOfOpt, AtOpt, VerifiedWithinOpt, state, time_or_none, window_or_none

SubjectArg = Annotated[str, typer.Argument(metavar="SUBJECT", help="Whom or what the claims are about.")]


def facts(
    ctx: typer.Context,
    subject: SubjectArg,
    predicate: Annotated[
        str | None,
        typer.Argument(
            metavar="PREDICATE", help="One attribute (default: every attribute).", show_default=False
        ),
    ] = None,
    valid_at: Annotated[
        str | None,
        typer.Option(
            "--valid-at",
            metavar="TIME",
            help="The world time asked about (default: now). RFC 3339; a bare date is midnight UTC.",
            show_default=False,
        ),
    ] = None,
    as_of: AsOfOpt = None,
    at: AtOpt = None,
    verified_within: VerifiedWithinOpt = None,
) -> None:
    """Show the claims on SUBJECT in force at a valid time.

    One claim per predicate: the one that started last, not after --valid-at,
    unless its own valid_to has passed. Two claims on one predicate are shown
    while they contradict each other (kept on purpose, or left by a merge).
    --as-of asks what the store believed then; --valid-at what held in the world.

    Human output: predicate = value, valid interval, id, short hash, provenance.
    JSON Lines: one fact each: {"id", "node", "commit", "effective_from",
    "effective_to", "supersedes", "confirmed_at"}, "commit" the commit that
    recorded it, "confirmed_at" when it was last confirmed (written or verified).

    \b
    Example:
      mnemo facts mira passport_deadline --valid-at 2026-06-04
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    found = repo.facts(
        subject,
        predicate,
        valid_at=time_or_none(valid_at),
        as_of=time_or_none(as_of),
        at=at,
        verified_within=window_or_none(verified_within),
    )
    for fact in found:
        if settings.json:
            emit(fact)
        else:
            say(claim_text(fact.node))


def timeline(
    ctx: typer.Context,
    subject: SubjectArg,
    predicate: Annotated[str, typer.Argument(metavar="PREDICATE", help="The attribute.")],
    as_of: AsOfOpt = None,
    at: AtOpt = None,
) -> None:
    """Show every claim on SUBJECT PREDICATE, ordered by valid_from.

    Each claim is effective from its valid_from until the earlier of its own
    valid_to and the next claim's valid_from. "supersedes" names the claim it
    replaced: the one just before it, recorded earlier, that it cut short. A
    late-arriving claim that slots in before the others supersedes nothing.

    Human output: a table of effective interval, value, id, short hash, the
    commit that recorded it and when, and what it supersedes.
    JSON Lines: one fact each (as for facts).
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    found = repo.timeline(subject, predicate, as_of=time_or_none(as_of), at=at)
    if settings.json:
        for fact in found:
            emit(fact)
        return
    if not found:
        return
    rows = [("FROM", "TO", "VALUE", "ID", "HASH", "COMMIT", "RECORDED", "SUPERSEDES")]
    for fact in found:
        rows.append(
            (
                when(fact.effective_from),
                when(fact.effective_to),
                _value_text(fact.node),
                fact.id,
                short(fact.node.hash),
                short(fact.commit.id),
                when(fact.commit.record_time),
                fact.supersedes or "-",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _value_text(node: Node) -> str:
    """A claim's value as compact JSON."""
    return compact(node.content.value) if isinstance(node.content, Claim) else compact(None)


def contradictions(
    ctx: typer.Context,
    rev: Annotated[
        str | None,
        typer.Argument(metavar="REV", help="The revision to look at (default: HEAD).", show_default=False),
    ] = None,
) -> None:
    """List the open contradictions: merged claims that disagree.

    A merge that brings together claims on one (subject, predicate) with
    different values over overlapping valid time records a contradiction. It
    stays open (and facts shows both claims) until a commit corrects or removes
    one of them.

    JSON Lines: {"subject", "predicate", "claims": [node, ...], "record"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    for found in repo.contradictions(at=rev):
        if settings.json:
            emit(found)
            continue
        say(f"{found.subject} {found.predicate}:")
        for node in found.claims:
            claim = node.content
            value = compact(claim.value) if isinstance(claim, Claim) else compact(None)
            start = when(claim.valid_from) if isinstance(claim, Claim) else "-"
            say(
                f"  {node.id}  {short(node.hash)}  = {value} from {start}  {provenance_text(node.provenance)}"
            )
