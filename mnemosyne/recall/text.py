"""What recall reads of a node: its text, its words, and the hash of its content."""

from __future__ import annotations

import json
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
    """The text recall indexes and embeds, and a context shows.

    Text content as it is; the string values of JSON content (or, when it holds
    none, the content as compact JSON, so a number or a map of numbers still
    reads); a claim's subject, predicate and value.
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
        if not any(part.strip() for part in parts):
            return json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return " ".join(parts)


_ID_SEPARATORS = re.compile(r"[/_.\-]+")


def id_words(node_id: str) -> list[str]:
    """The words of an id: its segments, split at ``/``, ``_``, ``-`` and ``.`` too.

    So ``users/mira/prefs/language`` is found by "mira" and "language".
    """
    return words(_ID_SEPARATORS.sub(" ", node_id))


def document_words(node: Node) -> list[str]:
    """The words the lexical index keeps for one version: its text's, then its id's."""
    return words(text_of(node)) + id_words(node.id)


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (Unicode word characters), in order."""
    found: list[str] = _WORD.findall(text.lower())
    return found


def content_hash(node: Node) -> bytes:
    """blake3 of the canonical bytes of the node's content alone: equal texts, equal keys."""
    return codec.object_id(codec.encode(node.content))
