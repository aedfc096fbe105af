"""Human forms of ``mnemo diff``: per-id changes, and a per-namespace summary.

Each id gets a ``+`` (added), ``-`` (removed) or ``~`` (modified) line, and
below it the library's rows of the change (:mod:`mnemosyne.model.diff_rows`:
a unified diff for text, a per-key diff for JSON objects, claims, provenance
and meta) as lines. A side whose version was erased is shown as ``[redacted]``
and its short hash.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from mnemosyne import Change, Diff
from mnemosyne.model.diff_rows import DiffRow, diff_rows

from .render import REDACTED, compact, short

INDENT = "    "
ROOT_NAMESPACE = "."
"""How ``--stat`` names ids with no ``/`` (``.`` can never be an id segment)."""


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


_SIGNS = {"add": "+", "del": "-", "ctx": " "}


def _line(row: DiffRow) -> str:
    """One row as ``mnemo diff`` prints it: text as it is, values as one-line JSON."""
    if row.kind in ("hunk", "note"):
        return row.text or ""
    if row.text is not None:
        return _SIGNS[row.kind] + row.text
    key = f"{row.key}: " if row.key is not None else ""
    return f"{_SIGNS[row.kind]}{key}{compact(row.value)}"


def _change_lines(change: Change) -> list[str]:
    # A side whose version was erased is named by its hash: the library has no bytes of it.
    erased_old = change.old is None and change.old_hash is not None
    erased_new = change.new is None and change.new_hash is not None
    lines = [f"-{REDACTED} {short(change.old_hash)}"] if erased_old and change.old_hash else []
    lines += [_line(row) for row in diff_rows(change)]
    if erased_new and change.new_hash:
        lines.append(f"+{REDACTED} {short(change.new_hash)}")
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
