"""Commands that make memory leave for real: ``forget`` and ``gc``.

``forget`` erases the bytes (content, provenance, meta) of node versions and
leaves an append-only redaction record (hash, id, time, author, reason); trees
and commits keep the hash, so history still verifies and shows the version as
redacted. ``gc`` removes objects no ref or retained reflog entry reaches, after
a grace period, and with ``--compact`` rewrites the store file so freed pages
(which LMDB does not scrub) no longer hold erased bytes.
"""

from datetime import timedelta
from typing import Annotated

import typer

from mnemosyne import GcReport, InvalidInput
from mnemosyne.model.defaults import EXPIRED_REASON
from mnemosyne.model.times import parse_duration

from .render import emit, erasure_text, note, say, short, when
from .state import AuthorOpt, author_or_default, state


def forget(
    ctx: typer.Context,
    node_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="ID...",
            help="The ids whose versions to erase (several: together, in one commit, all or none).",
            show_default=False,
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            metavar="R",
            help="Why: kept in the redaction record (required with ID).",
            show_default=False,
        ),
    ] = None,
    author: AuthorOpt = None,
    version: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="HASH",
            help="Erase only this version (a hash or a unique prefix of at least 4 hex characters).",
            show_default=False,
        ),
    ] = None,
    expired: Annotated[
        bool,
        typer.Option("--expired", help="Instead of ID: erase every node version past its expires_at."),
    ] = False,
) -> None:
    """Erase the content of ids' versions for real, leaving a redaction record.

    Deletes the content, provenance and meta of every version of ID on any
    branch (or only --version HASH, of one ID) and records hash, time, author
    and reason. Several ids are erased together, in one commit: an id with no
    versions exits 3 and erases none of them.
    Trees and commits keep the hash: history shows the version as redacted and
    reading it exits 3. The current branch drops ID in a new commit when its
    version there was erased. Ids are keys and stay. Versions erased before keep
    their first record. Freed pages keep old bytes until 'mnemo gc --now --compact'.

    With --expired (and no ID): erase every version past its expires_at.

    JSON: {"redactions": [{"id", "hash", "time", "author", "reason"}],
    "already_erased": [...], "commit": the commit that removed the ids from
    the current branch, or null}.
    """
    settings = state(ctx)
    if expired and (node_ids or version is not None):
        raise InvalidInput("forget --expired takes no ID and no --version")
    if not expired and not node_ids:
        raise InvalidInput("name the ID to forget, or pass --expired")
    if not expired and (reason is None or not reason.strip()):
        raise InvalidInput("give a --reason for erasing: it is kept in the redaction record")
    who = author_or_default(author)
    repo = settings.open(ctx)
    if not node_ids:
        report = repo.forget_expired(reason or EXPIRED_REASON, author=who)
    else:
        report = repo.forget(node_ids, reason or "", author=who, version=version)
    if settings.json:
        emit(report)
        return
    for record in report.redactions:
        stamp = when(record.time)
        say(f"erased {short(record.hash)}  {record.id}  {stamp}  {record.author}  {record.reason}")
    if report.commit is not None:
        note(f"removed from branch {repo.head} in commit {short(report.commit.id)}: {report.commit.message}")
    if report.redactions:
        note("freed pages may still hold the erased bytes until 'mnemo gc --now --compact'")
    elif not node_ids:
        note("nothing to erase: no version is past its expires_at")
    for record in report.already_erased:
        note(f"already erased: {short(record.hash)}  {record.id}  {erasure_text(record)}")


def gc(
    ctx: typer.Context,
    now: Annotated[
        bool, typer.Option("--now", help="No grace period: remove unreachable objects at once.")
    ] = False,
    grace: Annotated[
        str | None,
        typer.Option(
            "--grace",
            metavar="DURATION",
            help="How long an object must stay unreachable before it is removed (default 14d).",
            show_default=False,
        ),
    ] = None,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Then rewrite the store file without free pages (needs the store to itself).",
        ),
    ] = False,
    expire_reflog: Annotated[
        str | None,
        typer.Option(
            "--expire-reflog",
            metavar="DURATION",
            help="First prune reflog entries older than DURATION (as-of reads before then fail).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Remove objects no branch or retained reflog entry reaches, after a grace period.

    An unreachable object is remembered the first time gc finds it and removed
    by a later gc once it has been unreachable for the grace period (--now: at
    once). Reflogs are kept forever unless --expire-reflog prunes old entries
    (each ref keeps its newest). Reachable objects are never removed: expired
    nodes leave only through 'mnemo forget --expired'. --compact refuses (exit 2)
    while another process has the store open. DURATION: 14d, 12h, 30m, 0s, 1d12h.

    JSON: {"objects_removed", "bytes_removed", "commits_removed", "pending",
    "reflog_entries_removed", "compacted", "file_bytes_before", "file_bytes_after"}.
    """
    settings = state(ctx)
    if now and grace is not None:
        raise InvalidInput("give --now or --grace, not both")
    wait = timedelta(0) if now else parse_duration(grace, "--grace") if grace is not None else None
    horizon = parse_duration(expire_reflog, "--expire-reflog") if expire_reflog is not None else None
    repo = settings.open(ctx)
    if wait is None:
        report = repo.gc(compact=compact, expire_reflog=horizon)
    else:
        report = repo.gc(grace=wait, compact=compact, expire_reflog=horizon)
    if settings.json:
        emit(report)
        return
    for line in gc_text(report):
        say(line)


def gc_text(report: GcReport) -> list[str]:
    """What gc did, for people."""
    commits = report.commits_removed
    lines = [
        f"removed {report.objects_removed} objects ({commits} commit{'' if commits == 1 else 's'}), "
        f"{report.bytes_removed} bytes",
        f"kept {report.pending} unreachable objects until their grace period ends",
    ]
    if report.reflog_entries_removed:
        lines.append(f"pruned {report.reflog_entries_removed} reflog entries")
    if report.compacted and report.file_bytes_before is not None and report.file_bytes_after is not None:
        saved = report.file_bytes_before - report.file_bytes_after
        lines.append(
            f"compacted the store file: {report.file_bytes_before} -> {report.file_bytes_after} bytes "
            f"({saved} bytes saved)"
        )
    return lines
