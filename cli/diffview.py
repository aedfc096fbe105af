"""Human forms of ``mnemo diff``: per-id changes, and a per-namespace summary.

Each id gets a ``+`` (added), ``-`` (removed) or ``~`` (modified) line; below a
modified id, text content gets a unified diff and JSON objects (including claim
content, provenance and meta) a per-key diff. A side whose version was erased is
shown as ``[redacted]`` and its short hash.
"""

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mnemosyne import Change, Diff, Node
from mnemosyne.model.jsonform import node_builtins

from .render import REDACTED, compact, short

INDENT = "    "
ROOT_NAMESPACE = "."
"""How ``--stat`` names ids with no ``/`` (``.`` can never be an id segment)."""

_ABSENT: Any = object()


def namespace(node_id: str) -> str:
    """The namespace of an id: everything before its last ``/`` (``""`` at the top)."""
    head, _, _ = node_id.rpartition("/")
    return head


def diff_lines(diff: Diff) -> Iterator[str]:
    """Every changed id in id order, each followed by what changed."""
    marked = [("+", c) for c in diff.added] + [("-", c) for c in diff.removed]
    marked += [("~", c) for c in diff.modified]
    for mark, change in sorted(marked, key=lambda pair: pair[1].id):
        yield f"{mark} {change.id}"
        yield from (INDENT + line for line in _change_lines(change))


def _side(mark: str, node: Node | None, hash_: str | None) -> list[str]:
    """One side of a change shown whole: its content, or ``[redacted]`` and its hash."""
    if node is not None:
        return [f"{mark}{line}" for line in _whole(node_builtins(node)["content"])]
    if hash_ is not None:  # the version is named but its bytes were erased
        return [f"{mark}{REDACTED} {short(hash_)}"]
    return []  # absent on this side


def _change_lines(change: Change) -> list[str]:
    if change.old is None or change.new is None:
        # Added, removed, or a side erased: nothing to compare line by line.
        return _side("-", change.old, change.old_hash) + _side("+", change.new, change.new_hash)
    old, new = node_builtins(change.old), node_builtins(change.new)
    lines = _content_diff(old["content"], new["content"])
    for field in ("kind", "event_time", "expires_at"):
        if old[field] != new[field]:
            lines += [f"-{field}: {compact(old[field])}", f"+{field}: {compact(new[field])}"]
    for field in ("provenance", "meta"):
        lines += _key_diff(old[field], new[field], f"{field}.")
    return lines


def _whole(content: Any) -> list[str]:
    if isinstance(content, str):
        return content.splitlines() or [""]
    if isinstance(content, dict):
        return [f"{key}: {compact(content[key])}" for key in sorted(content)] or ["{}"]
    return [compact(content)]


def _content_diff(old: Any, new: Any) -> list[str]:
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str):
        diffed = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
        return [line for line in diffed if not line.startswith(("---", "+++"))]
    if isinstance(old, dict) and isinstance(new, dict):
        return _key_diff(old, new, "")
    return [f"-{compact(old)}", f"+{compact(new)}"]


def _key_diff(old: dict[str, Any], new: dict[str, Any], prefix: str) -> list[str]:
    lines: list[str] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before == after:
            continue
        if before is not _ABSENT:
            lines.append(f"-{prefix}{key}: {compact(before)}")
        if after is not _ABSENT:
            lines.append(f"+{prefix}{key}: {compact(after)}")
    return lines


@dataclass
class NamespaceStat:
    """How many ids of one namespace were added, removed and modified."""

    namespace: str
    added: int = 0
    removed: int = 0
    modified: int = 0


def stat(diff: Diff) -> list[NamespaceStat]:
    """Per-namespace counts, ordered by namespace."""
    table: dict[str, NamespaceStat] = {}
    for category in ("added", "removed", "modified"):
        for change in getattr(diff, category):
            space = namespace(change.id)
            row = table.setdefault(space, NamespaceStat(space))
            setattr(row, category, getattr(row, category) + 1)
    return [table[space] for space in sorted(table)]


def stat_lines(rows: list[NamespaceStat]) -> list[str]:
    """The ``--stat`` table and a total line."""
    if not rows:
        return []
    names = [row.namespace or ROOT_NAMESPACE for row in rows]
    width = max(len(name) for name in names)
    lines = [
        f" {name:<{width}} | +{row.added} -{row.removed} ~{row.modified}"
        for name, row in zip(names, rows, strict=True)
    ]
    added = sum(row.added for row in rows)
    removed = sum(row.removed for row in rows)
    modified = sum(row.modified for row in rows)
    total = added + removed + modified
    lines.append(
        f" {total} id{'s' if total != 1 else ''} changed in {len(rows)} "
        f"namespace{'s' if len(rows) != 1 else ''}: {added} added, {removed} removed, {modified} modified"
    )
    return lines
