"""Three-way merge of snapshots per id, merge bases, and claim contradictions.

The merge table (ours and theirs are compared with the merge base, per id):

| base | ours | theirs | result |
|---|---|---|---|
| x | x | x | unchanged |
| x | x | y | theirs (only theirs changed) |
| x | y | x | ours (only ours changed) |
| x | y | y | y (both changed identically; also both deleted) |
| x | y | z | JSON objects merged key by key when no key differs on both sides, else conflict edit/edit |
| x | deleted | y | conflict delete/edit |
| x | y | deleted | conflict edit/delete |
| absent | y | z | conflict add/add (y ≠ z) |

Nothing is written while a conflict is unresolved. Claims introduced on both
sides since the base that disagree over overlapping declared intervals are
contradictions: reported and recorded, never resolved silently, and they do not
block the merge.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import msgspec

from mnemosyne.errors import Redacted
from mnemosyne.index.view import View, WriteView
from mnemosyne.model import codec
from mnemosyne.model.objects import Claim, ContradictionObject, Node, ObjectId
from mnemosyne.model.results import ConflictKind

_P1, _P2, _STALE, _RESULT = 1, 2, 4, 8


def merge_bases(view: View, a: bytes, b: bytes) -> list[bytes]:
    """The best common ancestors of ``a`` and ``b`` (more than one in criss-cross histories).

    Walks down from both tips in generation order and stops as soon as every
    commit left to visit is below a common ancestor, so it never walks all history.
    """
    if a == b:
        return [a]
    graph = view.graph
    txn = view.txn
    flags: dict[bytes, int] = {a: _P1, b: _P2}
    heap = [(-graph.entry(txn, a).generation, a), (-graph.entry(txn, b).generation, b)]
    results: list[bytes] = []
    while heap and any(not flags[c] & _STALE for _, c in heap):
        _, commit = heapq.heappop(heap)
        mark = flags[commit] & (_P1 | _P2 | _STALE)
        if mark & (_P1 | _P2) == (_P1 | _P2):
            if not flags[commit] & _RESULT:
                flags[commit] |= _RESULT
                results.append(commit)
            mark |= _STALE
        for parent in graph.entry(txn, commit).parents:
            if flags.get(parent, 0) & mark == mark:
                continue
            flags[parent] = flags.get(parent, 0) | mark
            heapq.heappush(heap, (-graph.entry(txn, parent).generation, parent))
    return [r for r in results if not any(r != o and graph.is_ancestor(txn, r, o) for o in results)]


def _merge_maps(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any] | None:
    """Merge JSON maps key by key; None when one key changed differently on both sides."""
    merged: dict[str, Any] = {}
    missing = object()
    for key in sorted(set(base) | set(ours) | set(theirs)):
        b = base.get(key, missing)
        o = ours.get(key, missing)
        t = theirs.get(key, missing)
        if o == t:
            value = o
        elif o == b:
            value = t
        elif t == b:
            value = o
        else:
            return None
        if value is not missing:
            merged[key] = value
    return merged


def _pick(base: Any, ours: Any, theirs: Any, later_is_theirs: bool) -> Any:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return theirs if later_is_theirs else ours


def merge_json(base: Node, ours: Node, theirs: Node, later_is_theirs: bool) -> Node | None:
    """Merge two edits of a JSON-object note key by key, or None when they collide.

    Content and meta merge by key; other fields take the side that changed them,
    and the later-recorded side where both did.
    """
    if not all(n.kind == "note" and isinstance(n.content, dict) for n in (base, ours, theirs)):
        return None
    content = _merge_maps(base.content, ours.content, theirs.content)
    meta = _merge_maps(base.meta or {}, ours.meta or {}, theirs.meta or {})
    if content is None or meta is None:
        return None
    return Node(
        id=ours.id,
        content=content,
        kind="note",
        provenance=_pick(base.provenance, ours.provenance, theirs.provenance, later_is_theirs),
        event_time=_pick(base.event_time, ours.event_time, theirs.event_time, later_is_theirs),
        meta=meta or None,
        expires_at=_pick(base.expires_at, ours.expires_at, theirs.expires_at, later_is_theirs),
    )


class ThreeWay(msgspec.Struct):
    """What a three-way merge of snapshots decided before resolutions."""

    edits: dict[str, bytes | None]
    """Changes to apply on top of ours: id → new hash (None: delete)."""
    merged: dict[bytes, Node]
    """Nodes made by key-by-key merges, by hash (not yet stored)."""
    conflicts: list[tuple[str, ConflictKind, bytes | None, bytes | None, bytes | None]]
    ours_changes: dict[str, bytes | None]
    theirs_changes: dict[str, bytes | None]


def three_way(view: View, base: bytes, ours: bytes, theirs: bytes, later_is_theirs: bool) -> ThreeWay:
    """Classify every id that differs between the base and either side (see the table above)."""
    ours_diff = {key: (old, new) for key, old, new in view.tree.diff(base, ours)}
    result = ThreeWay(edits={}, merged={}, conflicts=[], ours_changes={}, theirs_changes={})
    result.ours_changes = {key: new for key, (_, new) in ours_diff.items()}
    for key, old, theirs_new in view.tree.diff(base, theirs):
        result.theirs_changes[key] = theirs_new
        if key not in ours_diff:
            result.edits[key] = theirs_new
            continue
        ours_new = ours_diff[key][1]
        if ours_new == theirs_new:
            continue
        if old is None:
            result.conflicts.append((key, "add/add", old, ours_new, theirs_new))
        elif ours_new is None:
            result.conflicts.append((key, "delete/edit", old, ours_new, theirs_new))
        elif theirs_new is None:
            result.conflicts.append((key, "edit/delete", old, ours_new, theirs_new))
        else:
            try:
                merged = merge_json(
                    view.node(old), view.node(ours_new), view.node(theirs_new), later_is_theirs
                )
            except Redacted:
                merged = None  # an erased side cannot be merged key by key: the user decides
            if merged is None:
                result.conflicts.append((key, "edit/edit", old, ours_new, theirs_new))
            else:
                oid = ObjectId(codec.object_id(codec.encode(merged)))
                result.merged[oid] = merged
                result.edits[key] = oid
    return result


def _overlap(a: Claim, b: Claim) -> bool:
    a_end = a.valid_to or datetime.max.replace(tzinfo=a.valid_from.tzinfo)
    b_end = b.valid_to or datetime.max.replace(tzinfo=b.valid_from.tzinfo)
    return a.valid_from < b_end and b.valid_from < a_end


def contradictions(
    load: Callable[[bytes], Node],
    ours_changes: dict[str, bytes | None],
    theirs_changes: dict[str, bytes | None],
    survives: Callable[[str, bytes], bool],
) -> list[tuple[Node, Node]]:
    """Pairs of claims, one introduced on each side, that contradict each other."""

    def claims_of(changes: dict[str, bytes | None]) -> dict[tuple[str, str], list[Node]]:
        found: dict[tuple[str, str], list[Node]] = {}
        for node_id, new in changes.items():
            if new is None or not survives(node_id, new):
                continue
            try:
                node = load(new)
            except Redacted:
                continue  # an erased claim contradicts nothing
            if isinstance(node.content, Claim):
                found.setdefault((node.content.subject, node.content.predicate), []).append(node)
        return found

    ours = claims_of(ours_changes)
    if not ours:
        return []
    theirs = claims_of(theirs_changes)
    pairs = []
    for attribute, mine in ours.items():
        for a in mine:
            for b in theirs.get(attribute, ()):
                ca, cb = a.content, b.content
                assert isinstance(ca, Claim) and isinstance(cb, Claim)
                if a.id != b.id and ca.value != cb.value and _overlap(ca, cb):
                    pairs.append((a, b))
    return pairs


def record(view: WriteView, pairs: Iterable[tuple[Node, Node]]) -> tuple[bytes, ...]:
    """Store a contradiction record per pair; return their ids."""
    oids = []
    for a, b in pairs:
        claim = a.content
        assert isinstance(claim, Claim)
        obj = ContradictionObject(
            claim.subject, claim.predicate, ((a.id, bytes.fromhex(a.hash)), (b.id, bytes.fromhex(b.hash)))
        )
        oids.append(view.objects.put(view.txn, obj))
    return tuple(oids)
