"""Commands that move refs: ``branch``, ``switch``, ``reset``, ``revert``."""

from typing import Annotated

import typer

from .render import emit, note, say, short, summary
from .state import AuthorOpt, author_or_default, state

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The branch name.")]


def branch(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME", help="Create this branch; without it, list branches.", show_default=False
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="REV", help="Start the new branch at REV (default: HEAD).", show_default=False
        ),
    ] = None,
    orphan: Annotated[
        bool,
        typer.Option("--orphan", help="Create NAME with no commits: its first commit starts a new history."),
    ] = False,
    delete: Annotated[bool, typer.Option("-d", "--delete", help="Delete branch NAME.")] = False,
    remotes: Annotated[
        bool, typer.Option("-r", "--remotes", help="List the remote-tracking refs (origin/main) instead.")
    ] = False,
    all_refs: Annotated[
        bool, typer.Option("-a", "--all", help="List branches and remote-tracking refs.")
    ] = False,
    author: AuthorOpt = None,
) -> None:
    """List, create or delete branches.

    \b
      mnemo branch                   list branches
      mnemo branch -r                list remote-tracking refs (fetch brings them)
      mnemo branch -a                list both
      mnemo branch NAME [--from REV] create one (default: at HEAD)
      mnemo branch NAME --orphan     create one with no commits
      mnemo branch -d NAME           delete one

    The list marks the current branch with '*'. Deleting keeps the branch's
    reflog, so as-of reads stay honest. On a branch with no commits yet, a new
    branch has none either: the first commit on it starts it. Commits go only to
    branches that exist: `mnemo commit --branch` never creates one.

    Remote-tracking refs (REMOTE/BRANCH) are read as branches are (log, show,
    diff, merge take them) and move only by fetch; -a lists them after the
    branches, as remotes/REMOTE/BRANCH.

    JSON Lines (list): {"name", "commit", "current"}, and "remote" with -r or -a;
    create: {"name", "commit"} (null: no commits yet); delete: {"deleted", "commit"}.
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    if (remotes or all_refs) and (name is not None or delete or start is not None or orphan):
        raise typer.BadParameter(
            "lists refs: give no NAME, --delete, --from or --orphan with it", param_hint="-r/-a"
        )
    if delete:
        if name is None:
            raise typer.BadParameter("give the branch to delete", param_hint="NAME")
        if start is not None or orphan:
            raise typer.BadParameter(
                "cannot be used with --delete", param_hint="--from" if start is not None else "--orphan"
            )
        repo = settings.open(ctx)
        tip = repo.delete_branch(name, author=author_or_default(author))
        if settings.json:
            emit({"deleted": name, "commit": tip.id if tip else None})
        else:
            say(f"Deleted branch {name}" + (f" (was {short(tip.id)})." if tip else "."))
        return
    if name is None:
        if start is not None or orphan:
            hint = "--from" if start is not None else "--orphan"
            raise typer.BadParameter("needs the NAME of a branch to create", param_hint=hint)
        repo = settings.open(ctx, readonly=True)
        head = repo.head
        local = [] if remotes else [(branch_name, tip, False) for branch_name, tip in repo.branch_tips()]
        tracked = [(ref, tip, True) for ref, tip in repo.remote_branches()] if remotes or all_refs else []
        rows = [*local, *tracked]
        shown = {ref: f"remotes/{ref}" if all_refs else ref for ref, _, _ in tracked}
        width = max((len(shown.get(ref, ref)) for ref, _, _ in rows), default=0)
        for ref, tip_commit, remote in rows:
            current = not remote and ref == head
            if settings.json:
                row = {"name": ref, "commit": tip_commit.id, "current": current}
                emit({**row, "remote": remote} if remotes or all_refs else row)
            else:
                label = shown[ref] if remote else ref
                mark = "*" if current else " "
                say(f"{mark} {label:<{width}}  {short(tip_commit.id)} {summary(tip_commit.message)}")
        return
    repo = settings.open(ctx)
    made = repo.branch(name, at=start, orphan=orphan, author=author_or_default(author))
    if settings.json:
        emit({"name": name, "commit": made.id if made is not None else None})
    elif made is None:
        say(f"Created branch {name} (no commits yet: its first commit starts it)")
    else:
        say(f"Created branch {name} at {short(made.id)} {summary(made.message)}")


def switch(ctx: typer.Context, name: NameArg) -> None:
    """Make NAME the current branch.

    JSON: {"head"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    repo.switch(name)
    if settings.json:
        emit({"head": name})
    else:
        note(f"Switched to branch {name!r}")


def reset(
    ctx: typer.Context,
    branch_name: Annotated[str, typer.Argument(metavar="BRANCH", help="The branch to move.")],
    rev: Annotated[str, typer.Argument(metavar="REV", help="Where to move it.")],
    author: AuthorOpt = None,
) -> None:
    """Move BRANCH to REV.

    The move is recorded in the branch's reflog, so reads as of an earlier time
    still see what the branch held then.

    JSON: {"branch", "commit"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    made = repo.reset(branch_name, rev, author=author_or_default(author))
    if settings.json:
        emit({"branch": branch_name, "commit": made.id})
    else:
        say(f"{branch_name} is now at {short(made.id)} {summary(made.message)}")


def revert(
    ctx: typer.Context,
    rev: Annotated[str, typer.Argument(metavar="REV", help="The commit to undo.")],
    message: Annotated[
        str | None,
        typer.Option(
            "-m", "--message", help="The message (default: 'Revert <id>: <summary>').", show_default=False
        ),
    ] = None,
    author: AuthorOpt = None,
) -> None:
    """Undo one commit with a new commit on the current branch.

    Fails (exit 2) if an id that commit changed has changed again since.

    JSON: {"commit": the new commit, "reverted": the id of the commit undone}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    target = repo.resolve(rev)
    made = repo.revert(target, author=author_or_default(author), message=message)
    if settings.json:
        emit({"commit": made, "reverted": target.id})
    elif not made.created:
        say(f"nothing to commit: reverting {short(target.id)} changes nothing")
    else:
        say(f"[{repo.head} {short(made.id)}] {summary(made.message)}")
