"""A LangGraph value as node content: its JSON form when it has an exact one, else the serializer's bytes.

A channel's value, a checkpoint's metadata, a pending write: the saver stores each
readably where it can (ADR 33). A value *has a JSON form* when it is built only of
``dict`` (text keys), ``list``, ``str``, ``int`` (64-bit), finite ``float``,
``bool`` and ``None``, exactly those types and no subclass of them, nested less
than :data:`MAX_JSON_DEPTH` deep: such a value comes back from a node equal, of
the same types, in the same order. The store keeps a map's keys sorted, so the
order of a dict whose keys were not sorted is written beside the value, once per
set of keys (``order``: each such dict's keys in their order; every dict with
those keys has them in that order), and put back on reading: records of one
shape, a list of messages say, cost one entry. A value holding two dicts with the
same keys in different orders has no JSON form. Anything else (LangChain
messages, tuples, sets, enums, dataclasses, bytes, huge integers, NaN) is stored
as the bytes of LangGraph's serializer, marked with its type. So a stored value is
one of::

    {"json": VALUE}
    {"json": VALUE, "order": [KEYS, ...]}
    {"serde": TYPE, "bytes": BASE64}

and what a saver keeps in memory of it is :data:`Serialized`: ``(EXACT, msgpack
bytes)`` for a JSON form, LangGraph's ``(type, bytes)`` otherwise, loaded again
into fresh objects on every read (a caller may change what it is given).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from mnemosyne import CorruptObject

Serialized = tuple[str, bytes]
"""A value as it loads again: ``(EXACT, msgpack bytes)`` or LangGraph's ``(type, bytes)``."""

EXACT = "mnemosyne:exact"
"""The type of a :data:`Serialized` that is the msgpack of a value's JSON form (no serializer type is)."""

MAX_JSON_DEPTH = 56
"""Deepest nesting a JSON form may have: node content nests at most 64 deep, and the form sits inside it."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1

Dumps = Callable[[Any], tuple[str, bytes]]
Loads = Callable[[tuple[str, bytes]], Any]

_encoder = msgspec.msgpack.Encoder()  # insertion order kept: a JSON form's maps in their own order
_decode = msgspec.msgpack.decode


def json_form(value: Any) -> dict[str, Any] | None:
    """``{"json": value}`` (with ``order`` where needed) when ``value`` has an exact JSON form, else None."""
    # A dict's keys sorted -> its keys in order; and each order met -> itself.
    orders: dict[tuple[str, ...], tuple[str, ...]] = {}
    if not _exact(value, orders, 0):
        return None
    unsorted = [list(keys) for shape, keys in orders.items() if keys != shape]
    return {"json": value, "order": unsorted} if unsorted else {"json": value}


def _exact(value: Any, orders: dict[tuple[str, ...], tuple[str, ...]], depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return _utf8(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_JSON_DEPTH:
        return False
    depth += 1
    if kind is dict:
        keys = tuple(value)
        if orders.get(keys) != keys:  # records of one shape: the first is checked, the rest found here
            for key in keys:
                if type(key) is not str or not (key.isascii() or _utf8(key)):
                    return False
            if orders.setdefault(tuple(sorted(keys)), keys) != keys:
                return False  # two dicts with the same keys in different orders: one order per set of keys
            orders[keys] = keys
        value = value.values()
    elif kind is not list:
        return False
    # Text and integer items are checked here, without a call each: a put walks every
    # value it stores once, and most items of a state are text.
    for item in value:
        item_kind = type(item)
        if item_kind is str:
            if not (item.isascii() or _utf8(item)):
                return False
        elif item_kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return False
        elif not _exact(item, orders, depth):
            return False
    return True


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no JSON text holds it
        return False
    return True


def stored(dumps: Dumps, value: Any) -> tuple[dict[str, Any], Serialized]:
    """The fields that store ``value`` in a node, and what to keep of it in memory.

    Args:
        dumps: LangGraph's serializer (``serde.dumps_typed``), for a value with no JSON form.
        value: the value.
    """
    form = json_form(value)
    if form is not None:
        return form, (EXACT, _encoder.encode(value))
    typed = dumps(value)
    return {"serde": typed[0], "bytes": base64.b64encode(typed[1]).decode("ascii")}, typed


def serialized(fields: Mapping[str, Any]) -> Serialized:
    """What :func:`stored` kept in memory, from the fields it wrote (as read back from a node).

    Raises:
        CorruptObject: the fields are none of the stored forms.
    """
    if "json" in fields:
        value = fields["json"]
        if "order" in fields:
            value = _reorder(value, fields["order"])
        return EXACT, _encoder.encode(value)
    kind, data = fields.get("serde"), fields.get("bytes")
    if not isinstance(kind, str) or not isinstance(data, str):
        raise CorruptObject(
            f"a stored LangGraph value has neither 'json' nor 'serde' and 'bytes': {sorted(fields)}"
        )
    try:
        return kind, base64.b64decode(data, validate=True)
    except ValueError:
        raise CorruptObject("a stored LangGraph value's 'bytes' are not base64") from None


def load(loads: Loads, value: Serialized) -> Any:
    """A fresh copy of the value ``value`` keeps (``loads``: LangGraph's ``serde.loads_typed``)."""
    if value[0] == EXACT:
        return _decode(value[1])
    return loads(value)


def _reorder(value: Any, orders: Any) -> Any:
    """``value`` with every dict whose keys an ``order`` entry holds rebuilt with its keys in that order."""
    if not isinstance(orders, list) or not all(
        isinstance(keys, list) and all(isinstance(key, str) for key in keys) for keys in orders
    ):
        raise CorruptObject("a stored LangGraph value's 'order' is not a list of lists of keys")
    wanted = {tuple(sorted(keys)): keys for keys in orders}
    return _rebuilt(value, wanted)


def _rebuilt(value: Any, wanted: dict[tuple[str, ...], list[str]]) -> Any:
    if isinstance(value, list):
        return [_rebuilt(item, wanted) for item in value]
    if isinstance(value, dict):
        keys = wanted.get(tuple(sorted(value)))
        return {key: _rebuilt(value[key], wanted) for key in (value if keys is None else keys)}
    return value
