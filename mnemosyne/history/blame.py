"""Blame: which commit wrote the current version of an id, and each line or field.

Stands on the change index: the versions of an id are found without reading
unrelated commits. Text is attributed line by line (difflib, as dulwich's
annotate does); a JSON object field by field; anything else as a whole.
"""

from __future__ import annotations

import difflib
import itertools
import json
from typing import Any

import msgspec

from mnemosyne.errors import NotFound, Redacted
from mnemosyne.history.walk import changes_of
from mnemosyne.index.confirmed import confirmed_by
from mnemosyne.index.view import View
from mnemosyne.model.objects import Claim, Commit, verified_ids
from mnemosyne.model.results import Blame, BlameLine

MAX_VERSIONS = 1000
"""How many older versions blame reads at most to attribute lines."""


def _units(content: Any) -> tuple[list[str | None], list[str]] | None:
    """Split content into attributable units: (keys, texts)."""
    if isinstance(content, str):
        lines = content.splitlines()
        return [None] * len(lines), lines
    if isinstance(content, Claim):
        # Field by field, like a JSON object: which commit set the value, the start...
        content = msgspec.to_builtins({name: getattr(content, name) for name in content.__struct_fields__})
    if isinstance(content, dict):
        keys = sorted(content)
        return list(keys), [json.dumps(content[k], sort_keys=True, separators=(",", ":")) for k in keys]
    return None


def blame(view: View, node_id: str, tip: bytes) -> Blame:
    """Blame ``node_id`` as it stands at commit ``tip``.

    Raises:
        NotFound: if the id is absent at ``tip``.
    """
    tip_obj = view.commit(tip)
    current = view.tree.get(tip_obj.tree, node_id)
    if current is None:
        raise NotFound(f"{node_id} is not in revision {tip.hex()[:7]}")
    # (commit id, value) newest first, one per change; older ones are read only
    # while some line still needs an owner, so a long history costs nothing extra.
    history = itertools.islice(changes_of(view, node_id, tip), MAX_VERSIONS + 1)
    versions = list(itertools.islice(history, 1))
    if not versions or versions[0][1] != current:
        raise NotFound(f"the change index has no entry for {node_id}; run 'mnemo reindex'")
    writer = versions[0][0]
    writer_commit = Commit.from_object(writer, view.commit(writer))
    last = confirmed_by(view, node_id, current, tip)
    checked = (
        Commit.from_object(last, view.commit(last))
        if last is not None and node_id in verified_ids(view.commit(last))
        else None
    )
    try:
        node = view.node(current)
    except Redacted:
        redaction = view.objects.redaction(view.txn, current)
        return Blame(
            id=node_id,
            hash=current.hex(),
            node=None,
            commit=writer_commit,
            lines=[],
            redacted=True,
            redaction=redaction,
            verified=checked,
        )

    units = _units(node.content)
    if units is None:
        text = json.dumps(msgspec.to_builtins(node.content), sort_keys=True)
        line = BlameLine(
            key=None,
            text=text,
            commit=writer_commit.id,
            author=writer_commit.author,
            record_time=writer_commit.record_time,
        )
        return Blame(
            id=node_id, hash=current.hex(), node=node, commit=writer_commit, lines=[line], verified=checked
        )

    keys, texts = units
    # owner[i]: index into ``versions`` of the oldest version line i survives in.
    owner = [0] * len(texts)
    # position[i]: where line i sits in the version being compared (None: gone).
    position: list[int | None] = list(range(len(texts)))
    newer_keys, newer_texts = keys, texts
    for index, version in enumerate(history, 1):
        versions.append(version)
        value = version[1]
        if value is None or all(p is None for p in position):
            break
        try:
            older = view.node(value)
        except NotFound:
            break
        older_units = _units(older.content)
        if older_units is None:
            break
        older_keys, older_texts = older_units
        mapping: dict[int, int] = {}
        if keys and keys[0] is not None:
            lookup = {(k, t): j for j, (k, t) in enumerate(zip(older_keys, older_texts, strict=True))}
            for j, pair in enumerate(zip(newer_keys, newer_texts, strict=True)):
                if pair in lookup:
                    mapping[j] = lookup[pair]
        else:
            matcher = difflib.SequenceMatcher(a=older_texts, b=newer_texts, autojunk=False)
            for block in matcher.get_matching_blocks():
                for offset in range(block.size):
                    mapping[block.b + offset] = block.a + offset
        for i, pos in enumerate(position):
            if pos is None:
                continue
            moved = mapping.get(pos)
            position[i] = moved
            if moved is not None:
                owner[i] = index
        newer_keys, newer_texts = older_keys, older_texts

    commits: dict[int, Commit] = {}
    lines = []
    for i, text in enumerate(texts):
        index = owner[i]
        if index not in commits:
            oid = versions[index][0]
            commits[index] = Commit.from_object(oid, view.commit(oid))
        c = commits[index]
        line = BlameLine(key=keys[i], text=text, commit=c.id, author=c.author, record_time=c.record_time)
        lines.append(_through_merge(view, node_id, versions[index][0], line))
    return Blame(
        id=node_id, hash=current.hex(), node=node, commit=writer_commit, lines=lines, verified=checked
    )


def _through_merge(view: View, node_id: str, commit: bytes, line: BlameLine) -> BlameLine:
    """For a field a merge combined key by key, the commit on the side that wrote it.

    The version list follows one line of history; a field of a merged JSON object
    that matches a parent's version is blamed in that parent's history instead.
    """
    parents = view.graph.entry(view.txn, commit).parents
    if line.key is None or len(parents) < 2:
        return line
    for parent in parents:
        if view.tree.get(view.commit(parent).tree, node_id) is None:
            continue
        try:
            side = blame(view, node_id, parent)
        except NotFound:
            continue
        for candidate in side.lines:
            if candidate.key == line.key and candidate.text == line.text:
                return candidate
    return line
