"""Rendering: the JSON shapes of ``INTERFACE.md`` and the human text forms.

JSON output always carries every field (``meta`` ``{}`` when empty, absent
values ``null``) and times in RFC 3339 UTC with ``Z``. Human output abbreviates
hashes to 7 hex characters, as git does.
"""

import json
from datetime import UTC, datetime
from typing import Any

import typer

from mnemosyne import Blame, Claim, Commit, Diff, Node, Problem, Provenance, Version
from mnemosyne.history.merge import Conflict, Contradiction
from mnemosyne.model.results import Fact

SHORT = 7
"""Hex characters of a hash shown in human output."""

REDACTED = "[redacted]"
"""How human output shows a version whose bytes were erased."""


# -- emitting ------------------------------------------------------------------


def emit(document: Any) -> None:
    """Print one JSON document (or one JSON Lines line) on stdout."""
    typer.echo(json.dumps(document, ensure_ascii=False))


def say(text: str) -> None:
    """Print one line of human data on stdout."""
    typer.echo(text)


def note(text: str) -> None:
    """Print a message (not data) on stderr."""
    typer.echo(text, err=True)


# -- JSON shapes ---------------------------------------------------------------


def iso(when: datetime | None) -> str | None:
    """RFC 3339 in UTC with ``Z``; None stays None."""
    if when is None:
        return None
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def provenance_json(provenance: Provenance) -> dict[str, Any]:
    """The provenance as a JSON map with all four fields."""
    return {
        "agent_step": provenance.agent_step,
        "observation": provenance.observation,
        "tool_call": provenance.tool_call,
        "source": provenance.source,
    }


def claim_json(claim: Claim) -> dict[str, Any]:
    """A claim's content as a JSON map with every field."""
    return {
        "subject": claim.subject,
        "predicate": claim.predicate,
        "value": claim.value,
        "valid_from": iso(claim.valid_from),
        "valid_to": iso(claim.valid_to),
        "confidence": claim.confidence,
        "evidence": list(claim.evidence),
    }


def content_json(node: Node) -> Any:
    """A node's content as JSON (claims become maps)."""
    return claim_json(node.content) if isinstance(node.content, Claim) else node.content


def node_json(node: Node) -> dict[str, Any]:
    """The node JSON of ``INTERFACE.md``, with ``hash``."""
    return {
        "id": node.id,
        "content": content_json(node),
        "kind": node.kind,
        "provenance": provenance_json(node.provenance),
        "event_time": iso(node.event_time),
        "meta": node.meta or {},
        "expires_at": iso(node.expires_at),
        "hash": node.hash,
    }


def commit_json(commit: Commit) -> dict[str, Any]:
    """One ``log`` line."""
    return {
        "commit": commit.id,
        "parents": list(commit.parents),
        "tree": commit.tree,
        "record_time": iso(commit.record_time),
        "author": commit.author,
        "message": commit.message,
        "meta": commit.meta or {},
    }


def version_json(version: Version) -> dict[str, Any]:
    """One ``history`` line."""
    return {
        "hash": version.hash,
        "status": version.status,
        "commit": version.commit.id,
        "record_time": iso(version.commit.record_time),
        "author": version.commit.author,
        "message": version.commit.message,
        "ended_by": version.ended_by,
        "superseded_by": version.superseded_by,
        "node": optional_node_json(version.node),
    }


def blame_json(blame: Blame, erased_hash: str | None = None) -> dict[str, Any]:
    """The ``blame`` document.

    When the current version was erased (``blame.redacted``), ``provenance`` and
    ``node`` are null, ``lines`` is empty and ``hash`` is ``erased_hash`` (the
    library's ``Blame`` carries no node to take it from).
    """
    node = blame.node
    return {
        "id": blame.id,
        "hash": node.hash if node is not None else erased_hash,
        "commit": blame.commit.id,
        "author": blame.commit.author,
        "record_time": iso(blame.commit.record_time),
        "message": blame.commit.message,
        "provenance": provenance_json(node.provenance) if node is not None else None,
        "node": optional_node_json(node),
        "redacted": blame.redacted,
        "lines": [
            {
                "key": line.key,
                "text": line.text,
                "commit": line.commit,
                "author": line.author,
                "record_time": iso(line.record_time),
            }
            for line in blame.lines
        ],
    }


def diff_json(diff: Diff) -> dict[str, Any]:
    """The ``diff`` document: the two commits and the ids in each category.

    ``redacted`` lists the ids with a side whose version was erased.
    """
    return {
        "a": diff.a,
        "b": diff.b,
        "added": [change.id for change in diff.added],
        "removed": [change.id for change in diff.removed],
        "modified": [change.id for change in diff.modified],
        "redacted": sorted(
            change.id for change in (*diff.added, *diff.removed, *diff.modified) if change.redacted
        ),
    }


def fact_json(fact: Fact) -> dict[str, Any]:
    """One ``timeline`` line."""
    return {
        "id": fact.id,
        "hash": fact.node.hash,
        "commit": fact.commit.id,
        "record_time": iso(fact.commit.record_time),
        "effective_from": iso(fact.effective_from),
        "effective_to": iso(fact.effective_to),
        "supersedes": fact.supersedes,
        "node": node_json(fact.node),
    }


def optional_node_json(node: Node | None) -> dict[str, Any] | None:
    """Node JSON, or None for an absent version."""
    return node_json(node) if node is not None else None


def conflict_json(conflict: Conflict) -> dict[str, Any]:
    """One merge conflict: the id, its kind and the three versions (null where absent)."""
    return {
        "id": conflict.id,
        "kind": conflict.kind,
        "base": optional_node_json(conflict.base),
        "ours": optional_node_json(conflict.ours),
        "theirs": optional_node_json(conflict.theirs),
    }


def contradiction_json(contradiction: Contradiction) -> dict[str, Any]:
    """One contradiction: the (subject, predicate) and the claim nodes that disagree."""
    return {
        "subject": contradiction.subject,
        "predicate": contradiction.predicate,
        "claims": [node_json(node) for node in contradiction.claims],
    }


def problem_json(problem: Problem) -> dict[str, Any]:
    """One ``fsck`` problem."""
    return {"kind": problem.kind, "object": problem.object, "message": problem.message}


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
    pairs = [f"{key}={value}" for key, value in provenance_json(provenance).items() if value is not None]
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
    content = content_json(node)
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


def blame_text(found: Blame, erased_hash: str | None = None, erased: str | None = None) -> list[str]:
    """The ``blame`` form: a header of fields, a blank line, each line with its commit.

    When the current version was erased, the header names the commit that wrote
    it (and ``erased_hash``, the version's hash) and says the content was erased
    (``erased``: what the redaction record says, when known); no lines follow.
    """
    commit = found.commit
    node = found.node
    header = [
        ("id", found.id),
        ("hash", short(node.hash) if node is not None else f"{short(erased_hash or '-')} {REDACTED}"),
        ("commit", short(commit.id)),
        ("author", commit.author),
        ("date", when(commit.record_time)),
        ("message", summary(commit.message)),
        ("provenance", provenance_text(node.provenance) if node is not None else REDACTED),
    ]
    lines = [f"{name + ':':<12}{value}" for name, value in header]
    lines.append("")
    if node is None:
        lines.append(f"(erased) {erased or 'the content of this version was erased'}")
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
