"""What recall reads of a node: its text, its words, and the hash of its content."""

from __future__ import annotations

import re
from typing import Any

from mnemosyne.model import codec
from mnemosyne.model.objects import Claim, Node

MAX_WORD = 64
"""Longer runs of word characters (ids, base64) are cut to this many characters."""
# The group keeps a run's first MAX_WORD characters and the match swallows the rest:
# the cut happens inside the regex engine rather than in a Python loop over words.
_WORD = re.compile(rf"(\w{{1,{MAX_WORD}}})\w*", re.UNICODE)


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def text_of(node: Node) -> str:
    """The text recall indexes.

    Text content as it is; the string values of JSON content; a claim's subject,
    predicate and value.
    """
    content = node.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, Claim):
        parts.extend([content.subject, content.predicate])
        _strings(content.value, parts)
        if not isinstance(content.value, str):
            parts.append(str(content.value))
    else:
        _strings(content, parts)
    return " ".join(parts)


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (Unicode word characters), in order."""
    found: list[str] = _WORD.findall(text.lower())
    return found


def content_hash(node: Node) -> bytes:
    """blake3 of the canonical bytes of the node's content alone: equal texts, equal keys."""
    return codec.object_id(codec.encode(node.content))
