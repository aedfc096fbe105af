"""Commands that create a store and write to it: ``init``, ``commit``, ``rm``."""

import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mnemosyne import Commit, InvalidInput, NotFound, Repo, new_id

from .nodes_in import read_nodes
from .render import emit, say, short, summary
from .state import STORE_DIR, AuthorOpt, State, author_or_default, state

MessageOpt = Annotated[str, typer.Option("-m", "--message", metavar="MSG", help="Why: the commit message.")]
BranchOpt = Annotated[
    str | None,
    typer.Option("--branch", metavar="B", help="Commit to branch B (default: HEAD's).", show_default=False),
]
ParentOpt = Annotated[
    str | None,
    typer.Option(
        "--parent",
        metavar="REV",
        help="Fail (exit 4) unless the branch tip is still REV: optimistic concurrency.",
        show_default=False,
    ),
]


class ClaimPolicy(StrEnum):
    """What ``commit`` does with a claim that starts when another on its (subject, predicate) does."""

    REFUSE = "refuse"
    REPLACE = "replace"
    KEEP = "keep"


def init(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Where to create the store (default: --repo, $MNEMO_DIR, else ./.mnemo).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create a store.

    With --tenant, also create that tenant (in a new or an existing store).
    """
    settings = state(ctx)
    where = path or settings.repo or Path(STORE_DIR)
    created = True
    if settings.tenant is None:
        repo = Repo.init(where)
    else:
        try:
            Repo.open(where, readonly=True).close()
            created = False
        except NotFound:
            Repo.init(where).close()
        try:
            Repo.open(where, tenant=settings.tenant, readonly=True).close()
        except NotFound:
            pass
        else:
            raise InvalidInput(f"tenant {settings.tenant!r} already exists in {where}")
        repo = Repo.open(where, tenant=settings.tenant, create=True)
    tenant = repo.tenant
    repo.close()
    location = str(where.resolve())
    if settings.json:
        emit({"path": location, "tenant": tenant, "created_store": created})
    elif created:
        say(
            f"Initialized empty Mnemosyne store in {location}"
            + (f" (tenant {tenant})" if settings.tenant else "")
        )
    else:
        say(f"Created tenant {tenant} in {location}")


def commit(
    ctx: typer.Context,
    message: MessageOpt,
    file: Annotated[
        str | None,
        typer.Argument(
            metavar="FILE|-",
            help="Nodes as one JSON object, a JSON array, or JSON Lines; '-' or nothing reads stdin.",
            show_default=False,
        ),
    ] = None,
    author: AuthorOpt = None,
    branch: BranchOpt = None,
    parent: ParentOpt = None,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="Record a commit even if nothing changes.")
    ] = False,
    on_claim_conflict: Annotated[
        ClaimPolicy,
        typer.Option(
            "--on-claim-conflict",
            help="A claim starting when another on its (subject, predicate) does, with another value: "
            "refuse (exit 2), replace the other claims, or keep both (a contradiction).",
        ),
    ] = ClaimPolicy.REFUSE,
) -> None:
    """Commit nodes read from JSON.

    The input is one JSON object, a JSON array, or JSON Lines. The commit is
    atomic, on the tip of the current branch (or --branch). A node is
    {"id", "content", "kind", "provenance", "event_time", "meta", "expires_at"};
    only content is required. A node without an id gets a
    generated one, reported in the output. A claim is
    {"kind": "claim", "content": {"subject", "predicate", "value", "valid_from"}}.
    Times are RFC 3339; a bare date is midnight UTC.

    \b
    Example:
      echo '{"id": "users/mira/lang", "content": "de"}' | mnemo commit -m "learned"
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    text, source = _read_input(file, allow_empty)
    nodes = read_nodes(text, source, lambda: new_id(datetime.now(UTC)))
    if not nodes and not allow_empty:
        raise InvalidInput(f"{source}: no nodes to commit (pass --allow-empty to commit anyway)")
    repo = settings.open(ctx)
    made = repo.commit(
        put=nodes,
        message=message,
        author=author_or_default(author),
        branch=branch,
        parent=parent,
        allow_empty=allow_empty,
        on_claim_conflict=on_claim_conflict.value,
    )
    report(settings, made, branch or repo.head, [node.id for node in nodes], "+")


def rm(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The ids to remove.", show_default=False)],
    message: MessageOpt,
    author: AuthorOpt = None,
    branch: BranchOpt = None,
    parent: ParentOpt = None,
) -> None:
    """Commit the removal of ids (history keeps their versions)."""
    settings = state(ctx)
    repo = settings.open(ctx)
    made = repo.commit(
        delete=ids, message=message, author=author_or_default(author), branch=branch, parent=parent
    )
    report(settings, made, branch or repo.head, ids, "-")


def report(settings: State, made: Commit, branch: str, ids: list[str], mark: str) -> None:
    """Print what a write did: ``{"commit", "ids"}``, or git's ``[branch abc1234] message``."""
    if settings.json:
        emit({"commit": made.id, "ids": ids})
        return
    say(f"[{branch} {short(made.id)}] {summary(made.message)}")
    for node_id in ids:
        say(f" {mark} {node_id}")


def _read_input(file: str | None, allow_empty: bool) -> tuple[str, str]:
    """The input text and how to name it in errors."""
    if file is None or file == "-":
        source = "stdin"
        if file is None and sys.stdin.isatty():
            if allow_empty:
                return "", source
            raise InvalidInput("no input: give a FILE, or pipe JSON into stdin")
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        source = file
        try:
            raw = Path(file).read_bytes()
        except OSError as exc:
            raise InvalidInput(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig"), source
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text (bad byte at offset {exc.start})") from None
