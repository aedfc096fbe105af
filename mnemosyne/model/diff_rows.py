"""What changed in one id, as rows: text line by line, JSON objects key by key.

The one reading of a :class:`~mnemosyne.model.results.Change` that every face
shows (``mnemo diff`` as lines, the viewer as a table): text content gets a
unified diff (hunk headers, context, removed and added lines); object content
(claims included), ``provenance`` and ``meta`` one removed and one added row per
changed key; ``kind``, ``event_time`` and ``expires_at`` a pair when they change.
An added or removed version is shown whole. A side whose version was erased has
a hash and no node: it has no rows (the library has no bytes to show), and a
face says it was erased from ``Change.old_hash``/``new_hash``.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

import msgspec

from mnemosyne.model.jsonform import node_builtins
from mnemosyne.model.objects import Node
from mnemosyne.model.results import Change

RowKind = Literal["add", "del", "ctx", "hunk", "note"]
"""An added or removed row, a line of context, a unified diff's ``@@`` header, or a note on
the line above (``\\ No newline at end of file``, as git writes it)."""

NO_NEWLINE = "\\ No newline at end of file"
"""The note below a last line that has no line break when the other side's has one."""

_ABSENT: Any = object()
_NODE_FIELDS = ("kind", "event_time", "expires_at")
_KEYED_FIELDS = ("provenance", "meta")


class DiffRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of a shown change.

    Attributes:
        kind: ``add``, ``del``, ``ctx`` or ``hunk``.
        text: a line of text content (or a hunk header), shown as it is; None
            for a row that holds a JSON value.
        key: what the value is of: an object's key, ``provenance.KEY``,
            ``meta.KEY``, or a node field (``kind``, ``event_time``,
            ``expires_at``); None for a line of text, or for content shown whole.
        value: the JSON value (when ``text`` is None): a face renders it as
            JSON or as text, as it shows values.
    """

    kind: RowKind
    text: str | None = None
    key: str | None = None
    value: Any = None


def diff_rows(change: Change) -> list[DiffRow]:
    """The rows of one change: both sides compared, or the readable side shown whole."""
    if change.old is not None and change.new is not None:
        return _modified(change.old, change.new)
    rows = _whole("del", change.old) if change.old is not None else []
    return rows + (_whole("add", change.new) if change.new is not None else [])


def _whole(kind: RowKind, node: Node) -> list[DiffRow]:
    content = node_builtins(node)["content"]
    if isinstance(content, str):
        return [DiffRow(kind=kind, text=line) for line in content.splitlines() or [""]]
    if isinstance(content, dict):
        rows = [DiffRow(kind=kind, key=key, value=content[key]) for key in sorted(content)]
        return rows or [DiffRow(kind=kind, value={})]
    return [DiffRow(kind=kind, value=content)]


def _modified(old_node: Node, new_node: Node) -> list[DiffRow]:
    old, new = node_builtins(old_node), node_builtins(new_node)
    rows = _content(old["content"], new["content"])
    for name in _NODE_FIELDS:
        if old[name] != new[name]:
            rows += [
                DiffRow(kind="del", key=name, value=old[name]),
                DiffRow(kind="add", key=name, value=new[name]),
            ]
    for name in _KEYED_FIELDS:
        rows += _keys(old[name] or {}, new[name] or {}, f"{name}.")
    return rows


def _content(old: Any, new: Any) -> list[DiffRow]:
    if old == new:
        return []
    if isinstance(old, str) and isinstance(new, str):
        return _text(old, new)
    if isinstance(old, dict) and isinstance(new, dict):
        return _keys(old, new, "")
    return [DiffRow(kind="del", value=old), DiffRow(kind="add", value=new)]


def _text(old: str, new: str) -> list[DiffRow]:
    # Lines keep their breaks, so texts that differ only in a break (a final newline, \r\n)
    # still show a change; the break itself is shown as git shows it, only where it differs.
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    open_end = {"del": _open_end(old_lines), "add": _open_end(new_lines)}
    noted = (open_end["del"] is None) != (open_end["add"] is None)
    rows: list[DiffRow] = []
    for line in difflib.unified_diff(old_lines, new_lines, n=3):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            rows.append(DiffRow(kind="hunk", text=line.rstrip("\n")))
            continue
        kind: RowKind = "add" if line[:1] == "+" else "del" if line[:1] == "-" else "ctx"
        body = line[1:]
        shown = body.splitlines()
        rows.append(DiffRow(kind=kind, text=shown[0] if shown else ""))
        if noted and kind != "ctx" and body == open_end[kind]:
            rows.append(DiffRow(kind="note", text=NO_NEWLINE))
    return rows


def _open_end(lines: list[str]) -> str | None:
    """The last line when it has no line break (None: the text ends with one, or is empty)."""
    if lines and lines[-1].splitlines()[0] == lines[-1]:
        return lines[-1]
    return None


def _keys(old: dict[str, Any], new: dict[str, Any], prefix: str) -> list[DiffRow]:
    rows: list[DiffRow] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before == after:
            continue
        if before is not _ABSENT:
            rows.append(DiffRow(kind="del", key=prefix + key, value=before))
        if after is not _ABSENT:
            rows.append(DiffRow(kind="add", key=prefix + key, value=after))
    return rows
