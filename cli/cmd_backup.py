"""Backup and restore: ``export`` and ``import``.

An export is a portable copy of the whole store (format: :mod:`mnemosyne.admin.dump_restore`);
``import`` restores one into a new, empty store with every hash as it was.
"""

import json
from pathlib import Path
from typing import IO, Annotated

import typer

from mnemosyne import ExportReport, ImportReport, InvalidInput, NotFound, Repo, Store, TenantCounts
from mnemosyne.api.locations import shown_location
from mnemosyne.model.jsonform import to_builtins

from . import exits
from .render import emit, note, say, short
from .state import STORE_DIR, State, state

FileArg = Annotated[
    str,
    typer.Argument(
        metavar="FILE|-", help="The export file; '-' for standard output or input.", show_default=False
    ),
]


SalvageOpt = Annotated[
    bool,
    typer.Option(
        "--salvage",
        help="Export a store refused as damaged (exit 5) all the same, read-only: what it still reads.",
    ),
]


def export(ctx: typer.Context, file: FileArg, salvage: SalvageOpt = False) -> None:
    """Write a portable copy of the store to FILE: every object, ref, reflog entry and redaction.

    Every tenant is exported; with --tenant, only that one. The copy is one
    consistent snapshot, and FILE appears only once it is complete (it is
    written beside it and renamed; owner-only permissions, as it holds every
    memory). With '-' the export goes to standard output and the summary to
    standard error.

    --salvage exports a store that opening refuses as damaged (its meta pages
    disagree, or do not lead to what its last commit wrote): what it still
    reads, which may lack its latest commits. Nothing is written to it; import
    the export into a new store ('mnemo import') and keep the damaged one.

    JSON: {"file", "size", "digest", "tenants": [{"name", "objects", "refs", "reflog", "redactions"}]}.
    """
    from mnemosyne.api.backup import export_store  # loaded by the commands that need it

    settings = state(ctx)
    source: Repo | Store
    if salvage:
        source = Store.open(settings.store_path(), readonly=True, salvage=True)
        ctx.call_on_close(source.close)
        only = [settings.tenant] if settings.tenant is not None else None
    else:
        source = settings.open(ctx, readonly=True)
        only = [source.tenant] if settings.tenant is not None else None
    if file == "-":
        out = typer.get_binary_stream("stdout")
        report = export_store(source, out, tenants=only)
        out.flush()
        _export_summary(settings, report, file, to_stderr=True)
        return
    report = export_store(source, Path(file), tenants=only)
    _export_summary(settings, report, file, to_stderr=False)


def import_(ctx: typer.Context, file: FileArg) -> None:
    """Restore an export from FILE into a new, empty store, with every hash as it was.

    The store is --repo (or $MNEMO_DIR, else the nearest .mnemo upward, else
    ./.mnemo); it is created when absent (and removed again, with any directory
    made for it, when the import fails), and a store that holds anything
    (exit 2) is never written to. Every tenant in FILE is restored. FILE is
    checked whole (a truncated or damaged file exits 5) and written in one
    transaction; then the derived indexes are rebuilt and every tenant is
    checked with fsck (exit 1 if it finds problems).

    JSON: {"path", "size", "digest", "tenants": [...], "fsck": {tenant: fsck report}, "ok"}.
    """
    from mnemosyne.api.backup import import_store  # loaded by the commands that need it

    settings = state(ctx)
    if settings.tenant is not None:
        raise InvalidInput("import restores every tenant in the export; leave out --tenant")
    path = _import_path(settings)
    if file == "-":
        report = import_store(path, typer.get_binary_stream("stdin"))
    else:
        try:
            handle: IO[bytes] = open(file, "rb")  # closed below; opened apart to word its errors
        except OSError as exc:
            raise InvalidInput(f"cannot read {file}: {exc.strerror or exc}") from None
        with handle:
            report = import_store(path, handle)
    _import_summary(settings, report, path)
    if not report.ok:
        raise typer.Exit(exits.PROBLEM)


def _import_path(settings: State) -> Path | str:
    """Where to import: the store the other commands would use, else ``./.mnemo``."""
    try:
        return settings.store_path()
    except NotFound:
        return Path(STORE_DIR)


def _counts_lines(tenants: list[TenantCounts]) -> list[str]:
    width = max((len(t.name) for t in tenants), default=0)
    return [
        f"  {t.name:<{width}}  {t.objects} objects, {t.refs} refs, {t.reflog} reflog entries, "
        f"{t.redactions} redactions"
        for t in tenants
    ]


def _tenants(count: int) -> str:
    return f"{count} tenant" + ("" if count == 1 else "s")


def _export_summary(settings: State, report: ExportReport, file: str, *, to_stderr: bool) -> None:
    # With '-' the export itself is on stdout, so the summary must not be.
    out = note if to_stderr else say
    if settings.json:
        document = {"file": file, **to_builtins(report)}
        if to_stderr:
            note(json.dumps(document, ensure_ascii=False))
        else:
            emit(document)
        return
    where = "standard output" if file == "-" else file
    out(
        f"Exported {_tenants(len(report.tenants))} to {where} "
        f"({report.size} bytes, digest {short(report.digest)})"
    )
    for line in _counts_lines(report.tenants):
        out(line)


def _import_summary(settings: State, report: ImportReport, path: Path | str) -> None:
    location = shown_location(path)
    problems = [(name, p) for name, fsck in report.fsck.items() for p in fsck.problems]
    if settings.json:
        emit({"path": location, **to_builtins(report)})
        return
    say(
        f"Imported {_tenants(len(report.tenants))} into {location} "
        f"({report.size} bytes, digest {short(report.digest)})"
    )
    for line in _counts_lines(report.tenants):
        say(line)
    for name, p in problems:
        where = f" {short(p.object)}" if p.object else ""
        say(f"{name}: {p.kind}{where}: {p.message}")
    say("fsck: ok" if report.ok else f"fsck: {len(problems)} problem(s)")
