"""``threads``: the LangGraph threads of a tenant, each with its id and branch (ADR 28)."""

from typing import Annotated

import typer

from mnemosyne import Thread

from .render import emit, say, short, when
from .state import state


def thread_line(thread: Thread) -> str:
    """A thread on one line: branch, tip, when last written, and the id (last: it may hold spaces)."""
    named = thread.thread_id if thread.thread_id is not None else "? (no checkpoint names it)"
    return f"{thread.branch}  {short(thread.commit.id)}  {when(thread.commit.record_time)}  {named}"


def threads(
    ctx: typer.Context,
    thread_id: Annotated[
        str | None,
        typer.Argument(
            metavar="THREAD_ID",
            help="Show only this thread (none: exit 3, naming the branch it would have).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List the LangGraph threads of the tenant, or show one, with the branch that holds it.

    A thread is a branch: threads/ and the thread id, escaped when it is not
    plain (user@example.com is threads/_user_40example.com). Each line: the
    branch, its tip, when it was last written, and the thread id.
    'mnemo log --thread THREAD_ID' shows one thread's history.

    JSON Lines: one thread each: {"thread_id", "branch", "commit"} ("thread_id"
    null when neither the branch name nor a checkpoint on it names the thread).
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    found = [repo.thread(thread_id)] if thread_id is not None else repo.threads()
    for thread in found:
        if settings.json:
            emit(thread)
        else:
            say(thread_line(thread))
