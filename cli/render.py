"""Rendering: library results as JSON (their one JSON form) and as text for people.

JSON output is the library's JSON form of each result
(:mod:`mnemosyne.model.jsonform`): every field, times in RFC 3339 UTC with
``Z``. Human output abbreviates hashes to 7 hex characters, as git does, and
escapes control characters (NUL included) so a memory cannot drive the terminal, and
invisible ones (U+202E, U+200B, ...) so that nothing shown passes for something else.
"""

import json
import re
from datetime import UTC, datetime
from typing import Any

import typer

from mnemosyne import Blame, Claim, Commit, Node, Provenance, Redaction
from mnemosyne.model.jsonform import PROVENANCE_FIELDS, to_builtins
from mnemosyne.model.validation import INVISIBLE

SHORT = 7
"""Hex characters of a hash shown in human output."""

REDACTED = "[redacted]"
"""How human output shows a version whose bytes were erased."""


# -- emitting ------------------------------------------------------------------


def emit(document: Any) -> None:
    """Print one JSON document (or one JSON Lines line) on stdout: a result in its JSON form."""
    typer.echo(json.dumps(to_builtins(document), ensure_ascii=False))


# Controls, and the invisible characters (direction overrides, zero-width spaces, ...) but
# the two joiners, which shape scripts and emoji in text and can move nothing.
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]|(?![\\u200c\\u200d])[{INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    return json.dumps(match.group(0))[1:-1]


def safe(text: str) -> str:
    """``text`` with control characters but tab and newline escaped, as JSON escapes them (NUL too).

    Invisible characters are escaped too (as JSON escapes them): an id or a memory holding a
    right-to-left override or a zero-width space shows it, rather than passing for another.
    """
    return _CONTROL.sub(_escape, text)


def say(text: str) -> None:
    """Print one line of human data on stdout, control characters escaped."""
    typer.echo(safe(text))


def note(text: str) -> None:
    """Print a message (not data) on stderr, control and invisible characters escaped (it may quote an id)."""
    typer.echo(safe(text), err=True)


# -- human text ----------------------------------------------------------------


def short(hex_id: str) -> str:
    """A hash abbreviated as git does."""
    return hex_id[:SHORT]


def when(moment: datetime | None) -> str:
    """A time for people: UTC, to the second."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(value: Any) -> str:
    """A JSON value on one line, keys sorted."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def summary(message: str) -> str:
    """The first line of a commit message."""
    return message.splitlines()[0] if message else ""


def provenance_text(provenance: Provenance) -> str:
    """The provenance fields that are set, as ``key=value`` pairs."""
    pairs = [
        f"{key}={getattr(provenance, key)}"
        for key in PROVENANCE_FIELDS
        if getattr(provenance, key) is not None
    ]
    return " ".join(pairs) if pairs else "(none)"


def preview(node: Node, width: int = 60) -> str:
    """A one-line glimpse of a node's content."""
    if isinstance(node.content, Claim):
        claim = node.content
        text = f"{claim.subject} {claim.predicate} = {compact(claim.value)} from {when(claim.valid_from)}"
    elif isinstance(node.content, str):
        text = node.content.replace("\n", " ⏎ ")
    else:
        text = compact(node.content)
    return text if len(text) <= width else text[: width - 1] + "…"


def content_lines(node: Node) -> list[str]:
    """A node's content as lines: text as is, JSON indented."""
    content = to_builtins(node)["content"]
    if isinstance(content, str):
        return content.splitlines() or [""]
    return json.dumps(content, ensure_ascii=False, indent=2, sort_keys=True).splitlines()


def node_text(node: Node) -> list[str]:
    """The ``show`` form of a node: a header of fields, a blank line, the content."""
    header = [
        ("id", node.id),
        ("hash", short(node.hash)),
        ("kind", node.kind),
        ("provenance", provenance_text(node.provenance)),
    ]
    if node.event_time is not None:
        header.append(("event_time", when(node.event_time)))
    if node.expires_at is not None:
        header.append(("expires_at", when(node.expires_at)))
    if node.meta:
        header.append(("meta", compact(node.meta)))
    return [f"{name + ':':<12}{value}" for name, value in header] + ["", *content_lines(node)]


def commit_text(commit: Commit) -> list[str]:
    """The ``log`` form of a commit, as git prints it."""
    lines = [f"commit {short(commit.id)}"]
    if len(commit.parents) > 1:
        lines.append("Merge:  " + " ".join(short(parent) for parent in commit.parents))
    lines.append(f"Author: {commit.author}")
    lines.append(f"Date:   {when(commit.record_time)}")
    lines.append("")
    lines.extend(f"    {line}" for line in (commit.message.splitlines() or [""]))
    return lines


def commit_oneline(commit: Commit) -> str:
    """A commit on one line: short id and summary."""
    return f"{short(commit.id)} {summary(commit.message)}"


def blame_text(found: Blame) -> list[str]:
    """The ``blame`` form: a header of fields, a blank line, each line with its commit.

    When the current version was erased, the header names the commit that wrote
    it and the version's hash, and says who erased the content, when and why; no
    lines follow.
    """
    commit = found.commit
    node = found.node
    header = [
        ("id", found.id),
        ("hash", short(found.hash) if node is not None else f"{short(found.hash)} {REDACTED}"),
        ("commit", short(commit.id)),
        ("author", commit.author),
        ("date", when(commit.record_time)),
        ("message", summary(commit.message)),
        ("provenance", provenance_text(node.provenance) if node is not None else REDACTED),
    ]
    if found.verified is not None:
        checked = found.verified
        header.append(("verified", f"{when(checked.record_time)} by {checked.author} ({short(checked.id)})"))
    lines = [f"{name + ':':<12}{value}" for name, value in header]
    lines.append("")
    if node is None:
        lines.append(f"(erased) {erasure_text(found.redaction)}")
        return lines
    width = max((len(line.author) for line in found.lines), default=0)
    for line in found.lines:
        text = f"{line.key}: {line.text}" if line.key is not None else line.text
        lines.append(f"{short(line.commit)} ({line.author:<{width}} {when(line.record_time)}) {text}")
    return lines


def claim_text(node: Node) -> str:
    """A claim node on one line: predicate, value, valid interval, id, short hash, provenance."""
    claim = node.content
    if not isinstance(claim, Claim):  # not a claim: fall back to a glimpse
        return f"{node.id}  {short(node.hash)}  {preview(node)}"
    valid = f"{when(claim.valid_from)}..{when(claim.valid_to) if claim.valid_to else ''}"
    return (
        f"{claim.predicate} = {compact(claim.value)}  valid {valid}  "
        f"{node.id}  {short(node.hash)}  {provenance_text(node.provenance)}"
    )


def erasure_text(redaction: Redaction | None) -> str:
    """What a redaction record says, for people."""
    if redaction is None:
        return "the content of this version was erased"
    return f"erased at {when(redaction.time)} by {redaction.author}: {redaction.reason}"
