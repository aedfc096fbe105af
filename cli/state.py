"""What every command shares: the global options, finding and opening the store, the author.

Only the CLI reads the environment (``MNEMO_DIR``, ``MNEMO_AUTHOR``,
``MNEMO_EMBEDDER``, ``MNEMO_INDEX_CACHE``, ``XDG_CACHE_HOME``) and the current
directory; the library gets plain values.
"""

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

import typer

from mnemosyne import InvalidInput, MnemoError, NotFound, Repo, parse_time
from mnemosyne.api.locations import postgres_url
from mnemosyne.model.defaults import DEFAULT_AUTHOR, DEFAULT_TENANT
from mnemosyne.model.times import parse_duration

STORE_DIR = ".mnemo"
"""The directory name looked for upward from the current directory."""

EMBEDDER_ENV = "MNEMO_EMBEDDER"
"""When set, the embedder every opened store uses in this process, instead of its setting."""

INDEX_CACHE_ENV = "MNEMO_INDEX_CACHE"
"""Where the saved approximate index of a large store is kept (``none``: nowhere)."""


def index_cache(location: Path | str) -> Path | None:
    """The ``index_cache`` to open a store with: ``MNEMO_INDEX_CACHE``, else a default.

    A store directory keeps its index inside itself unless ``MNEMO_INDEX_CACHE``
    names another directory; a PostgreSQL store keeps it in
    ``$XDG_CACHE_HOME/mnemosyne/index`` (``~/.cache/mnemosyne/index``), so every
    ``mnemo`` process on this machine maps it instead of building it.
    ``MNEMO_INDEX_CACHE=none`` gives no cache: a PostgreSQL store's index is then
    built by each process; a store directory keeps its own ``recall-index``.
    """
    given = os.environ.get(INDEX_CACHE_ENV, "")
    if given == "none":
        return None
    if given:
        return Path(given).expanduser()
    if postgres_url(str(location)) is None:
        return None
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache) / "mnemosyne" / "index"


AuthorOpt = Annotated[
    str | None,
    typer.Option(
        "--author",
        metavar="NAME",
        envvar="MNEMO_AUTHOR",
        help="Who is writing (default: $MNEMO_AUTHOR, else your user name).",
        show_default=False,
    ),
]
AtOpt = Annotated[
    str | None,
    typer.Option("--at", metavar="REV", help="Read this revision instead of HEAD.", show_default=False),
]
AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="TIME",
        help="Read the branch as it was at TIME (RFC 3339; a bare date is midnight UTC).",
        show_default=False,
    ),
]

VerifiedWithinOpt = Annotated[
    str | None,
    typer.Option(
        "--verified-within",
        metavar="DURATION",
        help="Leave out memories last confirmed (written, or re-confirmed with 'mnemo verify') longer "
        "ago than DURATION before --as-of, else now: 30d, 12h, 90m, 1d12h.",
        show_default=False,
    ),
]


def window_or_none(text: str | None) -> timedelta | None:
    """Parse an optional ``--verified-within`` duration."""
    return parse_duration(text, "--verified-within") if text is not None else None


def as_location(text: str | None) -> Path | str | None:
    """A ``--repo`` value: a PostgreSQL URL stays text (a path would fold its ``//``), else a path."""
    if text is None:
        return None
    return text if postgres_url(text) is not None else Path(text)


@dataclass
class State:
    """The global options, kept in the root context's ``obj``.

    Attributes:
        repo: the store given with ``--repo`` or ``MNEMO_DIR`` (a directory, or a
            ``postgresql://`` URL), if any.
        tenant: the tenant given with ``--tenant``, if any.
        json: print JSON instead of human text.
    """

    repo: Path | str | None
    tenant: str | None
    json: bool

    def store_path(self) -> Path | str:
        """The store: ``--repo``/``MNEMO_DIR`` (a directory or a URL), else the nearest ``.mnemo`` upward.

        Raises:
            NotFound: when no store directory can be found.
        """
        if self.repo is not None:
            return self.repo
        here = Path.cwd()
        for folder in (here, *here.parents):
            candidate = folder / STORE_DIR
            if candidate.is_dir():
                return candidate
        raise NotFound(
            f"no store found: no {STORE_DIR} directory here or in any parent "
            "(use --repo PATH, set MNEMO_DIR, or run 'mnemo init')"
        )

    def open(
        self,
        ctx: typer.Context,
        *,
        readonly: bool | Literal["auto"] = False,
        tenant: str | None = None,
        embeds: bool = False,
    ) -> Repo:
        """Open the store for this command; it is closed when the command ends.

        Args:
            ctx: the command's context (the handle is released when it closes).
            readonly: open for reading only; ``"auto"``: for writing when this
                process may write the store, else read-only.
            tenant: the tenant to bind to instead of ``--tenant``.
            embeds: the command searches or embeds, so ``MNEMO_EMBEDDER`` applies
                (other commands never load an embedder).

        Returns:
            The open store, bound to ``--tenant`` (or the default tenant), using the
            embedder ``MNEMO_EMBEDDER`` names when it is set.
        """
        path = self.store_path()
        repo = Repo.open(
            path,
            tenant=tenant or self.tenant or DEFAULT_TENANT,
            readonly=readonly,
            index_cache=index_cache(path),
        )
        ctx.call_on_close(repo.close)
        unfinished = repo.store.unfinished_clone
        if unfinished is not None:
            typer.echo(
                f"warning: {repo.store.where} is an unfinished clone of {unfinished}: "
                "run the same clone again to finish it",
                err=True,
            )
        embedder = os.environ.get(EMBEDDER_ENV) if embeds else None
        if embedder:
            try:
                repo.use_embedder(embedder)
            except ValueError as error:  # InvalidInput, or a hash-DIM whose DIM is no number
                message = str(error) if isinstance(error, MnemoError) else f"unknown embedder {embedder!r}"
                raise InvalidInput(f"{EMBEDDER_ENV}: {message}") from None
        return repo


def state(ctx: typer.Context) -> State:
    """The global options of the invocation ``ctx`` belongs to."""
    found = ctx.find_object(State)
    if found is None:  # a command run without the root callback (never via ``mnemo``)
        found = State(repo=None, tenant=None, json=False)
        ctx.obj = found
    return found


def author_or_default(author: str | None) -> str:
    """The author to record: the option (or ``MNEMO_AUTHOR``), else the user name, else ``unknown``."""
    if author:
        return author
    import getpass  # only a command that records an author asks who the user is

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER: containers
        user = ""
    return user or DEFAULT_AUTHOR


def time_or_none(text: str | None) -> datetime | None:
    """Parse an optional CLI time (RFC 3339; a bare date is midnight UTC)."""
    return parse_time(text) if text is not None else None
