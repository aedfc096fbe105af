"""How the viewer shows a change: text line by line, JSON objects key by key.

The same reading as ``mnemo diff`` gives (a unified diff for text, one row per
changed key for objects, claims, provenance and meta), as rows for a template.
A side whose version was erased has a hash and no node: it is shown as erased,
and its bytes are never asked for (the library has none to give).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mnemosyne import Change, Node
from mnemosyne.model.jsonform import node_builtins

RowKind = Literal["add", "del", "ctx", "hunk"]

_ABSENT: Any = object()


@dataclass(frozen=True)
class Row:
    """One line of a shown change: added, removed, context or a hunk header; ``key`` for objects."""

    kind: RowKind
    text: str
    key: str | None = None


@dataclass
class ChangeView:
    """One changed id as the commit page shows it."""

    id: str
    mark: Literal["added", "removed", "modified"]
    old_hash: str | None
    new_hash: str | None
    old_erased: bool
    new_erased: bool
    rows: list[Row] = field(default_factory=list)


def compact(value: Any) -> str:
    """A JSON value as one line of text (text itself stays as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def content_text(node: Node) -> str:
    """A node's content for reading: text as it is, anything else as indented JSON."""
    content = node_builtins(node)["content"]
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, indent=2)


def view(change: Change, mark: Literal["added", "removed", "modified"]) -> ChangeView:
    """The rows of one change of a diff."""
    shown = ChangeView(
        change.id,
        mark,
        change.old_hash,
        change.new_hash,
        change.old is None and change.old_hash is not None,
        change.new is None and change.new_hash is not None,
    )
    if change.old is not None and change.new is not None:
        shown.rows = _modified(change.old, change.new)
    else:
        # Added, removed, or a side erased: the side that is readable is shown whole.
        if change.old is not None:
            shown.rows = _whole("del", change.old)
        if change.new is not None:
            shown.rows += _whole("add", change.new)
    return shown


def _whole(kind: RowKind, node: Node) -> list[Row]:
    content = node_builtins(node)["content"]
    if isinstance(content, str):
        return [Row(kind, line) for line in content.splitlines() or [""]]
    if isinstance(content, dict):
        return [Row(kind, compact(content[key]), key) for key in sorted(content)] or [Row(kind, "{}")]
    return [Row(kind, compact(content))]


def _modified(old_node: Node, new_node: Node) -> list[Row]:
    old, new = node_builtins(old_node), node_builtins(new_node)
    rows = _content(old["content"], new["content"])
    for name in ("kind", "event_time", "expires_at"):
        if old[name] != new[name]:
            rows += [Row("del", compact(old[name]), name), Row("add", compact(new[name]), name)]
    for name in ("provenance", "meta"):
        rows += _keys(old[name] or {}, new[name] or {}, f"{name}.")
    return rows


def _content(old: Any, new: Any) -> list[Row]:
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str):
        rows = []
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
            if line.startswith(("---", "+++")):
                continue
            if line.startswith("@@"):
                rows.append(Row("hunk", line))
            else:
                kind: RowKind = "add" if line[:1] == "+" else "del" if line[:1] == "-" else "ctx"
                rows.append(Row(kind, line[1:]))
        return rows
    if isinstance(old, dict) and isinstance(new, dict):
        return _keys(old, new, "")
    return [Row("del", compact(old)), Row("add", compact(new))]


def _keys(old: dict[str, Any], new: dict[str, Any], prefix: str) -> list[Row]:
    rows: list[Row] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before == after:
            continue
        if before is not _ABSENT:
            rows.append(Row("del", compact(before), prefix + key))
        if after is not _ABSENT:
            rows.append(Row("add", compact(after), prefix + key))
    return rows
