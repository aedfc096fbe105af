"""Commands that read: ``show``, ``ls``, ``log``, ``history``, ``blame``, ``diff``.

They open the store read-only. Listing commands stream: with ``--json`` each
item is printed as one JSON line as soon as it is read.
"""

from dataclasses import asdict
from typing import Annotated

import typer

from mnemosyne import NotFound
from mnemosyne.model.jsonform import to_builtins
from mnemosyne.model.times import rfc3339

from .render import (
    blame_text,
    commit_oneline,
    commit_text,
    emit,
    erasure_text,
    node_text,
    preview,
    say,
    short,
    summary,
    when,
)
from .state import AsOfOpt, AtOpt, state, time_or_none

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The node id, e.g. users/mira/passport_deadline.")]
ExpiredOpt = Annotated[
    bool,
    typer.Option("--include-expired", help="Also nodes past their expires_at (judged at --as-of, else now)."),
]


def show(
    ctx: typer.Context,
    node_id: IdArg,
    at: AtOpt = None,
    as_of: AsOfOpt = None,
    include_expired: ExpiredOpt = False,
) -> None:
    """Show one node: its fields, provenance and content.

    JSON: the node, with every field and its "hash".
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    moment = time_or_none(as_of)
    node = repo.get(node_id, at=at, as_of=moment, include_expired=include_expired)
    if node is None:
        place = (at or "HEAD") + (f" as of {as_of}" if as_of else "")
        expired = None if include_expired else repo.get(node_id, at=at, as_of=moment, include_expired=True)
        if expired is not None and expired.expires_at is not None:
            raise NotFound(
                f"{node_id} expired at {rfc3339(expired.expires_at)} in {place} "
                "(see it with --include-expired)"
            )
        raise NotFound(f"{node_id} is not in {place}")
    if settings.json:
        emit(node)
        return
    for line in node_text(node):
        say(line)


def ls(
    ctx: typer.Context,
    prefix: Annotated[
        str | None,
        typer.Option(
            "--prefix", metavar="P", help="Only ids starting with P (e.g. users/mira/).", show_default=False
        ),
    ] = None,
    at: AtOpt = None,
    as_of: AsOfOpt = None,
    include_expired: ExpiredOpt = False,
) -> None:
    """List the nodes of a snapshot, ordered by id.

    Human output: short hash, kind, id and a glimpse of the content.
    JSON Lines: one node each.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    nodes = repo.nodes(at=at, as_of=time_or_none(as_of), prefix=prefix, include_expired=include_expired)
    for node in nodes:
        if settings.json:
            emit(node)
        else:
            say(f"{short(node.hash)}  {node.kind:<5}  {node.id}  {preview(node)}")


def log(
    ctx: typer.Context,
    rev: Annotated[
        str | None,
        typer.Argument(metavar="REV", help="Where to start (default: HEAD).", show_default=False),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option("--node", metavar="ID", help="Only commits that changed this id.", show_default=False),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "-n",
            "--max-count",
            "--limit",
            metavar="N",
            min=0,
            help="Show at most N commits.",
            show_default=False,
        ),
    ] = None,
    as_of: AsOfOpt = None,
    oneline: Annotated[bool, typer.Option("--oneline", help="One line per commit.")] = False,
    thread: Annotated[
        str | None,
        typer.Option(
            "--thread",
            metavar="THREAD_ID",
            help="Start at the branch of this LangGraph thread (see 'mnemo threads'), instead of REV.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show commits, newest first.

    REV is a branch, HEAD, a commit id or a prefix of at least 4 hex characters,
    REV~N, or BRANCH@{TIME}. --thread THREAD_ID names a LangGraph thread by its
    id: its history, one commit per checkpoint.

    JSON Lines: one commit each.
    """
    if thread is not None and rev is not None:
        raise typer.BadParameter("give REV or --thread, not both", param_hint="--thread")
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    if thread is not None:
        rev = repo.thread(thread).branch
    first = True
    for entry in repo.log(at=rev, node=node, limit=limit, as_of=time_or_none(as_of)):
        if settings.json:
            emit(entry)
        elif oneline:
            say(commit_oneline(entry))
        else:
            if not first:
                say("")
            for line in commit_text(entry):
                say(line)
        first = False


def history(ctx: typer.Context, node_id: IdArg, at: AtOpt = None) -> None:
    """Show every version of an id, newest first, with its status.

    A version is current (in the tree at the tip), expired (current, but past
    its expires_at), superseded (a later version replaced it), deleted (the id
    was removed after it) or redacted (its content was erased with 'mnemo
    forget'; JSON "node" is null and "redaction" says who erased it, when and why).
    A version that is no longer current shows the commit that ended it ("ended
    by"), and the version that replaced it ("superseded by"), when one did.
    A version re-confirmed with 'mnemo verify' shows when and by whom it last was.

    JSON Lines: one version each: {"id", "hash", "node", "commit", "status",
    "ended_by", "superseded_by", "redaction", "verified"} ("verified": the last
    verification commit, or null).
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    versions = repo.history(node_id, at=at)
    if not versions:
        raise NotFound(f"{node_id} has no history in {at or 'HEAD'}")
    for version in versions:
        if settings.json:
            emit(version)
        else:
            commit = version.commit
            ended = ""
            if version.ended_by is not None:
                replaced = f", superseded by {short(version.superseded_by)}" if version.superseded_by else ""
                ended = f"  (ended by {short(version.ended_by)}{replaced})"
            erased = f"  ({erasure_text(version.redaction)})" if version.node is None else ""
            checked = version.verified
            confirmed = (
                f"  (verified {when(checked.record_time)} by {checked.author})" if checked is not None else ""
            )
            say(
                f"{short(version.hash)}  {version.status:<10}  {short(commit.id)}  "
                f"{when(commit.record_time)}  {commit.author}  {summary(commit.message)}"
                f"{ended}{erased}{confirmed}"
            )


def blame(ctx: typer.Context, node_id: IdArg, at: AtOpt = None) -> None:
    """Show who wrote the current version of an id, when, and from what.

    Then each line of text content (or each field of a JSON object) with the
    commit that wrote it. When that version's content was erased ('mnemo
    forget'), the commit is still shown and the content is marked erased
    (JSON: "node" null, "redacted" true, "lines" empty, "redaction" the record).
    When the version was re-confirmed since ('mnemo verify'), the last
    verification is shown too.

    JSON: {"id", "hash", "node", "commit", "lines", "redacted", "redaction",
    "verified"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    found = repo.blame(node_id, at=at)
    if settings.json:
        emit(found)
        return
    for line in blame_text(found):
        say(line)


def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(metavar="A", help="The old revision.")],
    b: Annotated[str, typer.Argument(metavar="B", help="The new revision.")],
    stat: Annotated[bool, typer.Option("--stat", help="Summarise per namespace instead.")] = False,
) -> None:
    """Show what changed from revision A to revision B.

    Each id is marked + (added), - (removed) or ~ (modified); text content gets
    a unified diff, JSON objects a per-key diff; a version whose content was
    erased shows as [redacted] with its short hash. With --stat: counts per
    namespace (the id up to its last '/').

    JSON: {"a", "b", "added", "removed", "modified"}, each a list of changes
    {"id", "old", "new", "old_hash", "new_hash", "redacted"} (a side is null when
    absent, or erased: then its hash is set and "redacted" is true); with
    --stat, also "stat": [{"namespace", "added", "removed", "modified"}].
    """
    from . import diffview  # the text diffs: loaded by the command that shows them

    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    changes = repo.diff(a, b)
    if settings.json:
        document = to_builtins(changes)
        if stat:
            document["stat"] = [asdict(row) for row in diffview.stat(changes)]
        emit(document)
        return
    lines = diffview.stat_lines(diffview.stat(changes)) if stat else diffview.diff_lines(changes)
    for line in lines:
        say(line)
