"""How the viewer shows a change: the library's rows of it, as a template reads them.

The rows are the library's (:mod:`mnemosyne.model.diff_rows`), the same that
``mnemo diff`` prints; here values become text (text as it is, anything else as
one-line JSON). A side whose version was erased has a hash and no node: it is
shown as erased, and its bytes are never asked for (the library has none to give).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mnemosyne import Change, Node
from mnemosyne.model.diff_rows import RowKind, diff_rows
from mnemosyne.model.jsonform import node_builtins


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
    shown.rows = [
        Row(row.kind, row.text if row.text is not None else compact(row.value), row.key)
        for row in diff_rows(change)
    ]
    return shown
