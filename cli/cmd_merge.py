"""Commands that bring histories together or search them: ``merge``, ``bisect``."""

from typing import Annotated, Any, cast

import typer

from mnemosyne import Claim, Commit, Contradiction, InvalidInput, MergeResult, Node, NotFound, Redacted
from mnemosyne.model.choices import CHOICES, Choice, MergeStrategy
from mnemosyne.model.jsonform import json_or_text

from . import exits
from .render import blame_text, commit_text, compact, emit, note, say, short, summary
from .state import AuthorOpt, State, author_or_default, state


def merge(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="The revision to merge in (a branch, …).")],
    into: Annotated[
        str | None,
        typer.Option(
            "--into",
            metavar="B",
            help="The branch to merge into (default: the current one).",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        MergeStrategy | None,
        typer.Option(
            "--strategy",
            help="Take this side for every conflict not named by --resolve.",
            show_default=False,
        ),
    ] = None,
    resolve: Annotated[
        list[str] | None,
        typer.Option(
            "--resolve",
            metavar="ID=CHOICE",
            help="Resolve the conflict on ID: ours, theirs, base or delete. Repeat for each id.",
            show_default=False,
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "-m",
            "--message",
            metavar="MSG",
            help="The merge commit's message (default: 'Merge SOURCE into B').",
            show_default=False,
        ),
    ] = None,
    author: AuthorOpt = None,
    allow_unrelated: Annotated[
        bool,
        typer.Option(
            "--allow-unrelated-histories",
            help="Merge even when SOURCE and the branch have no commit in common.",
        ),
    ] = False,
) -> None:
    """Merge revision SOURCE into a branch, three ways per id.

    Fast-forwards when the branch is behind SOURCE. Otherwise each id is compared
    with the merge base: a change on one side is taken; JSON objects changed on
    both sides in different keys are merged key by key; anything else is a
    conflict. With conflicts, nothing is written: they are printed and the exit
    code is 1; run again with --resolve ID=ours|theirs|base|delete for each, or
    --strategy ours|theirs for all.

    Claims on one (subject, predicate) that disagree across the two sides are
    contradictions: reported as warnings, recorded in the merge commit, and kept
    open (see 'mnemo contradictions') until a commit corrects one of them.

    Histories with no commit in common (another store's, an orphan branch's)
    are refused (exit 2), as git refuses them, unless
    --allow-unrelated-histories: then each id is merged against an empty base.

    JSON: {"commit", "conflicts", "contradictions", "fast_forward",
    "up_to_date", "previous"}: "commit" is null while conflicts stop the merge.

    \b
    Example:
      mnemo merge agent-b --resolve users/mira/lang=theirs
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    resolutions = _resolutions(resolve or [])
    repo = settings.open(ctx)
    target = into or repo.head
    result = repo.merge(
        source,
        into=into,
        resolutions=dict(resolutions) or None,
        strategy=strategy,
        message=message,
        author=author_or_default(author),
        allow_unrelated_histories=allow_unrelated,
    )
    report_merge(settings, result, source, target)
    if result.conflicts:
        raise typer.Exit(exits.PROBLEM)


def _resolutions(items: list[str]) -> dict[str, Choice]:
    """Parse ``--resolve ID=CHOICE`` options (the last ``=`` splits: ids may contain ``=``)."""
    out: dict[str, Choice] = {}
    for item in items:
        node_id, sep, choice = item.rpartition("=")
        if not sep or not node_id:
            raise InvalidInput(f"--resolve {item!r}: expected ID=CHOICE (CHOICE: {', '.join(CHOICES)})")
        if choice not in CHOICES:
            raise InvalidInput(f"--resolve {item!r}: {choice!r} is not one of {', '.join(CHOICES)}")
        if node_id in out:
            raise InvalidInput(f"--resolve names {node_id} more than once")
        out[node_id] = cast(Choice, choice)
    return out


def report_merge(settings: State, result: MergeResult, source: str, target: str) -> None:
    """Print a merge's outcome; contradictions go to stderr as warnings in human mode."""
    if settings.json:
        emit(result)
        return
    for found in result.contradictions:
        note(_contradiction_warning(found))
    if result.conflicts:
        for conflict in result.conflicts:
            erased = f" ({', '.join(conflict.erased)}: erased)" if conflict.erased else ""
            say(f"CONFLICT ({conflict.kind}): {conflict.id}{erased}")
        note(
            f"Merge of {source} into {target} stopped: {len(result.conflicts)} conflict(s), nothing written. "
            "Re-run with --resolve ID=ours|theirs|base|delete for each, or --strategy ours|theirs."
        )
        return
    made = result.commit
    assert made is not None  # no conflicts left: the library always returns a commit
    if result.fast_forward:
        before = result.previous
        start = short(before.id) if before is not None else "(no commits)"
        say(f"Updating {start}..{short(made.id)}")
        say(f"Fast-forward: {target} is now at {short(made.id)} {summary(made.message)}")
    elif result.up_to_date:
        say("Already up to date.")
    else:
        say(f"[{target} {short(made.id)}] {summary(made.message)}")


def _contradiction_warning(found: Contradiction) -> str:
    """One stderr line naming the claims that disagree."""
    parts = []
    for node in found.claims:
        value = node.content.value if isinstance(node.content, Claim) else None
        parts.append(f"{node.id} = {compact(value)}")
    return f"warning: contradiction on {found.subject} {found.predicate}: " + " vs ".join(parts)


def bisect(
    ctx: typer.Context,
    good: Annotated[
        str, typer.Option("--good", metavar="REV", help="A revision where memory was still right.")
    ],
    bad: Annotated[str, typer.Option("--bad", metavar="REV", help="A later revision where it is wrong.")],
    equals: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--equals",
            metavar="ID VALUE",
            help="Bad means ID's content (a claim's value) equals VALUE (JSON if it parses, else a string).",
            show_default=False,
        ),
    ] = None,
    present: Annotated[
        str | None,
        typer.Option("--present", metavar="ID", help="Bad means ID is present.", show_default=False),
    ] = None,
    absent: Annotated[
        str | None,
        typer.Option("--absent", metavar="ID", help="Bad means ID is absent.", show_default=False),
    ] = None,
) -> None:
    """Find the first commit where memory went wrong.

    Binary search along the first parents from --good to --bad for the first
    commit where the condition (exactly one of --equals, --present, --absent)
    holds; it must not hold at --good and must hold at --bad. Prints that commit,
    then the blame of ID there (who wrote it, from what), unless ID is absent.
    Expiry is ignored: a node counts as present in the commits that hold it.

    JSON: {"commit": the commit, "blame": the blame of ID there, or null}.

    \b
    Example:
      mnemo bisect --good v1 --bad main --equals users/mira/lang '"fr"'
    """  # noqa: D301 (\b keeps Click from rewrapping the next paragraph)
    settings = state(ctx)
    given = [
        option
        for option, value in (("--equals", equals), ("--present", present), ("--absent", absent))
        if value
    ]
    if len(given) != 1:
        raise InvalidInput("give exactly one of --equals ID VALUE, --present ID, --absent ID")
    if equals is not None:
        node_id, text = equals
        expected = _parse_value(text)

        def holds(node: Node | None) -> bool:
            return node is not None and _content_value(node) == expected

    elif present is not None:
        node_id = present

        def holds(node: Node | None) -> bool:
            return node is not None

    else:
        assert absent is not None
        node_id = absent

        def holds(node: Node | None) -> bool:
            return node is None

    repo = settings.open(ctx, readonly=True)

    def predicate(commit: Commit) -> bool:
        try:
            node = repo.get(node_id, at=commit, include_expired=True)
        except Redacted:
            return present is not None  # there, but its content is erased
        return holds(node)

    found = repo.bisect(predicate, good, bad)
    try:
        blamed = repo.blame(node_id, at=found)
    except NotFound:  # absent there
        blamed = None
    if settings.json:
        emit({"commit": found, "blame": blamed})
        return
    say(f"{short(found.id)} is the first bad commit")
    for line in commit_text(found):
        say(line)
    if blamed is not None:
        say("")
        for line in blame_text(blamed):
            say(line)
    else:
        note(f"{node_id} is not in {short(found.id)}: no blame to show")


def _parse_value(text: str) -> Any:
    """VALUE as JSON when it parses, else the plain string."""
    return json_or_text(text, "--equals VALUE")


def _content_value(node: Node) -> Any:
    """What ``--equals`` compares: a claim's value, else the content."""
    return node.content.value if isinstance(node.content, Claim) else node.content
