"""What a LangGraph item keeps beside its value: its namespace, key and TTL, in the node's meta.

An item of :class:`~mnemosyne.integrations.langgraph.store.MnemosyneStore` is one
node whose content is the value; ``meta["langgraph"]`` holds an :class:`ItemMeta`,
and the value's own ``allowed_for`` and ``sensitivity`` label the node as recall
reads labels (ADR 18).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from mnemosyne import Node

META_KEY = "langgraph"
"""The key of a node's meta under which an item keeps its :class:`ItemMeta`."""


class ItemMeta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a node keeps of its item besides the value (under ``meta["langgraph"]``).

    Attributes:
        namespace: the item's namespace, as given (the id may hold a digest of it).
        key: the item's key, as given.
        ttl: minutes the item lives after its last write (or read, with refresh).
        refreshed: this version only pushed the expiry forward (a TTL refresh); the
            value is its predecessor's, so it is not an update.
    """

    namespace: tuple[str, ...]
    key: str
    ttl: float | None = None
    refreshed: bool = False


MAX_TTL_MINUTES = 1000 * 366 * 24 * 60
"""The longest ttl a put takes (longer ones are refused rather than overflow a date)."""


def is_text(text: str) -> bool:
    """Whether ``text`` can be stored: it encodes as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def meta_of(meta: ItemMeta, value: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A node's meta holding ``meta`` (as JSON values: lists, not tuples) and the value's labels.

    A value's top-level ``allowed_for`` (a list of uses) and ``sensitivity`` (a
    level), when well formed, label the node as recall reads labels, so a search
    scoped to a use or a sensitivity judges the item by them. Anything else under
    those names is the item's own data and labels nothing.
    """
    out: dict[str, Any] = {META_KEY: msgspec.json.decode(msgspec.json.encode(meta))}
    if value is not None:
        uses = value.get("allowed_for")
        if isinstance(uses, list) and all(isinstance(use, str) and use for use in uses):
            out["allowed_for"] = list(uses)
        if isinstance(value.get("sensitivity"), str):
            out["sensitivity"] = value["sensitivity"]
    return out


def item_meta(node: Node | None) -> ItemMeta | None:
    """The :class:`ItemMeta` of a node written by a store; None for any other node."""
    if node is None or not node.meta or not isinstance(node.content, dict):
        return None
    try:
        return msgspec.convert(node.meta.get(META_KEY), ItemMeta)
    except msgspec.ValidationError:
        return None
