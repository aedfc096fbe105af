"""``mnemo token create|list|revoke``: the access tokens of a served store (``mnemo serve``).

A token reaches one tenant with one role (read, write, admin). Its text is
printed once, by ``create``; the store keeps only a keyed hash of it
(:meth:`mnemosyne.Store.create_token`), so ``list`` shows everything but the text.
"""

from datetime import UTC, datetime
from typing import Annotated

import typer

from mnemosyne import Store
from mnemosyne.model.defaults import DEFAULT_TENANT
from mnemosyne.model.times import parse_duration

from .render import emit, note, say, when
from .state import State, state

token_app = typer.Typer(
    name="token",
    help="Make, list and revoke the access tokens of a served store (mnemo serve).",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _open_store(ctx: typer.Context, settings: State, *, readonly: bool) -> Store:
    """The whole store (tokens are store-wide), closed when the command ends."""
    store = Store.open(settings.store_path(), readonly=readonly)
    ctx.call_on_close(store.close)
    return store


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    role: Annotated[
        str,
        typer.Option(
            "--role",
            metavar="read|write|admin",
            help="read: get, ls, log, history, blame, diff, facts, search, context; write: also "
            "commit, verify, branch, merge; admin: also forget.",
            show_default=False,
        ),
    ],
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            metavar="T",
            help="The one tenant the token reaches (default: the global --tenant, else the default tenant).",
            show_default=False,
        ),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires",
            metavar="DURATION",
            help="How long it works: 30d, 12h, 1w (default: until revoked).",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="N",
            help="A name to list and revoke it by, unique in the store; also the author of "
            "writes made with it that name none.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Make a token for 'mnemo serve' and print it, once: one tenant, one role.

    Clients send it as 'Authorization: Bearer TOKEN'. The store keeps only a
    keyed hash of it, so it cannot be shown again: keep it where secrets go
    (revoke it and make another if it is lost). Text: the token alone on
    stdout, what it is on stderr.

    JSON: {"token", "id", "name", "tenant", "role", "created_at", "expires_at"}.
    """
    settings = state(ctx)
    lifetime = parse_duration(expires, "--expires") if expires is not None else None
    store = _open_store(ctx, settings, readonly=False)
    made = store.create_token(
        tenant or settings.tenant or DEFAULT_TENANT,
        role,  # type: ignore[arg-type]  # the library checks it, naming the roles
        name=name,
        expires=lifetime,
    )
    if settings.json:
        emit(made)
        return
    typer.echo(made.token)
    until = f"until {when(made.expires_at)}" if made.expires_at is not None else "until revoked"
    label = f" ({made.name})" if made.name else ""
    note(
        f"token {made.id}{label}: tenant {made.tenant}, role {made.role}, {until}; "
        "shown once: the store keeps only its hash"
    )


@token_app.command("list")
def token_list(ctx: typer.Context) -> None:
    """List the store's tokens (never their text): id, name, tenant, role, expiry.

    JSON Lines: {"id", "name", "tenant", "role", "created_at", "expires_at"}.
    """
    settings = state(ctx)
    now = datetime.now(UTC)
    for token in _open_store(ctx, settings, readonly=True).tokens():
        if settings.json:
            emit(token)
            continue
        if token.expires_at is None:
            until = "never expires"
        elif token.expired(now):
            until = f"expired {when(token.expires_at)}"
        else:
            until = f"expires {when(token.expires_at)}"
        say(f"{token.id}  {token.name or '-'}  {token.tenant}  {token.role:<5}  {until}")


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    id_or_name: Annotated[
        str, typer.Argument(metavar="ID_OR_NAME", help="The token's id or name.", show_default=False)
    ],
) -> None:
    """Revoke a token: a running server refuses it from its next request on (exit 3 if none).

    JSON: the token revoked, {"id", "name", "tenant", "role", "created_at", "expires_at"}.
    """
    settings = state(ctx)
    gone = _open_store(ctx, settings, readonly=False).revoke_token(id_or_name)
    if settings.json:
        emit(gone)
    else:
        label = f" ({gone.name})" if gone.name else ""
        say(f"revoked token {gone.id}{label}: tenant {gone.tenant}, {gone.role}")
