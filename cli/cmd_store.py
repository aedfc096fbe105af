"""Commands that create a store and write to it: ``init``, ``commit``, ``rm``, ``verify``."""

import sys
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from mnemosyne import CommitResult, InvalidInput, NotFound, Store
from mnemosyne.api.locations import shown_location
from mnemosyne.model.choices import ClaimPolicy
from mnemosyne.model.jsonform import read_nodes
from mnemosyne.model.validation import MAX_INPUT_BYTES

from .render import emit, say, short, summary
from .state import STORE_DIR, AuthorOpt, State, as_location, author_or_default, state

MessageOpt = Annotated[str, typer.Option("-m", "--message", metavar="MSG", help="Why: the commit message.")]
BranchOpt = Annotated[
    str | None,
    typer.Option(
        "--branch", metavar="B", help="Commit to existing branch B (default: HEAD's).", show_default=False
    ),
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


def init(
    ctx: typer.Context,
    path: Annotated[
        str | None,
        typer.Argument(
            metavar="[PATH|URL]",
            help="Where to create the store (default: --repo, $MNEMO_DIR, else ./.mnemo): a directory "
            "(missing parents are created) or a postgresql:// URL (the database must exist).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create a store.

    With --tenant, also create that tenant (in a new or an existing store).

    JSON: {"path", "tenant", "created_store"}.
    """
    settings = state(ctx)
    where = as_location(path) or settings.repo or Path(STORE_DIR)
    created = True
    if settings.tenant is None:
        Store.init(where).close()
    else:
        try:
            store = Store.open(where)
            created = False
        except NotFound:
            store = Store.init(where)
        with store:
            store.create_tenant(settings.tenant)
    tenant = settings.tenant or "default"
    location = shown_location(where)
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
    ] = "refuse",
) -> None:
    """Commit nodes read from JSON.

    The input is one JSON object, a JSON array, or JSON Lines. The commit is
    atomic, on the tip of the current branch (or --branch). A node is
    {"id", "content", "kind", "provenance", "event_time", "meta", "expires_at"};
    only content is required. A node without an id gets a generated one,
    reported in the output; an empty id is refused. A "hash", when given, must
    be the hash of the node described. A claim is
    {"kind": "claim", "content": {"subject", "predicate", "value", "valid_from"}}.
    Times are RFC 3339; a bare date is midnight UTC. When nothing would change
    (the same versions written again), nothing is committed: 'nothing to
    commit' and exit 0.

    JSON: the commit, with "put_ids", "modified_ids", "deleted_ids" and "created".

    \b
    Example:
      echo '{"id": "users/mira/lang", "content": "de"}' | mnemo commit -m "learned"
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    text, source = _read_input(file, allow_empty)
    nodes = read_nodes(text, source)
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
        on_claim_conflict=on_claim_conflict,
    )
    report(settings, made, branch or repo.head)


def rm(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The ids to remove.", show_default=False)],
    message: MessageOpt,
    author: AuthorOpt = None,
    branch: BranchOpt = None,
    parent: ParentOpt = None,
) -> None:
    """Commit the removal of ids (history keeps their versions).

    JSON: the commit, with "put_ids", "modified_ids", "deleted_ids" and "created".
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    made = repo.commit(
        delete=ids, message=message, author=author_or_default(author), branch=branch, parent=parent
    )
    report(settings, made, branch or repo.head)


def verify(
    ctx: typer.Context,
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The ids to verify.", show_default=False)],
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="NAME",
            envvar="MNEMO_AUTHOR",
            help="Who confirmed them (default: $MNEMO_AUTHOR, else your user name).",
            show_default=False,
        ),
    ] = None,
    note: Annotated[
        str | None,
        typer.Option("--note", metavar="TEXT", help="How or why (the commit message).", show_default=False),
    ] = None,
    branch: BranchOpt = None,
) -> None:
    """Record that the current versions of ids were re-confirmed, without a new version.

    One commit whose snapshot is the tip's: no memory and no hash changes. Its
    record time is when they were last confirmed, which 'mnemo history',
    'mnemo blame', and --verified-within on search, context and facts read.
    An id not in the branch fails (exit 3) and nothing is written.

    JSON: the commit, with "verified" (the ids).

    \b
    Example:
      mnemo verify users/mira/diet --by support-agent --note "she confirmed it on the call"
    """  # noqa: D301 (\b keeps Click from rewrapping the example)
    settings = state(ctx)
    repo = settings.open(ctx)
    made = repo.verify(*ids, by=author_or_default(by), note=note, branch=branch)
    if settings.json:
        emit(made)
        return
    say(f"[{branch or repo.head} {short(made.id)}] {summary(made.message)}")
    for node_id in made.verified:
        say(f" = {node_id}")


def report(settings: State, made: CommitResult, branch: str) -> None:
    """Print what a write did: the commit as JSON, or git's ``[branch abc1234] message``."""
    if settings.json:
        emit(made)
        return
    if not made.created:
        say(f"nothing to commit: branch {branch} is unchanged at {short(made.id)}")
        return
    say(f"[{branch} {short(made.id)}] {summary(made.message)}")
    modified = set(made.modified_ids)
    for node_id in made.put_ids:
        say(f" {'~' if node_id in modified else '+'} {node_id}")  # as diff marks them
    for node_id in made.deleted_ids:
        say(f" - {node_id}")


def _read_input(file: str | None, allow_empty: bool) -> tuple[str, str]:
    """The input text and how to name it in errors; read to :data:`MAX_INPUT_BYTES` at most."""
    if file is None or file == "-":
        source = "stdin"
        if file is None and sys.stdin.isatty():
            if allow_empty:
                return "", source
            raise InvalidInput("no input: give a FILE, or pipe JSON into stdin")
        stream = getattr(sys.stdin, "buffer", None)  # a text stream without one: in tests
        raw = _read_bounded(stream, source) if stream is not None else sys.stdin.read().encode()
    else:
        source = file
        try:
            with open(file, "rb") as handle:
                raw = _read_bounded(handle, source)
        except OSError as exc:
            raise InvalidInput(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig"), source
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text (bad byte at offset {exc.start})") from None


def _read_bounded(stream: BinaryIO, source: str) -> bytes:
    """All of ``stream``, refused past :data:`MAX_INPUT_BYTES` (``/dev/zero`` would never end)."""
    raw = stream.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise InvalidInput(
            f"{source} holds more than {MAX_INPUT_BYTES >> 20} MiB, the most one commit reads: "
            "split it into several commits"
        )
    return raw
