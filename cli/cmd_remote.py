"""Commands that share history between stores: ``remote``, ``clone``, ``fetch``, ``pull``, ``push``.

A remote is another store (a directory, or a URL such as ``postgresql://…``, or
a store ``mnemo serve`` serves, ``http://…``), named in this store. History
moves by hash: the receiving store gets exactly the objects it lacks, checks
each one's hash, and moves its refs last. A served store takes a token: from the
file named with ``--token-file`` when the remote has one, else from
``MNEMO_TOKEN`` (read here, passed to the library); never from the URL. ``fetch``,
``pull`` and ``push`` take ``--token-file`` too, for that command alone: before both.
"""

import contextlib
import os
import stat
from pathlib import Path
from typing import Annotated

import typer

from mnemosyne import BucketOptions, MnemoError, Repo, Store, SyncReport, TenantSync
from mnemosyne.model.choices import MergeStrategy

from . import exits
from .cmd_merge import report_merge
from .render import emit, note, say, short
from .state import AuthorOpt, State, author_or_default, state

RemoteArg = Annotated[
    str, typer.Argument(metavar="NAME", help="The remote's name (default: origin).", show_default=False)
]
BranchArg = Annotated[
    str | None,
    typer.Argument(metavar="BRANCH", help="The branch (default: the current one).", show_default=False),
]
AllTenantsOpt = Annotated[
    bool,
    typer.Option(
        "--all-tenants",
        help="Every tenant, each into its namesake, not only the one --tenant selects (not over HTTP).",
    ),
]
TokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        metavar="PATH",
        help="For a store served over HTTP: a file holding the token to send (its path is kept, and "
        "the file is read at each use, before MNEMO_TOKEN).",
        show_default=False,
    ),
]
OnceTokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        metavar="PATH",
        help="For a remote served over HTTP: send the token in this file, this once (before the "
        "remote's own token file and MNEMO_TOKEN; the remote keeps its own).",
        show_default=False,
    ),
]

EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        help="For a bucket (s3://BUCKET/PREFIX): the S3-compatible server (default: AWS_ENDPOINT_URL, "
        "else AWS's own).",
        show_default=False,
    ),
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        help="For a bucket: its region (default: AWS_REGION, or the profile's).",
        show_default=False,
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="For a bucket: the AWS profile whose credentials to use (default: AWS_PROFILE, or the "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY variables).",
        show_default=False,
    ),
]


def _bucket(endpoint_url: str | None, region: str | None, profile: str | None) -> BucketOptions | None:
    """The bucket options given on the command line (None: none was)."""
    if endpoint_url is None and region is None and profile is None:
        return None
    return BucketOptions(endpoint_url=endpoint_url, region=region, profile=profile)


TOKEN_ENV = "MNEMO_TOKEN"
"""The token sent to a remote served over HTTP that names no token file of its own."""


def _warn_if_others_read(token_file: Path | None) -> None:
    """A warning on stderr when a token file can be read by other users of this machine."""
    if token_file is None or os.name != "posix":
        return
    with contextlib.suppress(OSError):  # no such file: the library says so
        if token_file.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
            note(f"warning: other users of this machine can read the token file {token_file}: chmod 600 it")


def _token(repo: Repo | None = None, remote: str | None = None, token_file: Path | None = None) -> str | None:
    """``MNEMO_TOKEN``, unless the remote has a token file, which is then read instead.

    A token file belongs to its one remote, and the variable to any remote without
    one: a fetch from one served store never sends the token of another.
    """
    if token_file is not None:
        return None
    if repo is not None and any(
        r.name == remote and (r.token_file or r.location.startswith("s3://")) for r in repo.store.remotes()
    ):
        return None  # a bucket takes AWS credentials, never a token
    return os.environ.get(TOKEN_ENV) or None


remote_app = typer.Typer(
    name="remote",
    help="List, add or remove remotes: other stores this one fetches from and pushes to.",
    invoke_without_command=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@remote_app.callback()
def remote_list(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Show where each remote is.")] = False,
) -> None:
    """List remotes (with -v, where each is); 'remote add' and 'remote remove' change them.

    \b
      mnemo remote add origin ../shared.mnemo   name another store
      mnemo remote add hub http://hub:7777 --token-file ~/.hub.token
                                                a store mnemo serve serves
      mnemo remote add backup s3://team-bucket/memory --region eu-west-1
                                                a prefix of a bucket (S3 or compatible)
      mnemo remote -v                           list them with their locations
      mnemo remote remove origin                forget it and its remote-tracking refs

    Remotes belong to the whole store: every tenant fetches from and pushes to
    its namesake there (over HTTP, the tenant its token reaches).

    JSON Lines: {"name", "location", "token_file"}.
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    if ctx.invoked_subcommand is not None:
        return
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    for found in repo.store.remotes():
        if settings.json:
            emit(found)
        elif not verbose:
            say(found.name)
        else:
            token = f"\t(token file {found.token_file})" if found.token_file else ""
            endpoint = found.bucket.endpoint_url if found.bucket is not None else None
            where = f"\t(endpoint {endpoint})" if endpoint else ""
            say(f"{found.name}\t{found.location}{token}{where}")


@remote_app.command("add")
def remote_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The remote's name (no '/').")],
    location: Annotated[
        str,
        typer.Argument(
            metavar="URL",
            help="A store directory, a store URL, http://HOST:PORT (mnemo serve), or s3://BUCKET/PREFIX.",
        ),
    ],
    token_file: TokenFileOpt = None,
    endpoint_url: EndpointOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Name another store as remote NAME (a path is kept absolute; exit 2 if NAME exists).

    A store served over HTTP (mnemo serve: URL as it prints it, without /v1)
    is reached with a token, never written in the URL: the one in --token-file
    PATH (read at each use; keep it chmod 600), else MNEMO_TOKEN.
    The token names the tenant there: fetch needs a read token, push a write
    one (admin when it carries erasures).

    A prefix of an object-storage bucket (s3://BUCKET/PREFIX: AWS S3, MinIO,
    Ceph, R2, ...) is reached with the AWS SDK's credentials (AWS_ACCESS_KEY_ID
    and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or --profile, a role), never kept;
    --endpoint-url, --region and --profile are kept with the remote.

    JSON: {"name", "location", "token_file", "bucket"}.
    """
    settings = state(ctx)
    _warn_if_others_read(token_file)
    bucket = _bucket(endpoint_url, region, profile)
    added = settings.open(ctx).store.add_remote(name, location, token_file=token_file, bucket=bucket)
    if settings.json:
        emit(added)


@remote_app.command("remove")
def remote_remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The remote to forget.")],
    author: AuthorOpt = None,
) -> None:
    """Forget remote NAME and delete its remote-tracking refs in every tenant (their reflogs stay).

    JSON: {"removed", "refs"}: how many remote-tracking refs were deleted.
    """
    settings = state(ctx)
    dropped = settings.open(ctx).store.remove_remote(name, author=author_or_default(author))
    if settings.json:
        emit({"removed": name, "refs": dropped})


def clone(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(metavar="URL", help="The store to clone: a directory, a URL, or http://HOST:PORT."),
    ],
    path: Annotated[str, typer.Argument(metavar="PATH", help="Where to create the new store.")],
    all_tenants: AllTenantsOpt = False,
    token_file: TokenFileOpt = None,
    author: AuthorOpt = None,
    endpoint_url: EndpointOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Create a store at PATH holding the history of the store at URL.

    URL becomes remote 'origin'; every branch there arrives as a
    remote-tracking ref origin/BRANCH, and its current branch as a local
    branch, checked out. One tenant (--tenant, else default) is cloned, or
    every one with --all-tenants. PATH must not exist, or be empty, or hold a
    store with nothing in it yet. A clone that fails leaves nothing at PATH.

    From a store mnemo serve serves (http://HOST:PORT), the token (--token-file
    PATH, which origin keeps for later fetches and pushes, else MNEMO_TOKEN)
    names the one tenant cloned, which --tenant defaults to.

    From a bucket (s3://BUCKET/PREFIX), with the AWS SDK's credentials and
    --endpoint-url, --region, --profile (which origin keeps), the tenant
    --tenant names (default: default).

    A clone killed or interrupted (Ctrl-C: exit 130, saying so) part-way
    leaves PATH marked as an unfinished clone: every command there warns,
    'mnemo fsck' reports it (exit 1), and running the same clone again
    finishes it, fetching only what is still missing.

    JSON: {"path", "origin", "tenant", "head", "remote_branches": [{"name", "commit"}]}.
    """
    settings = state(ctx)
    _warn_if_others_read(token_file)
    try:
        repo = Repo.clone(
            source,
            path,
            tenant=settings.tenant,
            all_tenants=all_tenants,
            author=author_or_default(author),
            token=None if source.lower().startswith("s3://") else _token(token_file=token_file),
            token_file=token_file,
            bucket=_bucket(endpoint_url, region, profile),
        )
    except KeyboardInterrupt:
        note(_interrupted_clone(path))
        raise typer.Exit(exits.INTERRUPTED) from None
    ctx.call_on_close(repo.close)
    tracked = repo.remote_branches()
    (origin,) = [r.location for r in repo.store.remotes()] or [source]
    if settings.json:
        emit(
            {
                "path": str(Path(path).resolve()),
                "origin": origin,
                "tenant": repo.tenant,
                "head": repo.head,
                "remote_branches": [{"name": name, "commit": commit.id} for name, commit in tracked],
            }
        )
        return
    count = f"{len(tracked)} branch" + ("" if len(tracked) == 1 else "es")
    say(f"Cloned {origin} into {path}: {count} as origin/*, on branch {repo.head}")


def _interrupted_clone(path: str) -> str:
    """What an interrupted clone says it left at ``path``."""
    try:
        with Store.open(path, readonly=True) as store:
            unfinished = store.unfinished_clone
    except MnemoError:
        unfinished = None
    if unfinished is None:
        return f"interrupted: nothing was cloned into {path}"
    return (
        f"interrupted: {path} is kept as an unfinished clone of {unfinished}: "
        "run the same clone again to finish it"
    )


def fetch(
    ctx: typer.Context,
    remote: RemoteArg = "origin",
    all_tenants: AllTenantsOpt = False,
    token_file: OnceTokenFileOpt = None,
    author: AuthorOpt = None,
) -> None:
    """Bring in the history of remote NAME's branches, as remote-tracking refs NAME/BRANCH.

    Exactly the objects this store lacks are copied and each is hash-checked;
    redaction records come too, and what they erased there is erased here. Local
    branches do not move: merge NAME/BRANCH (or use pull). A remote-tracking ref
    whose branch is gone there is deleted. A remote served over HTTP takes a
    read token (--token-file PATH, else its token file, else MNEMO_TOKEN) and
    answers in a few round trips besides the objects themselves.

    JSON: {"kind", "remote", "location", "tenants": [{"tenant", "commits",
    "objects", "bytes", "redactions", "refs": [{"ref", "old", "new", "forced"}]}]}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    report = repo.fetch(
        remote,
        all_tenants=all_tenants,
        author=author_or_default(author),
        token=_token(repo, remote, token_file),
        token_file=token_file,
    )
    _report_sync(settings, report)


def pull(
    ctx: typer.Context,
    remote: RemoteArg = "origin",
    branch: BranchArg = None,
    strategy: Annotated[
        MergeStrategy | None,
        typer.Option("--strategy", help="Take this side for every conflict.", show_default=False),
    ] = None,
    author: AuthorOpt = None,
    allow_unrelated: Annotated[
        bool,
        typer.Option(
            "--allow-unrelated-histories",
            help="Merge even when NAME/BRANCH and the current branch have no commit in common.",
        ),
    ] = False,
    token_file: OnceTokenFileOpt = None,
) -> None:
    """Fetch remote NAME, then merge NAME/BRANCH into the current branch.

    BRANCH defaults to the current branch's name. A fast-forward when possible;
    otherwise a three-way merge, as 'mnemo merge': contradictions are warned
    about, and conflicts stop it with nothing merged (exit 1; the fetch stays):
    resolve them with 'mnemo merge NAME/BRANCH --resolve ID=…', or pull again
    with --strategy ours|theirs.

    A NAME/BRANCH with no commit in common with the current branch (another
    store's memory: a mistyped remote?) is refused (exit 2): the current branch
    does not move, the fetch stays. --allow-unrelated-histories merges it anyway.

    Only what the fetch brought in is shown, then what the merge did.

    JSON: {"fetch": {...as fetch...}, "merge": {...as merge...}}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    target = repo.head
    name = branch or target
    report = repo.pull(
        remote,
        branch,
        strategy=strategy,
        author=author_or_default(author),
        allow_unrelated_histories=allow_unrelated,
        token=_token(repo, remote, token_file),
        token_file=token_file,
    )
    if settings.json:
        emit(report)
    else:
        # A fetch that brought nothing says nothing: the merge's line is the one true thing.
        _report_sync(settings, report.fetch, silent_when_unchanged=True)
        report_merge(settings, report.merge, f"{remote}/{name}", target)
    if report.merge.conflicts:
        raise typer.Exit(exits.PROBLEM)


def push(
    ctx: typer.Context,
    remote: RemoteArg = "origin",
    branch: BranchArg = None,
    force: Annotated[
        bool, typer.Option("-f", "--force", help="Move the remote's branch even if commits leave it.")
    ] = False,
    all_tenants: AllTenantsOpt = False,
    token_file: OnceTokenFileOpt = None,
    author: AuthorOpt = None,
) -> None:
    """Send BRANCH to remote NAME and move its branch of that name there.

    The remote receives exactly the objects it lacks, and every redaction record
    it lacks (erasing those bytes there too). Its branch then moves in one
    transaction, only forward: when it has commits this branch lacks, the push
    is refused (exit 4): pull, then push again, or --force to drop them there.
    Of two pushes racing to one branch, one lands and the other exits 4. A
    remote served over HTTP takes a write token (its token file, else
    MNEMO_TOKEN), and an admin token when the push carries erasures it lacks
    (exit 7): --token-file PATH sends another token this once.

    JSON: as fetch, with "kind": "push" and "refs" naming the remote's branch.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    report = repo.push(
        remote,
        branch,
        force=force,
        all_tenants=all_tenants,
        author=author_or_default(author),
        token=_token(repo, remote, token_file),
        token_file=token_file,
    )
    _report_sync(settings, report)


def _report_sync(settings: State, report: SyncReport, *, silent_when_unchanged: bool = False) -> None:
    if settings.json:
        emit(report)
        return
    moved = [part for part in report.tenants if part.refs or part.objects or part.redactions]
    if not moved:
        if silent_when_unchanged:
            return
        say(
            f"Already up to date with {report.remote}."
            if report.kind == "fetch"
            else "Everything up to date."
        )
        return
    say(f"{'From' if report.kind == 'fetch' else 'To'} {report.location}")
    for part in moved:
        if len(report.tenants) > 1:
            say(f"tenant {part.tenant}:")
        for line in _ref_lines(part):
            say(line)
        verb = "received" if report.kind == "fetch" else "sent"
        erased = f", {part.redactions} redaction(s)" if part.redactions else ""
        say(f"{verb} {part.commits} commit(s), {part.objects} object(s) ({part.bytes} bytes){erased}")


def _ref_lines(part: TenantSync) -> list[str]:
    lines = []
    width = max((len(update.ref) for update in part.refs), default=0)
    for update in part.refs:
        if update.new is None:
            lines.append(f" - {update.ref:<{width}}  deleted (gone from the remote)")
        elif update.old is None:
            lines.append(f" * {update.ref:<{width}}  new at {short(update.new)}")
        elif update.forced:
            lines.append(f" + {update.ref:<{width}}  {short(update.old)}...{short(update.new)} (forced)")
        else:
            lines.append(f"   {update.ref:<{width}}  {short(update.old)}..{short(update.new)}")
    return lines
