"""Commands that look after the store: ``tenant``, ``fsck``, ``reindex`` (with recall).

``tenant`` is a group (``list``, ``create``, ``drop``); tenants are separate
keyspaces in one store. The global ``--tenant`` picks the tenant the other
commands work in; these commands name tenants themselves.
"""

from typing import Annotated

import typer

from mnemosyne import FsckReport, InvalidInput, Store
from mnemosyne.model.defaults import DEFAULT_TENANT

from . import exits
from .cmd_recall import progress_bar
from .render import emit, note, say, short
from .state import State, index_cache, state

TenantArg = Annotated[str, typer.Argument(metavar="NAME", help="The tenant name ([a-z0-9][a-z0-9_-]*).")]

tenant_app = typer.Typer(
    name="tenant",
    help="List, create or drop tenants: separate keyspaces inside one store.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _open_store(ctx: typer.Context, settings: State, *, readonly: bool) -> Store:
    """The whole store, closed when the command ends (whatever --tenant says)."""
    path = settings.store_path()
    store = Store.open(path, readonly=readonly, index_cache=index_cache(path))
    ctx.call_on_close(store.close)
    return store


@tenant_app.command("list")
def tenant_list(ctx: typer.Context) -> None:
    """List the store's tenants, sorted; '*' marks the one --tenant selects.

    JSON Lines: {"name", "current"}.
    """
    settings = state(ctx)
    store = _open_store(ctx, settings, readonly=True)
    current = settings.tenant or DEFAULT_TENANT
    for name in store.tenants():
        if settings.json:
            emit({"name": name, "current": name == current})
        else:
            say(f"{'*' if name == current else ' '} {name}")


@tenant_app.command("create")
def tenant_create(ctx: typer.Context, name: TenantArg) -> None:
    """Create an empty tenant (exit 2 if it exists).

    Work in it with the global option: mnemo --tenant NAME COMMAND.

    JSON: {"tenant", "created"}.
    """
    settings = state(ctx)
    _open_store(ctx, settings, readonly=False).create_tenant(name)
    if settings.json:
        emit({"tenant": name, "created": True})
    else:
        say(f"Created tenant {name}")


@tenant_app.command("drop")
def tenant_drop(
    ctx: typer.Context,
    name: TenantArg,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: delete everything the tenant holds.")] = False,
) -> None:
    """Delete a tenant and everything it holds: objects, branches, reflogs, indexes.

    This cannot be undone, so it needs --yes. The default tenant cannot be
    dropped. A tenant created later under the same name starts empty.

    JSON: {"dropped", "keys"}.
    """
    settings = state(ctx)
    store = _open_store(ctx, settings, readonly=not yes)
    if not yes:
        store.check_droppable(name)
        raise InvalidInput(f"dropping tenant {name!r} deletes all its data for good; pass --yes to confirm")
    deleted = store.drop_tenant(name)
    if settings.json:
        emit({"dropped": name, "keys": deleted})
    else:
        say(f"Dropped tenant {name} ({deleted} keys deleted)")


def fsck(
    ctx: typer.Context,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="When the only problems are derived indexes out of date, rebuild them and check again.",
        ),
    ] = False,
) -> None:
    """Check the integrity of the store: objects, refs, history and indexes.

    Checks the keyspace of --tenant (default: the default tenant).
    Re-hashes every object; checks that branches, reflogs, commits and trees
    point at objects that exist; compares the derived indexes with a rebuild.
    Problems are of kind corrupt, missing or index. Exit 1 when any is found.
    --repair fixes index problems (as 'mnemo reindex' does) and nothing else.

    JSON: {"ok", "problems": [{"kind", "object", "message"}], "objects", "commits",
    "reindexed", "repaired"}: "reindexed" is the entries a repair wrote (null: no
    repair ran), "repaired" the problems it fixed.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=not repair)
    report = repo.fsck(repair=repair)
    if settings.json:
        emit(report)
    else:
        for problem in report.repaired:
            note(f"repairing {problem.kind}: {problem.message}")
        if report.reindexed is not None:
            note(f"rebuilt the derived indexes ({report.reindexed} entries written) and checked again")
        elif repair and report.problems:
            note("cannot repair: some problems are not index problems (only indexes are rebuilt)")
        _print_problems(report)
        verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        say(f"checked {report.objects} objects, {report.commits} commits: {verdict}")
    if not report.ok:
        raise typer.Exit(exits.PROBLEM)


def _print_problems(report: FsckReport) -> None:
    """One line per problem: kind, short object id (when there is one), message."""
    for problem in report.problems:
        where = f" {short(problem.object)}" if problem.object else ""
        say(f"{problem.kind}{where}: {problem.message}")


def reindex(
    ctx: typer.Context,
    vectors: Annotated[
        bool,
        typer.Option("--vectors", help="Also drop every stored embedding and compute them again."),
    ] = False,
) -> None:
    """Rebuild the derived indexes from the commits, then the recall indexes from the memories.

    First the commit graph, change and claim indexes; then search postings and
    embeddings. Safe at any time: the indexes are derived, and each rebuild is one write
    transaction. Memories without an embedding under the current embedder (the
    store's setting, or MNEMO_EMBEDDER) get one; --vectors recomputes them all.
    A progress bar is shown on a terminal.
    JSON: {"entries": N, "recall": node versions indexed}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, embeds=True)
    written = repo.reindex()
    with progress_bar("recall index") as progress:
        indexed = repo.reindex_recall(vectors=vectors, progress=progress)
    if settings.json:
        emit({"entries": written, "recall": indexed})
    else:
        say(f"Reindexed: {written} entries written")
        say(f"Recall: {indexed} node version{'' if indexed == 1 else 's'} indexed")
