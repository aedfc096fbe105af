"""The root ``mnemo`` app: global options, command registration, and the error edge.

Every :class:`mnemosyne.MnemoError` becomes one line on stderr (``error: …``)
and the exit code docs/cli.md documents (:mod:`.exits`); usage errors exit 2
(Typer's own), an interrupt 130, a closed output pipe ends quietly with 0, and
anything else one line and exit 1. Never a traceback: memories can hold secrets.
"""

import errno
import importlib
import os
import sys
from typing import Annotated, Any, NoReturn

import typer
from typer import core as typer_core
from typer.core import TyperGroup

from mnemosyne import MnemoError, __version__
from mnemosyne.errors import one_line

from . import exits
from .render import note
from .state import State, as_location

COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("cmd_store", "init"),
    "commit": ("cmd_store", "commit"),
    "rm": ("cmd_store", "rm"),
    "verify": ("cmd_store", "verify"),
    "show": ("cmd_read", "show"),
    "ls": ("cmd_read", "ls"),
    "log": ("cmd_read", "log"),
    "history": ("cmd_read", "history"),
    "blame": ("cmd_read", "blame"),
    "diff": ("cmd_read", "diff"),
    "threads": ("cmd_threads", "threads"),
    "branch": ("cmd_refs", "branch"),
    "switch": ("cmd_refs", "switch"),
    "reset": ("cmd_refs", "reset"),
    "revert": ("cmd_refs", "revert"),
    "merge": ("cmd_merge", "merge"),
    "bisect": ("cmd_merge", "bisect"),
    "facts": ("cmd_claims", "facts"),
    "timeline": ("cmd_claims", "timeline"),
    "contradictions": ("cmd_claims", "contradictions"),
    "fsck": ("cmd_admin", "fsck"),
    "reindex": ("cmd_admin", "reindex"),
    "forget": ("cmd_forget", "forget"),
    "gc": ("cmd_forget", "gc"),
    "search": ("cmd_recall", "search"),
    "context": ("cmd_recall", "context"),
    "reads": ("cmd_recall", "reads"),
    "export": ("cmd_backup", "export"),
    "import": ("cmd_backup", "import_"),
    "tenant": ("cmd_admin", "tenant_app"),
    "config": ("cmd_recall", "config_app"),
    "mcp": ("cmd_mcp", "mcp"),
    "ui": ("cmd_ui", "ui"),
    "serve": ("cmd_serve", "serve"),
    "token": ("cmd_token", "token_app"),
    "remote": ("cmd_remote", "remote_app"),
    "clone": ("cmd_remote", "clone"),
    "fetch": ("cmd_remote", "fetch"),
    "pull": ("cmd_remote", "pull"),
    "push": ("cmd_remote", "push"),
}
"""Every command: the module and function (or sub-app) that implements it.

Built on demand: an agent that shells out to ``mnemo show`` pays for ``show``
only, not for importing and introspecting every command.
"""


# Newer Typer releases carry their own copy of Click; take the exceptions its parser raises.
_CLICK: Any = getattr(typer_core, "_click", None) or getattr(typer_core, "click")  # noqa: B009
_USAGE_ERROR: type[Exception] = _CLICK.exceptions.UsageError
_NO_SUCH_OPTION: type[Exception] = _CLICK.exceptions.NoSuchOption
_NO_ARGS_HELP: tuple[type[Exception], ...] = tuple(
    cls for cls in [getattr(_CLICK.exceptions, "NoArgsIsHelpError", None)] if cls is not None
)
"""Raised by a group run with no arguments, to show its help (Click 8.2+)."""


def _usage_line(error: Exception) -> int:
    """Report a usage error on one line; return its exit code."""
    usage: Any = error
    where = usage.ctx.command_path if usage.ctx is not None else "mnemo"
    message = "; ".join(line.strip() for line in usage.format_message().splitlines() if line.strip())
    if isinstance(error, _NO_SUCH_OPTION):
        message += " (to pass a value that starts with '-', such as an id, put '--' before it)"
    note(f"error: {message.rstrip('.')}; see '{where} -h'")
    return int(usage.exit_code)


class MnemoGroup(TyperGroup):
    """The root command group: builds commands on demand, turns errors into one line and an exit code."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name, in the order the help lists them."""
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, built (and its module imported) when first asked for."""
        built = self.commands.get(cmd_name)
        if built is None and cmd_name in COMMANDS:
            built = _build(cmd_name)
            self.commands[cmd_name] = built
        return built

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """Parse the global options; a usage error there is one line too (bare ``mnemo`` still shows help)."""
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _USAGE_ERROR as error:
            if isinstance(error, _NO_ARGS_HELP):
                raise
            raise typer.Exit(_usage_line(error)) from None

    def invoke(self, ctx: Any) -> Any:
        """Run the command; report a usage error, a :class:`MnemoError` or an ``OSError`` as ``error: …``."""
        try:
            return super().invoke(ctx)
        except _USAGE_ERROR as error:
            if isinstance(error, _NO_ARGS_HELP):
                raise  # a command group run bare (``mnemo tenant``) shows its help
            # A command's arguments did not parse: one line, like every other error.
            raise typer.Exit(_usage_line(error)) from None
        except MnemoError as error:
            note(f"error: {one_line(error)}")
            raise typer.Exit(exits.exit_code(error)) from None
        except OSError as error:
            if error.errno == errno.EPIPE:
                raise _ClosedPipe from None
            note(f"error: {one_line(error)}")
            raise typer.Exit(exits.PROBLEM) from None


app = typer.Typer(
    name="mnemo",
    cls=MnemoGroup,
    help="Mnemosyne: version control for AI-agent memory.",
    epilog=exits.EPILOG + " "
    "Environment: MNEMO_DIR (the store), MNEMO_AUTHOR (who writes), MNEMO_EMBEDDER "
    "(the embedder for search, context and reindex in this process instead of the "
    "store's setting: auto, none, hash, hash-DIM, minilm or minilm-sentences), MNEMO_TOKEN (the token clone, "
    "fetch, pull and push send to a store served over HTTP).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"mnemo {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            envvar="MNEMO_DIR",
            metavar="PATH|URL",
            help="The store: a directory, or a postgresql:// URL "
            "(default: $MNEMO_DIR, else the nearest .mnemo upward).",
            show_default=False,
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="NAME", help="Work in this tenant's keyspace.", show_default=False),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print JSON (JSON Lines for listings) instead of text.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Mnemosyne: version control for AI-agent memory.

    Global options go before the command: mnemo [--repo PATH] [--tenant NAME] [--json] COMMAND.
    """
    ctx.obj = State(repo=as_location(repo), tenant=tenant, json=json)


def _build(name: str) -> Any:
    """One command (or command group) as Click runs it, from the function that implements it."""
    module, attribute = COMMANDS[name]
    found = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
    if isinstance(found, typer.Typer):
        group = typer.main.get_command(found)
        group.name = name
        return group
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command(name)(found)
    return typer.main.get_command(single)


class _ClosedPipe(Exception):
    """The reader of our output went away (``mnemo log | head -1``): end quietly."""


def _quiet_exit() -> NoReturn:
    """End after a closed pipe: exit 0, and nothing more written to the closed stream."""
    # Python would flush stdout again at exit and fail on the closed pipe: point it at /dev/null.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(exits.OK)


def main() -> None:
    """Run ``mnemo``; the last guard against a traceback."""
    try:
        app()
    except _ClosedPipe:
        _quiet_exit()
    except BrokenPipeError:
        _quiet_exit()
    except Exception as error:  # the edge: anything the commands did not expect
        note(f"error: {type(error).__name__}: {one_line(error)}")
        raise SystemExit(exits.PROBLEM) from None
